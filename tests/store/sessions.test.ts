/**
 * The sessions table: the default session is created once; a malformed id is refused.
 *
 * Every test runs against real SQLite files in a fresh temporary directory.
 *
 * @module
 */

import assert from "node:assert/strict";
import { ensureSession, getSession } from "../../store/tables/sessions.ts";
import { count, throwsKlbr, withStore } from "./_store_support.ts";

Deno.test("`ensureSession()` creates the default session once", async () => {
  await withStore((store, _dir, time) => {
    const first = getSession(store, "default")!;
    time.now += 5;
    const again = ensureSession(store);
    assert.deepEqual(again, first);
    assert.deepEqual(
      { ...first, createdAt: 0 },
      {
        id: "default",
        createdAt: 0,
        state: "open",
        contextEpoch: 0,
        behaviorEpoch: 0,
        activeRelease: null,
        lastGoodRelease: null,
        nextSeq: 1,
      },
    );
    assert.equal(count(store, "SELECT COUNT(*) AS n FROM sessions"), 1);
  });
});

Deno.test("`ensureSession()` refuses a malformed session id", async () => {
  await withStore((store) => {
    for (const id of ["", " x", "a/b", "x".repeat(65), "line\nbreak"]) {
      throwsKlbr(
        () => ensureSession(store, id),
        "invalid_input",
        `cannot use session id: expected 1-64 letters, digits, "_", "." or "-" (got ${
          JSON.stringify(id)
        })`,
      );
    }
    assert.equal(count(store, "SELECT COUNT(*) AS n FROM sessions"), 1);
  });
});
