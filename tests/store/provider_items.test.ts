// The provider sequence: appended in order, one result per tool call, and closed after a crash
// so the next request is valid and no finished cell runs again.

import assert from "node:assert/strict";
import { isKlbrError } from "../../runtime/core/mod.ts";
import { startCell } from "../../store/tables/cells.ts";
import { startGeneration } from "../../store/tables/kernel_generations.ts";
import {
  appendProviderItems,
  closeDanglingToolCalls,
  type DanglingCall,
  itemSizesNewestFirst,
} from "../../store/tables/provider_items.ts";
import { providerItems, withStore } from "../_helpers/store.ts";

function throwsKlbr(fn: () => unknown, code: string, message: string) {
  try {
    fn();
    assert.fail("expected a refusal");
  } catch (error) {
    assert.ok(isKlbrError(error), String(error));
    assert.equal(error.code, code);
    assert.equal(error.message, message);
  }
}

const assistant = (...ids: string[]) => ({
  role: "assistant",
  content: null,
  tool_calls: ids.map((id) => ({
    id,
    type: "function",
    function: { name: "python", arguments: "{}" },
  })),
});

Deno.test("`appendProviderItems()` numbers messages in order and refuses a second result", async () => {
  await withStore((store) => {
    assert.deepEqual(
      appendProviderItems(store, "default", null, [
        { role: "user", content: "hi" },
        assistant("c1"),
      ]),
      [1, 2],
    );
    assert.deepEqual(
      appendProviderItems(store, "default", null, [{
        role: "tool",
        tool_call_id: "c1",
        content: "ok",
      }]),
      [3],
    );
    throwsKlbr(
      () =>
        appendProviderItems(store, "default", null, [{
          role: "tool",
          tool_call_id: "c1",
          content: "again",
        }]),
      "invalid_input",
      "cannot append provider item: tool call c1 already has its result",
    );
    throwsKlbr(
      () => appendProviderItems(store, "default", null, [{ role: "system", content: "x" }]),
      "invalid_input",
      'cannot append provider item: role must be user, assistant or tool (got "system")',
    );
    throwsKlbr(
      () => appendProviderItems(store, "default", null, [{ role: "tool", content: "x" }]),
      "invalid_input",
      "cannot append provider item: a tool message needs tool_call_id (got none)",
    );
    // A refused batch writes nothing, not even the messages before the bad one.
    throwsKlbr(
      () =>
        appendProviderItems(store, "default", null, [{ role: "user", content: "a" }, {
          role: "bad",
        }]),
      "invalid_input",
      'cannot append provider item: role must be user, assistant or tool (got "bad")',
    );
    assert.deepEqual(providerItems(store, "default").map((i) => i.idx), [1, 2, 3]);
    assert.deepEqual(providerItems(store, "default", 2).map((i) => i.role), ["tool"]);
  });
});

Deno.test("`closeDanglingToolCalls()` gives each waiting call one result, naming the cell it started", async () => {
  await withStore((store) => {
    startGeneration(store, {
      session: "default",
      reason: "start",
      skillsRevision: "s",
      behaviorRevision: null,
    });
    appendProviderItems(store, "default", null, [
      { role: "user", content: "go" },
      assistant("done", "open", "never"),
      { role: "tool", tool_call_id: "done", content: "outcome: ok" },
    ]);
    const open = startCell(store, {
      session: "default",
      generation: 1,
      toolCallId: "open",
      code: "2",
    });
    const resultOf = (call: DanglingCall) => `${call.id} ${call.cell?.id ?? "no cell"}`;

    assert.deepEqual(closeDanglingToolCalls(store, "default", { resultOf }), ["open", "never"]);
    const results = providerItems(store, "default").filter((i) => i.role === "tool");
    assert.deepEqual(results.map((i) => [i.toolCallId, i.message.content]), [
      ["done", "outcome: ok"],
      ["open", `open ${open.cellId}`],
      ["never", "never no cell"],
    ]);
    // Closing is idempotent: every call already has its one result.
    assert.deepEqual(closeDanglingToolCalls(store, "default", { resultOf }), []);
  });
});

Deno.test("`itemSizesNewestFirst()` yields every item after a bound, newest first, across pages and rollbacks", async () => {
  await withStore((store) => {
    const sizes = (after: number) => [...itemSizesNewestFirst(store, "default", after)];
    const fromTable = (after: number) =>
      store.statement(
        `SELECT idx, role, tokens FROM provider_items WHERE session_id = 'default' AND idx > ?
         ORDER BY idx DESC`,
      ).all(after).map((row) => ({ ...row }));
    const append = (n: number, text: string) =>
      appendProviderItems(
        store,
        "default",
        null,
        Array.from(
          { length: n },
          (_, i) => ({ role: "user", content: `${text} ${i}`.repeat(i % 7 + 1) }),
        ),
      );
    assert.deepEqual(sizes(0), []);
    append(3, "first");
    assert.deepEqual(sizes(0), fromTable(0));
    // Items of a transaction that rolls back are seen inside it and gone after.
    assert.throws(() =>
      store.transaction(() => {
        append(2, "rolled back");
        assert.equal(sizes(0).length, 5, "inside the transaction its own items are seen");
        throw new Error("roll back");
      })
    );
    assert.equal(sizes(0).length, 3);
    // More than a page: every bound reads the same items as the table, newest first.
    append(700, "many");
    for (const after of [0, 2, 250, 256, 443, 702, 703]) {
      assert.deepEqual(sizes(after), fromTable(after), `after ${after}`);
    }
    assert.equal(sizes(0).length, 703);
    assert.ok(sizes(0)[0].tokens > 0);
  });
});
