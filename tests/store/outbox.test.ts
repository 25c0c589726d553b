// The outbox writer against real SQLite in a temp dir: every allowed move commits with its
// event, every refused move writes nothing, and a restart turns `attempting` into `unknown`.

import assert from "node:assert/strict";
import { readEvents } from "../../store/tables/events.ts";
import {
  enqueueOutbox,
  getOutbox,
  moveOutbox,
  nextOutboxWork,
  recoverOutbox,
} from "../../store/tables/outbox.ts";
import { type Store } from "../../store/store.ts";
import { KlbrError } from "../../runtime/core/mod.ts";
import { withStore as withStoreOf } from "../_helpers/store.ts";

const withStore = (fn: (store: Store) => void | Promise<void>) =>
  withStoreOf(fn, { countingClock: true });

const message = (body = "hi") => ({
  session: "default",
  conversation: "discord:123",
  destination: { channel_id: "123" },
  body,
});

const kinds = (store: Store) =>
  readEvents(store, "default", { since: 0, limit: 100 }).map((e) => e.kind);

function refuses(fn: () => unknown, code: string, text: string): void {
  assert.throws(fn, (error) => {
    assert.ok(error instanceof KlbrError);
    assert.equal(error.code, code);
    assert.equal(error.message, text);
    return true;
  });
}

Deno.test("`enqueueOutbox()` commits a pending row with its event", async () => {
  await withStore((store) => {
    const row = enqueueOutbox(store, {
      ...message(),
      destination: { channel_id: "123", reply_to: "77" },
    });
    assert.match(row.id, /^ob_/);
    assert.equal(row.state, "pending");
    assert.equal(row.attempts, 0);
    assert.deepEqual(row.destination, { channel_id: "123", reply_to: "77" });
    const { duplicate, ...record } = row;
    assert.equal(duplicate, false);
    assert.deepEqual(getOutbox(store, row.id), record);
    const [event] = readEvents(store, "default", { since: 0, limit: 10 });
    assert.equal(event.kind, "outbox.pending");
    assert.deepEqual(event.body, {
      outbox_id: row.id,
      state: "pending",
      conversation: "discord:123",
      destination: { channel_id: "123", reply_to: "77" },
      body: "hi",
      kind: "message",
      nonce: row.id.slice(-25),
      input_id: null,
      frame_id: null,
      cell_id: null,
      ordinal: 1,
    });
    // The nonce Discord sees is the id's last 25 characters: unique like the id.
    assert.equal(row.nonce.length, 25);
  });
});

Deno.test("`enqueueOutbox()` writes one row per key and kind: one row, one nonce", async () => {
  await withStore((store) => {
    const first = enqueueOutbox(store, { ...message(), key: "k1", cellId: "c1" });
    const again = enqueueOutbox(store, { ...message(), body: "hi again", key: "k1", cellId: "c2" });
    assert.equal(again.duplicate, true);
    assert.deepEqual([again.id, again.nonce, again.body], [first.id, first.nonce, "hi"]);
    // A reaction under the same key is another kind of effect: its own row.
    const reaction = enqueueOutbox(store, {
      ...message(),
      kind: "reaction",
      body: "👍",
      destination: { channel_id: "123", message_id: "9" },
      key: "k1",
    });
    assert.equal(reaction.duplicate, false);
    assert.deepEqual(kinds(store), ["outbox.pending", "outbox.pending"]);
  });
});

Deno.test("`enqueueOutbox()` refuses a channel that is not a snowflake and writes nothing", async () => {
  await withStore((store) => {
    refuses(
      () => enqueueOutbox(store, { ...message(), destination: { channel_id: "general" } }),
      "invalid_input",
      'cannot enqueue outbox message: destination.channel_id expected a snowflake of 1-20 digits (got {"channel_id":"general"})',
    );
    assert.equal(nextOutboxWork(store), undefined);
    assert.deepEqual(kinds(store), []);
  });
});

Deno.test("`enqueueOutbox()` refuses an empty or over-long body", async () => {
  await withStore((store) => {
    assert.throws(() => enqueueOutbox(store, message("")), /cannot enqueue outbox message: body/);
    assert.throws(
      () => enqueueOutbox(store, message("x".repeat(2001))),
      /cannot enqueue outbox message: body/,
    );
    assert.deepEqual(kinds(store), []);
  });
});

Deno.test("`enqueueOutbox()` refuses a session that does not exist", async () => {
  await withStore((store) => {
    assert.throws(
      () => enqueueOutbox(store, { ...message(), session: "nobody" }),
      (error) => error instanceof KlbrError && error.code === "not_found",
    );
  });
});

