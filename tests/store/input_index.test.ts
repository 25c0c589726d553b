// Inputs are history-indexed after admission, not in its transaction: a cursor
// records the last input indexed, the rows and the cursor move in one transaction, and every
// search catches the index up first, so a search finds an input the moment it is admitted.

import assert from "node:assert/strict";
import { indexAdmittedInputs, searchHistory } from "../../store/tables/history_index.ts";
import { type AdmitInput, admitInput, admitInputs } from "../../store/tables/inputs.ts";
import { type Store } from "../../store/store.ts";
import { withStore } from "../_helpers/store.ts";

function input(n: number, text: string): AdmitInput {
  return {
    session: "default",
    sourceKind: "local",
    dedupeKey: `local:t:m${n}`,
    conversationId: "local:main",
    author: "owner",
    body: text,
  };
}

/** The cursor, the last input's rowid, and the input refs `history_fts` holds, in order. */
function indexState(store: Store): { cursor: number; last: number; refs: string[] } {
  const { cursor } = store.statement(
    "SELECT last_rowid AS cursor FROM history_cursors WHERE source = 'inputs'",
  ).get() as { cursor: number };
  const { last } = store.statement("SELECT coalesce(max(rowid), 0) AS last FROM inputs").get() as {
    last: number;
  };
  const refs = (store.statement(
    "SELECT ref FROM history_fts WHERE kind = 'input' ORDER BY rowid",
  ).all() as { ref: string }[]).map((r) => r.ref);
  return { cursor, last, refs };
}

const refs = (store: Store, text: string) =>
  searchHistory(store, "default", { text }).hits.map((h) => h.ref);

Deno.test("a search finds an input the moment it is admitted, and the index and its cursor move together", async () => {
  await withStore((store) => {
    const first = admitInput(store, input(1, "the heron flies at dawn"));
    // Admission does not index: the input is behind the cursor until something indexes it.
    assert.deepEqual(indexState(store), { cursor: 0, last: 1, refs: [] });
    assert.deepEqual(refs(store, "heron"), [`input:${first.inputId}`]);
    assert.deepEqual(indexState(store), { cursor: 1, last: 1, refs: [`input:${first.inputId}`] });
    // A second search indexes nothing again.
    assert.deepEqual(refs(store, "heron dawn"), [`input:${first.inputId}`]);
    assert.equal(indexState(store).refs.length, 1);

    const batch = admitInputs(store, [2, 3, 4, 5, 6].map((n) => input(n, `heron number ${n}`)));
    const ids = batch.map((o) => `input:${(o as { inputId: string }).inputId}`);
    // A bounded pass indexes the oldest first and moves the cursor past exactly those.
    assert.equal(indexAdmittedInputs(store, { limit: 2 }), 2);
    assert.deepEqual(indexState(store), {
      cursor: 3,
      last: 6,
      refs: [`input:${first.inputId}`, ids[0], ids[1]],
    });
    // The search catches up the rest before it reads.
    assert.deepEqual(new Set(refs(store, "heron number")), new Set(ids));
    assert.deepEqual(indexState(store), {
      cursor: 6,
      last: 6,
      refs: [`input:${first.inputId}`, ...ids],
    });
    assert.equal(indexAdmittedInputs(store), 0);
    // A duplicate writes no input, so there is nothing to index.
    assert.equal(admitInput(store, input(1, "the heron flies at dawn")).duplicate, true);
    assert.equal(indexAdmittedInputs(store), 0);
    assert.throws(() => indexAdmittedInputs(store, { limit: 0 }), /limit must be a positive/);
  });
});

Deno.test("a rolled-back index transaction leaves the cursor and the rows as they were", async () => {
  await withStore((store) => {
    const a = admitInput(store, input(1, "kingfisher by the river"));
    admitInput(store, input(2, "kingfisher on the wire"));
    assert.throws(() =>
      store.transaction(() => {
        assert.equal(indexAdmittedInputs(store), 2);
        assert.equal(indexState(store).cursor, 2, "moved inside the transaction");
        throw new Error("roll back");
      }), /roll back/);
    assert.deepEqual(indexState(store), { cursor: 0, last: 2, refs: [] });
    // The cursor never goes back, even by a direct write.
    assert.equal(indexAdmittedInputs(store, { limit: 1 }), 1);
    assert.throws(
      () => store.statement("UPDATE history_cursors SET last_rowid = 0").run(),
      /only moves forward/,
    );
    assert.deepEqual(indexState(store), { cursor: 1, last: 2, refs: [`input:${a.inputId}`] });
    assert.equal(refs(store, "kingfisher").length, 2);
    assert.deepEqual(indexState(store).cursor, 2);
  });
});
