// Bounded input per client: a connection whose client writes inputs without reading its
// answers has at most `lanes.max_unacked_inputs` of them in admission, and none while it
// leaves more than the high-water mark unread; its further messages wait, in order, the daemon
// stops reading its socket (the client's writes wait: TCP backpressure), and all are admitted
// exactly once when it reads again. Another client is answered meanwhile.

import assert from "node:assert/strict";
import { startFakeOpenAI } from "../../fakes/openai_server.ts";
import { startTestDaemon } from "../../_helpers/daemon.ts";
import { connectLane } from "../../_helpers/lane_client.ts";
import { openSilentLane, type SilentMessage } from "../../../bench/silent_lane.ts";
import { inputIds, removeDirs } from "../../crash/_checks.ts";

const INPUTS = 2_000;
/** `lanes { max_unacked_inputs }`'s default. */
const MAX_UNACKED = 256;
/** Large enough that the records of its inputs fill the kernel's buffers and the mark. */
const TEXT = "x".repeat(8 * 1024);

/** Polls /health (bounded) until `done` holds for its `lanes`; returns them. */
async function lanesUntil(
  url: string,
  done: (lanes: Record<string, number>) => boolean,
): Promise<Record<string, number>> {
  let lanes: Record<string, number> = {};
  for (let i = 0; i < 600; i++) {
    lanes = (await (await fetch(`${url}/health`)).json()).lanes;
    if (done(lanes)) return lanes;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`lanes never matched: ${JSON.stringify(lanes)}`);
}

Deno.test("a client that sends 2,000 inputs without reading waits past its bound, loses none, and another client is answered meanwhile", async () => {
  const fake = startFakeOpenAI({ fallback: () => ({ text: "noted" }) });
  const daemon = await startTestDaemon({
    modelUrl: fake.url,
  });
  const silent = await openSilentLane({ port: daemon.port, token: daemon.token, client: "flood" });
  try {
    const inputs = Array.from({ length: INPUTS }, (_, i) => ({
      kind: "input",
      request: `r${i}`,
      client_msg_id: `flood-${i}`,
      text: `${i} ${TEXT}`,
    }));
    let sent = false;
    const sending = silent.sendAll(inputs).then(() => sent = true);
    // The silent client's answers and records fill its buffers: the daemon stops handling its
    // messages, then stops reading its socket once as many wait as it may leave unanswered.
    const paused = await lanesUntil(daemon.url, (l) => l.input_paused >= 1);
    await new Promise((resolve) => setTimeout(resolve, 500));
    // TCP backpressure: the client's writes (16 MB) wait in the kernel's buffers, and the
    // daemon holds at most its bound and one read's worth of messages more.
    assert.equal(sent, false, "the client's writes wait while the daemon does not read");
    const held = (await (await fetch(`${daemon.url}/health`)).json()).lanes;
    assert.ok(held.peak_held_messages > 0, JSON.stringify(paused));
    assert.ok(held.peak_held_messages <= MAX_UNACKED + 64, JSON.stringify(held));
    // Another client is answered while the first is held.
    const other = await connectLane({ port: daemon.port, token: daemon.token, since: 0 });
    const ack = await other.request({
      kind: "input",
      client_msg_id: "other",
      text: "still there?",
    });
    assert.equal(ack.kind, "ack");
    await other.close();
    // The silent client reads again: every input is acknowledged once, in the order it sent.
    silent.startReading();
    await sending;
    const answers = (messages: SilentMessage[]) =>
      messages.filter((m) => m.kind === "ack" || m.kind === "error");
    await silent.until((messages) => answers(messages).length >= INPUTS, 120_000);
    const got = answers(silent.messages);
    assert.deepEqual(
      got.map((m) => m.kind === "ack" ? m.request : m),
      inputs.map((m) => m.request),
    );
    assert.ok(got.every((m) => m.duplicate === false), "each admitted once, none a duplicate");
    const ids = new Set(got.map((m) => m.input_id));
    assert.equal(ids.size, INPUTS);
    silent.close();
    assert.equal(await daemon.stop(), 0);
    const stored = new Set(inputIds(daemon.stateDir));
    assert.equal(stored.size, INPUTS + 1);
    for (const id of ids) assert.ok(stored.has(String(id)), `${id} is stored`);
  } finally {
    silent.close();
    await daemon.stop();
    await fake.close();
    await removeDirs(daemon);
  }
});
