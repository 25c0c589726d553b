/**
 * The releases table and activation: an epoch compare-and-swap over published releases.
 *
 * Every test runs against real SQLite files in a fresh temporary directory.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { readEvents } from "../../store/tables/events.ts";
import { activateRelease, markLastGood, recordRelease } from "../../store/tables/releases.ts";
import { getSession } from "../../store/tables/sessions.ts";
import { count, RELEASE_A, RELEASE_B, throwsKlbr, withStore } from "./_store_support.ts";

Deno.test("`activateRelease()` bumps the epoch and records the activation", async () => {
  await withStore((store, dir) => {
    recordRelease(store, {
      id: RELEASE_A,
      path: join(dir, "releases", RELEASE_A),
      fileCount: 1,
      byteCount: 3,
    });
    recordRelease(store, {
      id: RELEASE_B,
      path: join(dir, "releases", RELEASE_B),
      fileCount: 2,
      byteCount: 5,
    });
    const first = activateRelease(store, {
      session: "default",
      expectedEpoch: 0,
      releaseId: RELEASE_A,
      reason: "startup",
    });
    const second = activateRelease(store, {
      session: "default",
      expectedEpoch: 1,
      releaseId: RELEASE_B,
      reason: "operator",
    });
    assert.deepEqual([first.epoch, second.epoch], [1, 2]);
    const session = getSession(store, "default")!;
    assert.deepEqual([session.behaviorEpoch, session.activeRelease], [2, RELEASE_B]);
    assert.deepEqual(
      store.statement("SELECT epoch, release_id, reason FROM activations ORDER BY epoch").all()
        .map((r) => ({ ...r })),
      [
        { epoch: 1, release_id: RELEASE_A, reason: "startup" },
        { epoch: 2, release_id: RELEASE_B, reason: "operator" },
      ],
    );
    const event = readEvents(store, "default", { since: second.seq - 1 })[0];
    assert.deepEqual([event.kind, event.body], ["activation", {
      epoch: 2,
      release_id: RELEASE_B,
      previous_release: RELEASE_A,
      reason: "operator",
    }]);
  });
});

Deno.test("`activateRelease()` refuses when the epoch moved", async () => {
  await withStore((store, dir) => {
    recordRelease(store, { id: RELEASE_A, path: join(dir, RELEASE_A), fileCount: 0, byteCount: 0 });
    for (let epoch = 0; epoch < 8; epoch++) {
      activateRelease(store, {
        session: "default",
        expectedEpoch: epoch,
        releaseId: RELEASE_A,
        reason: "r",
      });
    }
    const events = count(store, "SELECT COUNT(*) AS n FROM events");
    throwsKlbr(
      () =>
        activateRelease(store, {
          session: "default",
          expectedEpoch: 7,
          releaseId: RELEASE_A,
          reason: "late",
        }),
      "epoch_moved",
      "cannot activate release aaaaaaaaaaaa: epoch moved (expected 7, found 8)",
    );
    assert.equal(getSession(store, "default")?.behaviorEpoch, 8);
    assert.equal(count(store, "SELECT COUNT(*) AS n FROM activations"), 8);
    assert.equal(count(store, "SELECT COUNT(*) AS n FROM events"), events);
  });
});

Deno.test("`activateRelease()` refuses an unpublished release and malformed requests", async () => {
  await withStore((store) => {
    throwsKlbr(
      () =>
        activateRelease(store, {
          session: "default",
          expectedEpoch: 0,
          releaseId: RELEASE_A,
          reason: "r",
        }),
      "not_found",
      `cannot activate release aaaaaaaaaaaa: it was never published (got ${RELEASE_A})`,
    );
    throwsKlbr(
      () =>
        activateRelease(store, {
          session: "default",
          expectedEpoch: 0,
          releaseId: "abc",
          reason: "r",
        }),
      "invalid_input",
      /^cannot activate release: releaseId is not 64 lowercase hex digits \(got "abc"\)$/,
    );
    throwsKlbr(
      () =>
        activateRelease(store, {
          session: "ghost",
          expectedEpoch: 0,
          releaseId: RELEASE_A,
          reason: "r",
        }),
      "not_found",
    );
    assert.equal(getSession(store, "default")?.behaviorEpoch, 0);
  });
});

Deno.test("`markLastGood()` refuses a release the session never activated", async () => {
  await withStore((store, dir) => {
    recordRelease(store, { id: RELEASE_A, path: join(dir, RELEASE_A), fileCount: 0, byteCount: 0 });
    recordRelease(store, { id: RELEASE_B, path: join(dir, RELEASE_B), fileCount: 0, byteCount: 0 });
    throwsKlbr(
      () => markLastGood(store, "default", RELEASE_A),
      "invalid_input",
      `cannot mark release last good: session default never activated it (got ${RELEASE_A})`,
    );
    activateRelease(store, {
      session: "default",
      expectedEpoch: 0,
      releaseId: RELEASE_A,
      reason: "r",
    });
    markLastGood(store, "default", RELEASE_A);
    activateRelease(store, {
      session: "default",
      expectedEpoch: 1,
      releaseId: RELEASE_B,
      reason: "r",
    });
    const session = getSession(store, "default")!;
    assert.deepEqual([session.activeRelease, session.lastGoodRelease], [RELEASE_B, RELEASE_A]);
    assert.equal(readEvents(store, "default").at(-2)?.kind, "release.last_good");
  });
});

Deno.test("`recordRelease()` keeps the first row, marks a release recorded again published now, and refuses a malformed id", async () => {
  await withStore((store, _dir, time) => {
    const first = recordRelease(store, {
      id: RELEASE_A,
      path: "/r/one",
      fileCount: 1,
      byteCount: 1,
    });
    assert.equal(first.publishedAt, first.createdAt);
    time.now += 1000;
    const again = recordRelease(store, {
      id: RELEASE_A,
      path: "/r/two",
      fileCount: 1,
      byteCount: 1,
    });
    assert.deepEqual(again, { ...first, publishedAt: first.createdAt + 1000 });
    throwsKlbr(
      () =>
        recordRelease(store, {
          id: RELEASE_A.toUpperCase(),
          path: "/r",
          fileCount: 0,
          byteCount: 0,
        }),
      "invalid_input",
      /^cannot record release: id is not 64 lowercase hex digits/,
    );
    assert.throws(() => store.statement("DELETE FROM releases").run(), /releases is append-only/);
  });
});
