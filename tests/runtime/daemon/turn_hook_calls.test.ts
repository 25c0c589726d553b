// Hooks are asked only when their input changed, against the real daemon, the checkout's
// behaviour, the real workbench and the fake model: a two-step turn asks `model.plan` once
// (its arguments do not change within a turn) and `context.prepare` once per request (the
// request grew), and every call's trace is durable once the daemon has stopped, though no
// trace made a commit of its own; an unchanged context.prepare's trace keeps the request once.

import assert from "node:assert/strict";
import { startFakeOpenAI } from "../../fakes/openai_server.ts";
import { startTestDaemon } from "../../_helpers/daemon.ts";
import { connectLane } from "../../_helpers/lane_client.ts";
import type { LaneRecord } from "../../../runtime/core/mod.ts";
import { openStore } from "../../../store/store.ts";
import { tracesOfFrame } from "../../../store/behavior_diagnostics.ts";

Deno.test("a two-step turn asks model.plan once and context.prepare per request, all traced", async () => {
  const fake = startFakeOpenAI({ fallback: () => ({ toolCall: { code: "wait()" } }) });
  const daemon = await startTestDaemon({ modelUrl: fake.url });
  let frameId = "";
  let statusCalls = 0;
  try {
    fake.enqueue({ toolCall: { code: "x = 1" } });
    fake.enqueue({ toolCall: { code: "wait()" } });
    const client = await connectLane({ port: daemon.port, token: daemon.token });
    const before = await client.request({ kind: "op.status" }) as unknown as {
      result: { sessions: { default: { hook_calls: number } } };
    };
    await client.request({ kind: "input", client_msg_id: "m1", text: "two steps" });
    const finished = await client.waitFor<LaneRecord>(
      (m) => m.kind === "record" && m.type === "frame.finished",
      30_000,
    );
    frameId = finished.data.frame_id as string;
    const after = await client.request({ kind: "op.status" }) as unknown as {
      result: { sessions: { default: { hook_calls: number } } };
    };
    statusCalls = after.result.sessions.default.hook_calls -
      before.result.sessions.default.hook_calls;
    assert.equal(fake.requests.filter((r) => r.method === "POST").length, 2, "two requests");
    await client.close();
  } finally {
    assert.equal(await daemon.stop(), 0);
    await fake.close();
  }
  const store = openStore(daemon.stateDir);
  try {
    const hooks = tracesOfFrame(store, frameId).map((t) => t.hook);
    const count = (name: string) => hooks.filter((h) => h === name).length;
    assert.equal(count("attention.plan"), 1, `traces: ${hooks.join(", ")}`);
    assert.equal(count("model.plan"), 1, `model.plan asked once: ${hooks.join(", ")}`);
    assert.equal(count("context.prepare"), 2, `context.prepare per request: ${hooks.join(", ")}`);
    // What op.status counts is what reached the hook worker: the traces of this turn.
    assert.equal(statusCalls, hooks.length);
    // The checkout's context.prepare hands the request back: its trace keeps the messages once,
    // in its inputs, and says the output was unchanged.
    for (const trace of tracesOfFrame(store, frameId).filter((t) => t.hook === "context.prepare")) {
      assert.deepEqual(trace.output, { unchanged: "the messages it was given" });
      const messages = (trace.inputs as { messages: { role: string }[] }).messages;
      assert.equal(messages[0].role, "system", "the inputs hold the whole request");
    }
  } finally {
    store.close();
  }
});
