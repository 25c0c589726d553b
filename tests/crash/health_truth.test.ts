// `/health` tells the truth about the model: `degraded` from the first failed call (with the
// route, the error and since when) and while a call stalls, instead of `ok` until retries run
// out or while a frame is held.

import assert from "node:assert/strict";
import { startFakeOpenAI } from "../fakes/openai_server.ts";
import { healthUntil, startTestDaemon } from "../_helpers/daemon.ts";
import { connectLane } from "../_helpers/lane_client.ts";
import { records, removeDirs, waitRecord } from "./_checks.ts";

Deno.test("window health-model-down: a refused model call makes /health degraded at once, naming the route and error", async () => {
  // Nothing listens on port 9: every call fails with a connection error.
  const daemon = await startTestDaemon({ modelUrl: "http://127.0.0.1:9/v1" });
  try {
    const before = await (await fetch(`${daemon.url}/health`)).json();
    assert.equal(before.status, "ok");
    const client = await connectLane({ port: daemon.port, token: daemon.token });
    await client.request({ kind: "input", client_msg_id: "hi", text: "anyone?" });
    await waitRecord(client, "frame.abandoned");
    // The first failure is enough: no waiting for the retries to run out.
    const health = await (await fetch(`${daemon.url}/health`)).json();
    assert.equal(health.ok, true, "admission still works");
    assert.equal(health.status, "degraded");
    const model = health.model as Record<string, unknown>;
    assert.equal(model.state, "failing");
    assert.equal(model.route, "main");
    assert.match(String(model.error), /^main: /);
    assert.equal(typeof model.since, "number");
    assert.ok((health.reasons as string[]).some((r) => r.startsWith("the model is failing")));
    await client.close();
  } finally {
    await daemon.stop();
    await removeDirs(daemon);
  }
});

Deno.test("window health-model-stall: a model call that stalls makes /health degraded while the frame is held", async () => {
  const fake = startFakeOpenAI({ fallback: () => ({ toolCall: { code: "wait()" } }) });
  fake.enqueue({ text: "thinking", stall: true });
  const daemon = await startTestDaemon({
    modelUrl: fake.url,
    env: { KLBR_MODEL_STALL_MS: "300", KLBR_DRAIN_GRACE_MS: "200" },
  });
  try {
    const client = await connectLane({ port: daemon.port, token: daemon.token });
    await client.request({ kind: "input", client_msg_id: "hi", text: "think hard" });
    await waitRecord(client, "frame.accepted");
    const health = await healthUntil(daemon, (h) => h.status !== "ok");
    assert.equal(health.status, "degraded");
    const model = health.model as Record<string, unknown>;
    assert.equal(model.state, "stalled");
    assert.equal(model.route, "main");
    assert.match(String(model.error), /^no reply data for \d+ ms$/);
    await client.close();
  } finally {
    await daemon.stop();
    await fake.close();
    await removeDirs(daemon);
  }
});

Deno.test("window health-model-prefill: a long prompt processed before the first byte, within timeout_ms, is not called a stall", async () => {
  // llama-server sends the headers when the slot starts and its first chunk only once the prompt
  // is processed; the provider bounds that wait by timeout_ms alone, so /health must not say
  // `stalled` (nor `degraded`) meanwhile. The prefill is five stall thresholds long, so /health is
  // read well past the threshold before the first byte comes.
  const fake = startFakeOpenAI({ fallback: () => ({ toolCall: { code: "wait()" } }) });
  fake.enqueue({ text: "read it all", prefillMs: 1_500 });
  const daemon = await startTestDaemon({
    modelUrl: fake.url,
    env: { KLBR_MODEL_STALL_MS: "300" },
  });
  try {
    const client = await connectLane({ port: daemon.port, token: daemon.token });
    await client.request({ kind: "input", client_msg_id: "long", text: "a long prompt" });
    await fake.waitForRequests(1);
    const seen: unknown[] = [];
    // Bounded: the reply ends the prefill after 1.5 s; 500 reads 20 ms apart are 10 s at most.
    for (let i = 0; i < 500 && records(client, "model.reply").length === 0; i++) {
      const health = await (await fetch(`${daemon.url}/health`)).json();
      seen.push(health.model);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    assert.equal(records(client, "model.reply").length, 1, "the reply came after the prefill");
    assert.ok(seen.length > 0);
    assert.deepEqual(seen.find((m) => (m as { state: string }).state !== "ok"), undefined);
    await client.close();
  } finally {
    await daemon.stop();
    await fake.close();
    await removeDirs(daemon);
  }
});
