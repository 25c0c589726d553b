// Crash window `publish-before-reply`: a cell's `local.send` has committed its message and
// the daemon dies before the cell hears the reply. After the restart the model is told what
// the unfinished cell had already done, so a model that sends only when no send happened
// leaves exactly one message in the conversation.

import assert from "node:assert/strict";
import { type RecordedRequest, startFakeOpenAI } from "../fakes/openai_server.ts";
import { connectLane } from "../_helpers/lane_client.ts";
import {
  checkStore,
  crashAt,
  nextMessageAnswered,
  records,
  removeDirs,
  rows,
  waitRecord,
  withDb,
} from "./_checks.ts";

const SEND = "await local.send('the answer is 42')";

/** The model sends only when the last tool result does not show a send already made. */
function sendsOnlyOnce(request: RecordedRequest) {
  const tools = (request.body.messages as { role: string; content: string }[])
    .filter((m) => m.role === "tool");
  const last = tools.at(-1)?.content ?? "";
  return /local\.send snd_\w+ .*"the answer is 42"/.test(last)
    ? { toolCall: { code: "wait()" } }
    : { toolCall: { code: SEND } };
}

Deno.test("window publish-before-reply: the continued turn is told of the committed send and the conversation gets one message", async () => {
  const fake = startFakeOpenAI({ fallback: sendsOnlyOnce });
  let daemon = await crashAt("publish-before-reply", { modelUrl: fake.url }, async (d) => {
    const client = await connectLane({ port: d.port, token: d.token });
    await client.request({ kind: "input", client_msg_id: "q", text: "what is the answer?" });
    await client.closed;
  });
  try {
    const inputId = withDb(daemon.stateDir, (db) => {
      // The kill landed where it says: the send is committed, the cell has no outcome and its
      // call no result.
      assert.equal(rows(db, "SELECT 1 FROM events WHERE kind = 'send'").length, 1);
      const [cell] = rows(db, "SELECT outcome, tool_call_id FROM cells");
      assert.equal(cell.outcome, null);
      const result = rows(
        db,
        "SELECT 1 FROM provider_items WHERE role = 'tool' AND tool_call_id = ?",
        String(cell.tool_call_id),
      );
      assert.deepEqual(result, [], "the model had not been told");
      return String(rows(db, "SELECT id FROM inputs")[0].id);
    });
    const before = fake.requests.length;
    daemon = await daemon.restart({ env: {} });
    const client = await connectLane({ port: daemon.port, token: daemon.token });
    const recovery = await waitRecord(client, "recovery");
    const [frame] = recovery.data.resumed_frames as string[];
    await waitRecord(client, "frame.finished", (r) => r.data.frame_id === frame);
    // The continued request tells the model the cell did not finish and lists its send.
    const resumed = fake.requests.slice(before).find((r) => r.method === "POST")!;
    const messages = resumed.body.messages as { role: string; content: string }[];
    const tool = messages.filter((m) => m.role === "tool").at(-1)!.content;
    const [send] = records(client, "send");
    assert.match(tool, /did not finish/);
    assert.ok(tool.includes(`1. local.send ${send.data.send_id}`), tool);
    assert.ok(tool.includes('"the answer is 42"'), tool);
    assert.match(messages.at(-1)!.content, /the daemon restarted during this turn/);
    assert.deepEqual(records(client, "send").map((r) => r.data.text), ["the answer is 42"]);
    assert.equal(records(client, "cell.started").length, 2, "the old cell ran once, then wait()");
    await client.close();
    const next = await nextMessageAnswered(daemon, fake, "after");
    assert.equal(await daemon.stop(), 0);
    checkStore(daemon.stateDir, [inputId, next.inputId]);
  } finally {
    await daemon.stop().catch(() => {});
    await fake.close();
    await removeDirs(daemon);
  }
});
