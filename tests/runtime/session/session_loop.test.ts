// The session loop in-process (`Session` with a fake workbench, fake hooks and the fake model
// server, the real store in a temp dir, time moved by hand): a failed model request gives its
// inputs back and is retried after a doubling backoff; a server's `Retry-After` holds the next
// request back even when another input wakes the session; a failing plan stalls after its
// retries and the next input tries again; an ignored input is taken by a frame that runs no
// turn; an input no plan takes is shown as waiting, then expires on its timer alone.

import assert from "node:assert/strict";
import { getInput } from "../../../store/tables/inputs.ts";
import { SessionLoop, withSessionLoop } from "../../_helpers/session_loop.ts";

const OVERLOADED = { status: 500, message: "overloaded" };
const ANSWER = { toolCall: { code: "send('answered')\nwait()" } };

/** Moves the clock to the armed timer's due time, and checks it is due in `ms`. */
function advanceBy(loop: SessionLoop, ms: number, what: string): void {
  assert.equal(loop.timers.armed, 1, `${what}: one timer armed`);
  assert.equal(loop.timers.nextAt! - loop.clock.now, ms, `${what}: due in ${ms} ms`);
  loop.timers.advance(ms);
}

Deno.test("`Session` gives a failed request's input back and retries it after a doubling backoff, sending it once", async () => {
  await withSessionLoop({ retryBaseMs: 1000 }, async (loop) => {
    loop.fake.enqueue(OVERLOADED, OVERLOADED, ANSWER);
    const inputId = loop.admit("only once please");
    await loop.settle("the first retry armed", () => loop.timers.armed === 1);
    const [abandoned] = loop.records("frame.abandoned");
    assert.match(String(abandoned.reason), /model failed: .*500/);
    assert.deepEqual(abandoned.input_ids, [inputId]);
    assert.deepEqual(
      loop.records("model.failing").map((r) => [r.attempt, r.of, r.next_retry_ms]),
      [[1, 7, 1000]],
    );
    // Nothing happens before the backoff is over.
    loop.timers.advance(999);
    assert.equal(loop.chats().length, 1);
    loop.timers.advance(1);
    await loop.settle("the second retry armed", () => loop.records("model.failing").length === 2);
    assert.equal(loop.records("model.failing")[1].next_retry_ms, 2000, "the backoff doubles");
    await loop.settle("the timer armed", () => loop.timers.armed === 1);
    advanceBy(loop, 2000, "second retry");
    await loop.settle("the frame done", () => loop.records("frame.finished").length === 1);
    const [done] = loop.records("frame.finished");
    assert.deepEqual([done.state, done.input_ids], ["done", [inputId]]);
    assert.deepEqual(loop.records("send").map((r) => r.text), ["answered"]);
    assert.equal(loop.records("model.recovered").length, 1);
    const chats = loop.chats();
    assert.equal(chats.length, 3);
    const copies = chats[2].body.messages.filter((m) => m.content?.includes("only once please"));
    assert.equal(copies.length, 1, "the retried request carries the input once");
    assert.equal(loop.session.status().consecutive_failures, 0);
  });
});

Deno.test("`Session` holds the next request for a 429's Retry-After, even when another input arrives meanwhile", async () => {
  const fake = { quirks: { rateLimited: { requests: 1, retryAfterSeconds: 1 } } };
  await withSessionLoop({ retryBaseMs: 50, fake }, async (loop) => {
    loop.admit("first");
    await loop.settle("the retry armed", () => loop.timers.armed === 1);
    const [failing] = loop.records("model.failing");
    assert.equal(failing.next_retry_ms, 1000, "the server's wait, not the 50 ms backoff");
    assert.equal(failing.of, 7);
    // A new input wakes the session; the server's wait still holds.
    loop.admit("second");
    loop.timers.advance(999);
    await loop.settle("the loop idle", () => !loop.session.runtime.status().current_frame);
    assert.equal(loop.chats().length, 1);
    loop.timers.advance(1);
    await loop.settle("the frame done", () => loop.records("frame.finished").length === 1);
    assert.deepEqual(loop.fake.statuses.slice(0, 2), [429, 200]);
    assert.equal(loop.chats().length, 2);
  });
});

