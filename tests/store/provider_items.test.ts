// The provider sequence: appended in order, one result per tool call, and closed after a crash
// so the next request is valid and no finished cell runs again.

import assert from "node:assert/strict";
import { isKlbrError } from "../../runtime/core/mod.ts";
import { finishCell, startCell } from "../../store/cells.ts";
import { startGeneration } from "../../store/kernel_generations.ts";
import {
  appendProviderItems,
  closeDanglingToolCalls,
  readProviderItems,
} from "../../store/provider_items.ts";
import { withStore } from "../_helpers/store.ts";

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
    assert.deepEqual(readProviderItems(store, "default").map((i) => i.idx), [1, 2, 3]);
    assert.deepEqual(readProviderItems(store, "default", 2).map((i) => i.role), ["tool"]);
  });
});

Deno.test("`closeDanglingToolCalls()` gives a finished cell's result back and marks the rest interrupted", async () => {
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
    ]);
    const finished = startCell(store, {
      session: "default",
      generation: 1,
      toolCallId: "done",
      code: "1",
    });
    finishCell(store, finished.cellId, { outcome: "ok", result: { stdout: "1\n" } });
    startCell(store, { session: "default", generation: 1, toolCallId: "open", code: "2" });

    assert.deepEqual(closeDanglingToolCalls(store, "default", "the daemon restarted"), [
      "done",
      "open",
      "never",
    ]);
    const results = readProviderItems(store, "default").filter((i) => i.role === "tool");
    assert.deepEqual(results.map((i) => [i.toolCallId, i.message.content]), [
      ["done", '[recovered result, outcome ok]\n{"stdout":"1\\n"}'],
      [
        "open",
        "[interrupted: the daemon restarted; this cell did not finish and was not run again]",
      ],
      [
        "never",
        "[interrupted: the daemon restarted; this cell did not finish and was not run again]",
      ],
    ]);
    // Closing is idempotent: every call already has its one result.
    assert.deepEqual(closeDanglingToolCalls(store, "default", "again"), []);
  });
});
