// A frame taking its inputs, against real SQLite: a claim of many inputs is one statement, not
// one per input, and consumes every one for its frame; a claim that cannot take one of them
// names the first such input and leaves all of them as they were. `getInputs` reads a frame's
// inputs in one query, in the order asked.

import assert from "node:assert/strict";
import { isKlbrError } from "../../runtime/core/mod.ts";
import { localDedupeKey } from "../../store/tables/dedupe_keys.ts";
import { type AdmitInput, admitInputs, getInput, getInputs } from "../../store/tables/inputs.ts";
import type { Store } from "../../store/store.ts";
import { workCounts } from "../../store/tables/work_counts.ts";
import { frameOf, recordingStatements, withStore } from "../_helpers/store.ts";

function inputs(from: number, count: number): AdmitInput[] {
  return Array.from({ length: count }, (_, i) => ({
    session: "default",
    sourceKind: "local",
    dedupeKey: localDedupeKey("claims", `m${from + i}`),
    conversationId: "local:main",
    author: "owner",
    body: `hello ${from + i}`,
  }));
}

function admit(store: Store, from: number, count: number): string[] {
  return store.transaction(() => admitInputs(store, inputs(from, count))).map((outcome) => {
    assert.ok("inputId" in outcome, `admitted: ${JSON.stringify(outcome)}`);
    return outcome.inputId;
  });
}

Deno.test("a frame claims a thousand inputs (the most a frame takes) with one statement, and every one is its own", async () => {
  await withStore((store) => {
    const ids = admit(store, 0, 1000);
    const { store: watched, asked } = recordingStatements(store);
    const frame = frameOf(watched, ids);
    const updates = [...asked].filter(([sql]) => /^\s*UPDATE inputs/.test(sql));
    assert.deepEqual(updates.map(([, times]) => times), [1], "one UPDATE of inputs, run once");
    const consumed = store.statement(
      "SELECT count(*) AS n FROM inputs WHERE status = 'consumed' AND frame_id = ?",
    ).get(frame.frameId) as { n: number };
    assert.equal(consumed.n, 1000);
    assert.equal(workCounts(store, "default").pendingInputs, 0, "the counters followed");
  });
});

Deno.test("a refused claim names its first input that cannot be taken and changes no input", async () => {
  await withStore((store) => {
    const [a, b, c, d] = admit(store, 0, 4);
    frameOf(store, [b]);
    for (
      const [ids, message] of [
        [[a, b, c], `input ${b} is not pending (got status consumed)`],
        [[a, "in_NOPE", b], "input in_NOPE does not exist (got in_NOPE)"],
      ] as const
    ) {
      assert.throws(
        () => frameOf(store, [...ids]),
        (e) => isKlbrError(e, "invalid_input") && e.message === `cannot accept frame: ${message}`,
      );
    }
    for (const id of [a, c, d]) assert.equal(getInput(store, id)?.status, "pending", id);
    assert.equal(workCounts(store, "default").pendingInputs, 3);
    // The same inputs are still free for a frame that names them rightly.
    const frame = frameOf(store, [a, c]);
    assert.deepEqual([a, c].map((id) => getInput(store, id)?.frameId), [
      frame.frameId,
      frame.frameId,
    ]);
  });
});

Deno.test("getInputs reads inputs in the order asked, in one query, leaving out unknown ids", async () => {
  await withStore((store) => {
    const ids = admit(store, 0, 300);
    const asked = [ids[299], "in_NOPE", ids[0], ...ids.slice(1, 299)];
    const { store: watched, asked: statements } = recordingStatements(store);
    const got = getInputs(watched, asked);
    assert.deepEqual(got.map((input) => input.id), [ids[299], ids[0], ...ids.slice(1, 299)]);
    assert.deepEqual(got[1], getInput(store, ids[0]), "the same record getInput gives");
    assert.equal([...statements.values()].reduce((sum, n) => sum + n, 0), 1);
    assert.deepEqual(getInputs(store, []), []);
  });
});