Deno.test("`Session` stalls after a failing plan's six retries; the inputs stay pending and the next input tries again", async () => {
  await withSessionLoop({ retryBaseMs: 1000 }, async (loop) => {
    let broken = true;
    loop.hooks.answer = (call) => {
      if (call.name === "attention.plan" && broken) throw new Error("plan exploded");
      return undefined;
    };
    const first = loop.admit("are you there?");
    for (const delay of [1000, 2000, 4000, 8000, 16000, 32000]) {
      await loop.settle(`the retry after ${delay} ms`, () => loop.timers.armed === 1);
      advanceBy(loop, delay, `retry after ${delay} ms`);
    }
    await loop.settle("the stall", () => loop.records("session.stalled").length === 1);
    assert.equal(loop.timers.armed, 0, "nothing retries by itself");
    assert.equal(loop.records("hook.failed").length, 7);
    assert.match(
      String(loop.records("session.stalled")[0].message),
      /^gave up retrying after 6 failed attempts; the inputs stay pending$/,
    );
    const status = loop.session.status();
    assert.deepEqual([status.stalled, status.pending_inputs], [true, 1]);
    assert.equal(status.last_hook_failure, "plan exploded");
    assert.equal(getInput(loop.store, first)?.status, "pending");
    assert.equal(loop.chats().length, 0);

    broken = false;
    loop.fake.enqueue(ANSWER);
    const second = loop.admit("hello again");
    await loop.settle("the frame done", () => loop.records("frame.finished").length === 1);
    assert.deepEqual(loop.records("frame.finished")[0].input_ids, [first, second]);
    assert.equal(loop.session.status().stalled, false);
  });
});

Deno.test("`Session` whose plan recovered after a stall retries a failed model request again, not stalling at once", async () => {
  await withSessionLoop({ retryBaseMs: 1000 }, async (loop) => {
    let broken = true;
    loop.hooks.answer = (call) => {
      if (call.name === "attention.plan" && broken) throw new Error("plan exploded");
      return undefined;
    };
    loop.admit("are you there?");
    for (const delay of [1000, 2000, 4000, 8000, 16000, 32000]) {
      await loop.settle(`the retry after ${delay} ms`, () => loop.timers.armed === 1);
      advanceBy(loop, delay, `retry after ${delay} ms`);
    }
    await loop.settle("the stall", () => loop.records("session.stalled").length === 1);

    // The plan works again; the model server fails once, as servers do.
    broken = false;
    loop.fake.enqueue(OVERLOADED, ANSWER);
    loop.admit("hello again");
    await loop.settle("the model failure", () => loop.records("model.failing").length === 1);
    assert.deepEqual(
      loop.records("model.failing").map((r) => [r.attempt, r.next_retry_ms]),
      [[1, 1000]],
      "the model's failure is the first of its own retries",
    );
    await loop.settle("the retry armed", () => loop.timers.armed === 1);
    advanceBy(loop, 1000, "the model's retry");
    await loop.settle("the frame done", () => loop.records("frame.finished").length === 1);
    assert.equal(loop.records("session.stalled").length, 1, "no second stall");
    assert.deepEqual(loop.records("send").map((r) => r.text), ["answered"]);
  });
});

Deno.test("`Session` gives an ignored input a frame that records the plan's reason and runs no turn", async () => {
  await withSessionLoop({}, async (loop) => {
    loop.hooks.answer = (call) => {
      if (call.name !== "attention.plan") return undefined;
      const [input] = call.args.inputs as { id: string }[];
      return { consume: [], ignore: [{ id: input.id, reason: "not for me" }], routing: {} };
    };
    const ignored = loop.admit("ignore me please");
    await loop.settle("the frame finished", () => loop.records("frame.finished").length === 1);
    const [accepted] = loop.records("frame.accepted");
    assert.deepEqual(accepted.input_ids, [ignored]);
    assert.deepEqual((accepted.routing as { ignored: unknown }).ignored, [
      { input_id: ignored, reason: "not for me" },
    ]);
    const [finished] = loop.records("frame.finished");
    assert.deepEqual([finished.state, finished.reason], ["done", "every input ignored; no turn"]);
    assert.equal(loop.chats().length, 0, "no model request");
    assert.equal(loop.kernel.ran.length, 0, "no cell");
    assert.equal(getInput(loop.store, ignored)?.status, "consumed");
  });
});