Deno.test("`moveOutbox()` records every allowed move with its event", async () => {
  await withStore((store) => {
    const a = enqueueOutbox(store, message("a"));
    const b = enqueueOutbox(store, message("b"));
    const c = enqueueOutbox(store, message("c"));
    assert.equal(moveOutbox(store, a.id, "attempting").attempts, 1);
    const confirmed = moveOutbox(store, a.id, "confirmed", { remoteId: "999" });
    assert.equal(confirmed.state, "confirmed");
    assert.equal(confirmed.remoteId, "999");
    moveOutbox(store, b.id, "attempting");
    const failed = moveOutbox(store, b.id, "failed", { error: "HTTP 403" });
    assert.equal(failed.error, "HTTP 403");
    assert.equal(failed.remoteId, null);
    moveOutbox(store, c.id, "attempting");
    assert.equal(moveOutbox(store, c.id, "unknown", { error: "timed out" }).state, "unknown");
    assert.deepEqual(kinds(store), [
      "outbox.pending",
      "outbox.pending",
      "outbox.pending",
      "outbox.attempting",
      "outbox.confirmed",
      "outbox.attempting",
      "outbox.failed",
      "outbox.attempting",
      "outbox.unknown",
    ]);
    const events = readEvents(store, "default", { since: 0, limit: 100 });
    assert.deepEqual(events[4].body, {
      outbox_id: a.id,
      state: "confirmed",
      kind: "message",
      attempts: 1,
      remote_id: "999",
      error: null,
      not_before: null,
      tries: [],
    });
  });
});

Deno.test("`moveOutbox()` refuses to confirm, fail or lose a row that was never attempted", async () => {
  await withStore((store) => {
    const row = enqueueOutbox(store, message());
    for (const state of ["confirmed", "failed", "unknown"] as const) {
      refuses(
        () => moveOutbox(store, row.id, state, { remoteId: "1", error: "x" }),
        "invalid_input",
        `cannot mark outbox message ${row.id} ${state}: it is pending, not attempting (got pending)`,
      );
    }
    assert.equal(getOutbox(store, row.id)?.state, "pending");
    assert.deepEqual(kinds(store), ["outbox.pending"]);
  });
});

Deno.test("`moveOutbox()` refuses to attempt a row twice", async () => {
  await withStore((store) => {
    const row = enqueueOutbox(store, message());
    moveOutbox(store, row.id, "attempting");
    refuses(
      () => moveOutbox(store, row.id, "attempting"),
      "invalid_input",
      `cannot mark outbox message ${row.id} attempting: it is attempting, not pending (got attempting)`,
    );
    assert.equal(getOutbox(store, row.id)?.attempts, 1);
  });
});

Deno.test("`moveOutbox()` refuses a move from a final state", async () => {
  await withStore((store) => {
    const row = enqueueOutbox(store, message());
    moveOutbox(store, row.id, "attempting");
    moveOutbox(store, row.id, "unknown", { error: "reset" });
    for (const state of ["attempting", "confirmed", "failed", "unknown"] as const) {
      const from = state === "attempting" ? "pending" : "attempting";
      refuses(
        () => moveOutbox(store, row.id, state, { remoteId: "1", error: "x" }),
        "invalid_input",
        `cannot mark outbox message ${row.id} ${state}: it is unknown, not ${from} (got unknown)`,
      );
    }
    // The table refuses it too, whoever writes.
    assert.throws(
      () => store.statement(`UPDATE outbox SET state = 'pending' WHERE id = '${row.id}'`).run(),
      /a finished outbox row is final/,
    );
  });
});

Deno.test("`moveOutbox()` refuses a confirmation without a remote id and a failure without a reason", async () => {
  await withStore((store) => {
    const row = enqueueOutbox(store, message());
    moveOutbox(store, row.id, "attempting");
    refuses(
      () => moveOutbox(store, row.id, "confirmed"),
      "invalid_input",
      `cannot mark outbox message ${row.id} confirmed: a remote id is required (got undefined)`,
    );
    refuses(
      () => moveOutbox(store, row.id, "failed", { error: "" }),
      "invalid_input",
      `cannot mark outbox message ${row.id} failed: a reason is required (got "")`,
    );
    assert.equal(getOutbox(store, row.id)?.state, "attempting");
  });
});

Deno.test("`moveOutbox()` refuses a row that does not exist", async () => {
  await withStore((store) => {
    refuses(
      () => moveOutbox(store, "ob_missing", "attempting"),
      "not_found",
      "cannot find outbox message: no row ob_missing (got ob_missing)",
    );
  });
});

Deno.test("`nextOutboxWork()` gives pending rows in the order they were written", async () => {
  await withStore((store) => {
    const a = enqueueOutbox(store, message("a"));
    const b = enqueueOutbox(store, message("b"));
    assert.equal(nextOutboxWork(store)?.id, a.id);
    moveOutbox(store, a.id, "attempting");
    assert.equal(nextOutboxWork(store)?.id, b.id);
    moveOutbox(store, b.id, "attempting");
    assert.equal(nextOutboxWork(store), undefined);
  });
});

Deno.test("`recoverOutbox()` marks attempting rows unknown and leaves the others", async () => {
  await withStore((store) => {
    const pending = enqueueOutbox(store, message("p"));
    const attempting = enqueueOutbox(store, message("a"));
    const confirmed = enqueueOutbox(store, message("c"));
    moveOutbox(store, attempting.id, "attempting");
    moveOutbox(store, confirmed.id, "attempting");
    moveOutbox(store, confirmed.id, "confirmed", { remoteId: "5" });
    assert.deepEqual(recoverOutbox(store, "default"), [attempting.id]);
    const lost = getOutbox(store, attempting.id);
    assert.equal(lost?.state, "unknown");
    assert.equal(lost?.attempts, 1);
    assert.match(lost?.error ?? "", /restarted during the request/);
    assert.equal(getOutbox(store, pending.id)?.state, "pending");
    assert.equal(getOutbox(store, confirmed.id)?.state, "confirmed");
    assert.deepEqual(recoverOutbox(store, "default"), []);
  });
});
