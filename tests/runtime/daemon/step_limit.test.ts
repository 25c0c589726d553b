// A task longer than the route's `max_steps`: the turn's last result tells the model it ends,
// the turn ends with the limit recorded (the conversation shows "the agent stopped after N
// steps"), and the next turn's opening says the previous one was cut.

import assert from "node:assert/strict";
import type { LaneRecord } from "../../../runtime/core/mod.ts";
import { startTestDaemon } from "../../_helpers/daemon.ts";
import { connectLane } from "../../_helpers/lane_client.ts";
import { type RecordedRequest, startFakeOpenAI } from "../../fakes/openai_server.ts";

const lastMessage = (r: RecordedRequest) => r.body.messages[r.body.messages.length - 1];

Deno.test("a turn that reaches max_steps is told so, ends with the limit recorded, and the next turn hears of it", async () => {
  // A model that never waits: every reply is one more cell.
  const fake = startFakeOpenAI({ fallback: () => ({ toolCall: { code: "print('working')" } }) });
  const daemon = await startTestDaemon({ modelUrl: fake.url, routeFields: "    max_steps 3" });
  const client = await connectLane({ port: daemon.port, token: daemon.token });
  try {
    await client.request({ kind: "input", client_msg_id: "m1", text: "a long task" });
    const ended = await client.waitFor<LaneRecord>(
      (m) => m.kind === "record" && m.type === "turn.ended",
      60_000,
    );
    assert.equal(ended.data.reason, "step limit 3");
    assert.equal(ended.data.step_limit, 3);
    const chats = fake.requests.filter((r) => r.method === "POST");
    assert.equal(chats.length, 3, "three steps, three requests");

    fake.enqueue({ toolCall: { code: "await local.send('resuming')\nwait()" } });
    await client.request({ kind: "input", client_msg_id: "m2", text: "go on" });
    await client.waitFor((m) => m.kind === "record" && m.type === "send", 60_000);
    const next = fake.requests.filter((r) => r.method === "POST")[3];
    // The third cell's result, now in the history, told the model the turn ended there.
    const results = next.body.messages.filter((m: { role: string }) => m.role === "tool");
    assert.match(results[2].content, /reached its limit of 3 model steps and ends after this cell/);
    assert.match(
      lastMessage(next).content,
      /^\[runtime\] your previous turn stopped at its limit of 3 model steps/,
    );
  } finally {
    await client.close();
    await daemon.stop();
    await fake.close();
    await Deno.remove(daemon.stateDir, { recursive: true }).catch(() => {});
    await Deno.remove(daemon.workspace, { recursive: true }).catch(() => {});
  }
});