Deno.test("`Session` takes an input a plan ignores twice in one frame, once, with the first reason", async () => {
  await withSessionLoop({}, async (loop) => {
    loop.hooks.answer = (call) => {
      if (call.name !== "attention.plan") return undefined;
      const [input] = call.args.inputs as { id: string }[];
      const ignore = [{ id: input.id, reason: "not for me" }, { id: input.id, reason: "again" }];
      return { consume: [], ignore, routing: {} };
    };
    const ignored = loop.admit("ignore me twice");
    await loop.settle("the frame finished", () => loop.records("frame.finished").length === 1);
    const [accepted] = loop.records("frame.accepted");
    assert.deepEqual(accepted.input_ids, [ignored]);
    assert.deepEqual((accepted.routing as { ignored: unknown }).ignored, [
      { input_id: ignored, reason: "not for me" },
    ]);
    assert.equal(getInput(loop.store, ignored)?.status, "consumed");
  });
});

Deno.test("`Session` shows an input no plan takes as waiting past the threshold, and expires it by its timer alone", async () => {
  await withSessionLoop({ inputExpireMs: 1500, inputWaitWarnMs: 300 }, async (loop) => {
    loop.hooks.answer = (call) =>
      call.name === "attention.plan" ? { consume: [], ignore: [], routing: {} } : undefined;
    const held = loop.admit("hold this");
    await loop.settle("the expiry armed", () => loop.timers.armed === 1);
    assert.equal(loop.session.status().waiting_inputs, 0);
    loop.timers.advance(301);
    const waiting = loop.session.status();
    assert.equal(waiting.waiting_inputs, 1);
    assert.deepEqual((waiting.waiting as { id: string }[]).map((w) => w.id), [held]);
    assert.equal(loop.records("input.expired").length, 0);
    // The expiry timer is due 1 ms past the age; nothing else wakes the session.
    loop.timers.advance(1200);
    await loop.settle("the input expired", () => loop.records("input.expired").length === 1);
    const [expired] = loop.records("input.expired");
    assert.equal(expired.input_id, held);
    assert.equal(expired.reason, "pending for more than 1500 ms without a frame");
    assert.deepEqual(
      [getInput(loop.store, held)?.status, getInput(loop.store, held)?.disposition],
      ["dismissed", "expired"],
    );
    assert.equal(loop.session.status().waiting_inputs, 0);
    assert.equal(loop.chats().length, 0);
  });
});

Deno.test("`Session` stalled by a failing plan still expires its pending inputs by their timer", async () => {
  await withSessionLoop({ retryBaseMs: 1000, inputExpireMs: 600_000 }, async (loop) => {
    loop.hooks.answer = (call) => {
      if (call.name === "attention.plan") throw new Error("plan exploded");
      return undefined;
    };
    const held = loop.admit("are you there?");
    for (const delay of [1000, 2000, 4000, 8000, 16000, 32000]) {
      await loop.settle(`the retry after ${delay} ms`, () => loop.timers.armed === 1);
      advanceBy(loop, delay, `retry after ${delay} ms`);
    }
    await loop.settle("the stall", () => loop.records("session.stalled").length === 1);
    // Nothing retries by itself, but the input's age still ends it: pending forever is not a
    // disposition. It was admitted 63 s before the stall; it expires 1 ms past 600 s.
    advanceBy(loop, 600_000 - 63_000 + 1, "the expiry");
    await loop.settle("the input expired", () => loop.records("input.expired").length === 1);
    assert.equal(loop.records("input.expired")[0].input_id, held);
    assert.equal(getInput(loop.store, held)?.disposition, "expired");
    assert.equal(loop.session.status().pending_inputs, 0);
  });
});
