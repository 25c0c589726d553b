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
  SIZE_CACHE_ITEMS,
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

Deno.test("`itemSizesNewestFirst()` from its kept sizes equals the table, across appends, rollbacks and its cap", async () => {
  await withStore((store) => {
    // What the table says, read past the kept sizes (inside a transaction nothing is kept).
    const fromTable = (after: number) =>
      store.transaction(() => [...itemSizesNewestFirst(store, "default", after)]);
    const kept = (after: number) => [...itemSizesNewestFirst(store, "default", after)];
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
    assert.deepEqual(kept(0), []);
    append(3, "first");
    assert.deepEqual(kept(0), fromTable(0));
    assert.equal(kept(0).length, 3, "items added after the first read are read too");
    // Items written in a transaction that rolls back are never kept; the idx they had is reused.
    assert.throws(() =>
      store.transaction(() => {
        append(2, "rolled back");
        assert.equal(kept(0).length, 5, "inside the transaction its own items are seen");
        throw new Error("roll back");
      })
    );
    append(2, "kept");
    assert.deepEqual(kept(0), fromTable(0));
    assert.equal(kept(0)[0].tokens, fromTable(0)[0].tokens);
    // Past the cap the oldest kept sizes are read from the table again, in order.
    append(SIZE_CACHE_ITEMS + 300, "many");
    for (const after of [0, 2, 250, SIZE_CACHE_ITEMS]) {
      assert.deepEqual(kept(after), fromTable(after));
    }
    const all = kept(0).map((size) => size.idx);
    assert.deepEqual(all, [...all].sort((a, b) => b - a), "newest first");
    assert.equal(all.length, SIZE_CACHE_ITEMS + 305);
  });
});
