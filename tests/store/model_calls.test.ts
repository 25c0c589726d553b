// The model calls writer: a call is recorded before its request with its causation, finished
// once with its usage, and a call left open by a crash is finished failed at start.

import assert from "node:assert/strict";
import { readEventsOfKind } from "../../store/tables/events.ts";
import {
  failOpenModelCalls,
  finishModelCall,
  getModelCall,
  modelUsageSince,
  modelUsageTotalsSince,
  startModelCall,
} from "../../store/tables/model_calls.ts";
import { isKlbrError } from "../../runtime/core/mod.ts";
import { modelCallsOf } from "../_helpers/store.ts";
import { someCell, withClockedStore } from "../_helpers/unattended.ts";

Deno.test("`startModelCall()` and `finishModelCall()` record a call with its causation and usage", async () => {
  await withClockedStore(({ store, clock }) => {
    const cellId = someCell(store);
    const id = startModelCall(store, {
      session: "default",
      kind: "llm",
      route: "fast",
      cellId,
      request: { prompt: "hi" },
    });
    assert.equal(getModelCall(store, id)?.state, "requested");
    // Counted as soon as it is requested, with tokens unknown.
    assert.deepEqual(modelUsageSince(store, 0), [{ at: clock.now, tokens: 0 }]);
    assert.deepEqual(modelUsageTotalsSince(store, 0), { requests: 1, tokens: 0 });
    const done = finishModelCall(store, id, {
      state: "done",
      response: { text: "hello" },
      promptTokens: 10,
      completionTokens: 5,
    });
    assert.deepEqual([done.state, done.promptTokens, done.completionTokens], ["done", 10, 5]);
    assert.deepEqual(modelUsageSince(store, 0), [{ at: clock.now, tokens: 15 }]);
    // The totals are the calls summed; a window that starts later counts none.
    assert.deepEqual(modelUsageTotalsSince(store, 0), { requests: 1, tokens: 15 });
    assert.deepEqual(modelUsageTotalsSince(store, clock.now + 1), { requests: 0, tokens: 0 });
    assert.deepEqual(modelCallsOf(store, { cellId }).map((c) => c.id), [id]);
    const [event] = readEventsOfKind(store, "default", "model_call");
    assert.equal((event.body as { cell_id: string }).cell_id, cellId);
    assert.throws(
      () => finishModelCall(store, id, { state: "failed" }),
      (e) => isKlbrError(e, "invalid_input"),
    );
  });
});

Deno.test("`failOpenModelCalls()` finishes calls a dead daemon left open, and a turn's call has no event", async () => {
  await withClockedStore(({ store }) => {
    const id = startModelCall(store, {
      session: "default",
      kind: "turn",
      route: "main",
      request: {},
    });
    assert.deepEqual(failOpenModelCalls(store, "default", "restarted"), [id]);
    assert.deepEqual([getModelCall(store, id)?.state, getModelCall(store, id)?.error], [
      "failed",
      "restarted",
    ]);
    assert.deepEqual(failOpenModelCalls(store, "default", "again"), []);
    assert.equal(readEventsOfKind(store, "default", "model_call").length, 0);
  });
});
