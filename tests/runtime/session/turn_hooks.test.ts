// The hooks a turn calls (`model.plan`, `context.prepare`, `turn.next`) are cancelled with the
// turn: an operator's `stop` during a slow hook ends the turn at once, not after the hook's
// timeout, and a hook cut by the stop is not a hook failure.

import assert from "node:assert/strict";
import type { HookName } from "../../../runtime/core/mod.ts";
import { type SessionLoop, withSessionLoop } from "../../_helpers/session_loop.ts";

/**
 * Makes `hook` "sleep" until the test lets it go (standing in for its 10 s timeout), unless its
 * call is cancelled, as the hook worker's ladder cancels it; then stops the session while it
 * sleeps and waits (bounded) for the stop to end.
 */
async function stopDuring(loop: SessionLoop, hook: HookName, answer: unknown): Promise<void> {
  let letGo!: () => void;
  const sleeping = new Promise<void>((resolve) => letGo = resolve);
  let running = false;
  loop.hooks.answer = (call) => {
    if (call.name !== hook) return undefined;
    running = true;
    return new Promise((resolve, reject) => {
      call.signal?.addEventListener("abort", () => reject(new Error("hook cancelled")));
      sleeping.then(() => resolve(answer));
    });
  };
  loop.admit("hello");
  await loop.settle(`${hook} running`, () => running);
  let stopped = false;
  const stopping = loop.session.runtime.stop("the operator stopped it").then(() => {
    stopped = true;
  });
  try {
    await loop.settle(`stop ended the turn while ${hook} still slept`, () => stopped);
  } finally {
    letGo();
    await stopping;
  }
}

Deno.test("`Session.runtime.stop()` ends a turn at once while its model.plan still runs, and records no hook failure", async () => {
  await withSessionLoop({}, async (loop) => {
    await stopDuring(loop, "model.plan", { route: "main" });
    const ended = loop.records("turn.ended");
    assert.deepEqual(ended.map((r) => r.reason), ["stopped: the operator stopped it"]);
    assert.deepEqual(loop.records("hook.failed"), [], "a cancelled hook did not fail");
    assert.equal(loop.chats().length, 0, "no request went out for a stopped turn");
  });
});

Deno.test("`Session.runtime.stop()` ends a turn at once while its turn.next still runs: stopped, not the hook's fallback", async () => {
  await withSessionLoop({}, async (loop) => {
    // A reply of text only: turn.next decides, and sleeps.
    loop.fake.enqueue({ text: "just thinking" });
    await stopDuring(loop, "turn.next", { action: "wait" });
    const ended = loop.records("turn.ended");
    assert.deepEqual(ended.map((r) => r.reason), ["stopped: the operator stopped it"]);
    assert.deepEqual(loop.records("hook.failed"), [], "a cancelled hook did not fail");
  });
});
