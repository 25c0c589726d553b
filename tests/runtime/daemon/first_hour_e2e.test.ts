// The README path on a fresh state directory, followed literally: `init`, `serve`, a message
// over the lane protocol. With no model, the conversation's records say which URL did not
// answer, which attempt of how many, when the next one is, and which file to edit; with the
// model configured there, the next message is answered and the trouble is marked recovered.
// And a model that answers in text alone gets one recorded reminder, never a send made for it.

import assert from "node:assert/strict";
import type { LaneRecord } from "../../../runtime/core/mod.ts";
import { initWithoutModel } from "../../_helpers/cli.ts";
import { startTestDaemon } from "../../_helpers/daemon.ts";
import { connectLane, type LaneClient } from "../../_helpers/lane_client.ts";
import { tempDir } from "../../_helpers/temp.ts";
import { startFakeOpenAI } from "../../fakes/openai_server.ts";

function records(client: LaneClient, type: string): LaneRecord[] {
  return client.messages.filter((m): m is LaneRecord => m.kind === "record" && m.type === type);
}

function waitRecord(
  client: LaneClient,
  type: string,
  match: (r: LaneRecord) => boolean = () => true,
): Promise<LaneRecord> {
  return client.waitFor<LaneRecord>((m) =>
    m.kind === "record" && m.type === type && match(m as LaneRecord)
  );
}

Deno.test("README path: with no model the first message says where the model is missing; configured, the next is answered", async () => {
  // Nothing answers where the config points main (a closed local port).
  const { state, config, nowhere } = await initWithoutModel(await tempDir());

  const daemon = await startTestDaemon({ stateDir: state, stateConfig: true, via: "launcher" });
  let running = daemon;
  let client = await connectLane({ port: daemon.port, token: daemon.token });
  const fake = startFakeOpenAI();
  try {
    // The start-up block already said so.
    assert.match(
      daemon.logs(),
      new RegExp(`main, fast, long: ${nowhere} model "default" — NOT ANSWERING`),
    );
    assert.match(daemon.logs(), /^ {2}next {7}start an OpenAI-compatible server at /m);

    const ack = await client.request({ kind: "input", client_msg_id: "m1", text: "hello?" });
    assert.equal(ack.kind, "ack");
    const inputId = (ack as { input_id: string }).input_id;
    const failing = await waitRecord(client, "model.failing");
    assert.deepEqual(
      { ...failing.data, frame_id: undefined, error: undefined },
      {
        frame_id: undefined,
        error: undefined,
        input_ids: [inputId],
        route: "main",
        url: nowhere,
        model: "default",
        attempt: 1,
        of: 7,
        next_retry_ms: 1000,
        config_path: config,
      },
    );
    assert.match(String(failing.data.error), /connection|connect/i);
    // Nothing was sent and the input waits: it is not lost, and not answered by anything else.
    assert.equal(records(client, "send").length, 0);
    const health = await (await fetch(`${daemon.url}/health`)).json();
    assert.equal(health.status, "degraded", "the first failed call degrades /health");

    // The newcomer points main at a model and restarts, as the record said.
    await client.close();
    assert.equal(await daemon.stop(), 0);
    await Deno.writeTextFile(
      config,
      (await Deno.readTextFile(config)).replace(`url "${nowhere}"`, `url "${fake.url}"`)
        .replace('model "default"', 'model "fake-model"'),
    );
    const again = await daemon.restart({ stateConfig: true, via: "launcher" });
    running = again;
    fake.enqueue({ toolCall: { code: "await local.send('here now')\nwait()" } });
    client = await connectLane({ port: again.port, token: again.token });
    assert.match(
      again.logs(),
      new RegExp(`main, fast, long: ${fake.url} model "fake-model" — answered`),
    );
    const ack2 = await client.request({ kind: "input", client_msg_id: "m2", text: "and now?" });
    assert.equal(ack2.kind, "ack");
    const sent = await waitRecord(client, "send");
    assert.equal(sent.data.text, "here now");
    const recovered = await waitRecord(client, "model.recovered");
    assert.equal(recovered.data.url, nowhere);
    assert.equal(recovered.data.route, "main");
    assert.ok(recovered.seq > failing.seq);
  } finally {
    await client.close();
    await running.stop();
    await fake.close();
  }
});

Deno.test("a model that answers with an empty message gets the reminder too, and answers after it", async () => {
  const fake = startFakeOpenAI();
  // An empty reply, `finish_reason: "stop"` (Gemma 4 on llama-server, ggml-org/llama.cpp#22786).
  fake.enqueue({ text: "" }, { toolCall: { code: 'await local.send("here I am")\nwait()' } });
  const daemon = await startTestDaemon({ modelUrl: fake.url });
  const client = await connectLane({ port: daemon.port, token: daemon.token });
  try {
    await client.request({ kind: "input", client_msg_id: "e1", text: "hi" });
    const sent = await waitRecord(client, "send");
    assert.equal(sent.data.text, "here I am");
    assert.equal(records(client, "turn.reminded").length, 1);
  } finally {
    await client.close();
    await daemon.stop();
    await fake.close();
  }
});

Deno.test("a model that answers in text alone gets one recorded reminder, and nothing is sent for it", async () => {
  const fake = startFakeOpenAI();
  // Content only: no tool call and no usage chunk, like some third-party servers.
  fake.enqueue({ text: "Hello! How can I help?" }, { text: "I said hello." });
  const daemon = await startTestDaemon({ modelUrl: fake.url });
  const client = await connectLane({ port: daemon.port, token: daemon.token });
  try {
    await client.request({ kind: "input", client_msg_id: "t1", text: "hi" });
    const ended = await waitRecord(client, "turn.ended");
    assert.equal(ended.data.reason, "turn.next: wait");
    const reminded = records(client, "turn.reminded");
    assert.equal(reminded.length, 1, "one reminder");
    assert.match(String(reminded[0].data.reminder), /reached nobody.*local\.send/);
    // The reminder went to the model as the second request's last message.
    const chats = fake.requests.filter((r) => r.method === "POST");
    assert.equal(chats.length, 2, "the reminder, then the turn ends: no third request");
    assert.equal(chats[1].body.messages.at(-1).content, reminded[0].data.reminder);
    // Speech stays explicit: both texts are scratchpad, nothing reached the conversation.
    assert.deepEqual(records(client, "scratchpad").map((r) => r.data.text), [
      "Hello! How can I help?",
      "I said hello.",
    ]);
    assert.equal(records(client, "send").length, 0);
  } finally {
    await client.close();
    await daemon.stop();
    await fake.close();
  }
});
