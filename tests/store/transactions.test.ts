/**
 * Store transactions: a throwing body rolls back, an async body is refused, nesting rolls back
 * only the failed call.
 *
 * Every test runs against real SQLite files in a fresh temporary directory.
 *
 * @module
 */

import assert from "node:assert/strict";
import { KlbrError } from "../../runtime/core/mod.ts";
import { appendEvent, readEvents } from "../../store/tables/events.ts";
import { admitInput, pendingInputs } from "../../store/tables/inputs.ts";
import { getSession } from "../../store/tables/sessions.ts";
import { count, local, withStore } from "./_store_support.ts";

Deno.test("`transaction()` rolls back every write when the body throws", async () => {
  await withStore((store) => {
    assert.throws(
      () =>
        store.transaction(() => {
          admitInput(store, local(1));
          appendEvent(store, "default", "test.note", { n: 1 });
          throw new Error("boom");
        }),
      /boom/,
    );
    assert.equal(count(store, "SELECT COUNT(*) AS n FROM inputs"), 0);
    assert.equal(count(store, "SELECT COUNT(*) AS n FROM events"), 0);
    assert.equal(getSession(store, "default")?.nextSeq, 1);
    // No transaction was left open: a new one begins.
    assert.doesNotThrow(() => store.transaction(() => {}));
  });
});

Deno.test("`transaction()` refuses an async body and writes nothing", async () => {
  await withStore((store) => {
    assert.throws(
      () =>
        store.transaction(() => {
          appendEvent(store, "default", "test.note", {});
          return Promise.resolve(1);
        }),
      /a store transaction body is synchronous/,
    );
    assert.equal(count(store, "SELECT COUNT(*) AS n FROM events"), 0);
  });
});

Deno.test("`transaction()` rolls back only a failed nested call", async () => {
  await withStore((store) => {
    store.transaction(() => {
      admitInput(store, local(1));
      assert.throws(() => admitInput(store, { ...local(2), author: "" }), KlbrError);
      assert.throws(
        () =>
          store.transaction(() => {
            admitInput(store, local(3));
            throw new Error("inner");
          }),
        /inner/,
      );
    });
    assert.deepEqual(pendingInputs(store, "default").map((i) => i.dedupeKey), [
      "local:cl_test:m1",
    ]);
    assert.deepEqual(readEvents(store, "default").map((e) => e.seq), [1]);
  });
});
