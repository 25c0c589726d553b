// Window "a model failure after effects": the model fails after a turn already ran a cell. The
// turn is not ended: its frame stays open and the next request is retried from the persisted
// sequence with the same backoff as before effects; `/health` says degraded from the first
// failure until a call succeeds. Only when retries run out does the frame end `failed`, with
// its inputs' disposition said, and `/health` stays degraded until the next success.

import assert from "node:assert/strict";
import { type FakeResponse, startFakeOpenAI } from "../fakes/openai_server.ts";
import { startTestDaemon } from "../_helpers/daemon.ts";
import { connectLane } from "../_helpers/lane_client.ts";
import { checkStore, nextMessageAnswered, records, removeDirs, waitRecord } from "./_checks.ts";

const ENV = { KLBR_RETRY_BASE_MS: "50" };
const WORKING = { toolCall: { code: "await local.send('working on it')" } };
const OVERLOADED: FakeResponse = { status: 500, message: "overloaded" };

Deno.test("window model-failure-after-effects: the turn is retried from its persisted sequence and finishes", async () => {
  const fake = startFakeOpenAI({ fallback: () => ({ toolCall: { code: "wait()" } }) });
  fake.enqueue(WORKING, OVERLOADED, OVERLOADED, {
    toolCall: { code: "await local.send('done')\nwait()" },
  });
  const daemon = await startTestDaemon({ modelUrl: fake.url, env: ENV });
  try {
    const client = await connectLane({ port: daemon.port, token: daemon.token });
    const ack = await client.request({ kind: "input", client_msg_id: "job", text: "the job" });
    const first = await waitRecord(client, "turn.retrying");
    assert.equal(first.data.attempt, 1);
    assert.equal(first.data.delay_ms, 50);
    assert.match(String(first.data.reason), /model failed: .*500/);
    const health = await (await fetch(`${daemon.url}/health`)).json();
    assert.equal(health.status, "degraded", "degraded from the first failed call");
    assert.equal(health.model.state, "failing");
    assert.equal(health.model.route, "main");
    assert.match(health.model.error, /500/);
    assert.equal(typeof health.model.since, "number");
    const second = await waitRecord(client, "turn.retrying", (r) => r.data.attempt === 2);
    assert.equal(second.data.delay_ms, 100, "the same doubling backoff");
    const done = await waitRecord(client, "frame.finished");
    assert.equal(done.data.state, "done");
    assert.deepEqual(records(client, "frame.accepted").length, 1, "one frame, continued");
    assert.deepEqual(records(client, "send").map((r) => r.data.text), ["working on it", "done"]);
    // Each retry went on from the persisted sequence: the input once, the cell's result once.
    const chat = fake.requests.filter((r) => r.method === "POST");
    assert.equal(chat.length, 4);
    for (const request of chat.slice(1)) {
      const messages = request.body.messages as { role: string; content: string | null }[];
      assert.equal(messages.filter((m) => m.content?.includes("the job")).length, 1);
      assert.equal(messages.filter((m) => m.role === "tool").length, 1);
    }
    const healthy = await (await fetch(`${daemon.url}/health`)).json();
    assert.equal(healthy.status, "ok", "ok again after a call succeeds");
    await client.close();
    const next = await nextMessageAnswered(daemon, fake, "after");
    assert.equal(await daemon.stop(), 0);
    checkStore(daemon.stateDir, [(ack as { input_id: string }).input_id, next.inputId]);
  } finally {
    await daemon.stop().catch(() => {});
    await fake.close();
    await removeDirs(daemon);
  }
});

Deno.test("window model-failure-after-effects: with retries exhausted the frame ends failed, its disposition said, /health degraded until a success", async () => {
  let down = true;
  const fake = startFakeOpenAI({
    fallback: () => down ? OVERLOADED : { toolCall: { code: "wait()" } },
  });
  fake.enqueue(WORKING);
  const daemon = await startTestDaemon({ modelUrl: fake.url, env: ENV });
  try {
    const client = await connectLane({ port: daemon.port, token: daemon.token });
    const ack = await client.request({ kind: "input", client_msg_id: "job", text: "the job" });
    const failed = await waitRecord(client, "frame.finished");
    assert.equal(failed.data.state, "failed");
    assert.match(
      String(failed.data.reason),
      /^gave up after 6 retries: model failed: .*500.*; its inputs were seen but not answered$/,
    );
    assert.deepEqual(failed.data.input_ids, [(ack as { input_id: string }).input_id]);
    assert.equal(records(client, "turn.retrying").length, 6);
    assert.deepEqual(records(client, "send").map((r) => r.data.text), ["working on it"]);
    const health = await (await fetch(`${daemon.url}/health`)).json();
    assert.equal(health.status, "degraded");
    assert.equal(health.model.state, "failing");
    down = false;
    await client.close();
    const next = await nextMessageAnswered(daemon, fake, "after");
    const healthy = await (await fetch(`${daemon.url}/health`)).json();
    assert.equal(healthy.status, "ok");
    assert.equal(await daemon.stop(), 0);
    checkStore(daemon.stateDir, [(ack as { input_id: string }).input_id, next.inputId]);
  } finally {
    await daemon.stop().catch(() => {});
    await fake.close();
    await removeDirs(daemon);
  }
});
