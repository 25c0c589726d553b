// Sends once, by default: a cell sends a message locally and to Discord, and the daemon is
// SIGKILLed right after the Discord row commits (window `enqueue-before-reply`), before the
// cell hears of it. After the restart the model runs the very same cell again (same text, no
// key): the conversation gets one message, the outbox holds one row, and the fake Discord gets
// one POST. The continued turn hears of the restart inside the interrupted call's result, with
// the effects it committed, never as a new user message.

import assert from "node:assert/strict";
import { type RecordedRequest, startFakeOpenAI } from "../fakes/openai_server.ts";
import { startFakeDiscord } from "../fakes/discord_server.ts";
import { connectLane } from "../_helpers/lane_client.ts";
import { checkStore, crashAt, records, removeDirs, rows, waitRecord, withDb } from "./_checks.ts";

const TEXT = "the answer is 42";
const SEND = [
  `a = await local.send(${JSON.stringify(TEXT)})`,
  `b = await discord.send(${JSON.stringify(TEXT)}, channel="123")`,
  `print("duplicates:", a["duplicate"], b["duplicate"])`,
].join("\n");

type Message = { role: string; content: string; tool_calls?: unknown[] };

/** The model runs the send cell, then (continued after the kill) the same cell again, then waits. */
function startsOver(request: RecordedRequest) {
  const calls = (request.body.messages as Message[]).filter((m) => m.tool_calls?.length).length;
  return calls < 2 ? { toolCall: { code: SEND } } : { toolCall: { code: "wait()" } };
}

Deno.test("a SIGKILL after the sends commit, then the same cell again: one message locally and on Discord", async () => {
  const fake = startFakeOpenAI({ fallback: startsOver });
  const discord = startFakeDiscord();
  const options = {
    modelUrl: fake.url,
    env: { DISCORD_TOKEN: "fake-bot-token" },
    extraConfig:
      `discord {\n    token_env "DISCORD_TOKEN"\n    channels "123"\n    api_url "${discord.apiUrl}"\n` +
      `    gateway_url "${discord.gatewayUrl}"\n    send_timeout_ms 10000\n}\n`,
  };
  let daemon = await crashAt("enqueue-before-reply", options, async (d) => {
    const client = await connectLane({ port: d.port, token: d.token });
    await client.request({ kind: "input", client_msg_id: "q", text: "what is the answer?" });
    await client.closed;
  });
  try {
    const inputId = withDb(daemon.stateDir, (db) => {
      // The kill landed after both sends committed and before the cell heard of the second.
      assert.equal(rows(db, "SELECT 1 FROM events WHERE kind = 'send'").length, 1);
      assert.equal(rows(db, "SELECT 1 FROM outbox").length, 1);
      assert.deepEqual(rows(db, "SELECT outcome FROM cells"), [{ outcome: null }]);
      return String(rows(db, "SELECT id FROM inputs")[0].id);
    });
    assert.equal(discord.messagePosts().length, 0, "nothing was posted before the kill");
    const before = fake.requests.length;
    daemon = await daemon.restart({ env: { DISCORD_TOKEN: "fake-bot-token" } });
    const client = await connectLane({ port: daemon.port, token: daemon.token });
    const recovery = await waitRecord(client, "recovery");
    const [frame] = recovery.data.resumed_frames as string[];
    await waitRecord(client, "frame.finished", (r) => r.data.frame_id === frame);
    const [row] = withDb(daemon.stateDir, (db) => rows(db, "SELECT id FROM outbox"));
    await waitRecord(client, "outbox.confirmed", (r) => r.data.outbox_id === row.id);

    // The continued request: the interrupted call's result lists both sends and tells of the
    // restart; no user message follows it.
    const posts = fake.requests.slice(before).filter((r) => r.method === "POST");
    const resumed = posts[0].body.messages as Message[];
    const interrupted = resumed.filter((m) => m.role === "tool").at(-1)!;
    assert.equal(resumed.at(-1), interrupted, "the last message is the call's result");
    assert.match(interrupted.content, /^\[interrupted: the daemon restarted while this cell ran/);
    assert.match(interrupted.content, /1\. local\.send snd_\w+ \(record \d+\): "the answer is 42"/);
    assert.match(
      interrupted.content,
      /2\. discord\.send ob_\w+: "to discord:123: the answer is 42"/,
    );
    assert.match(
      interrupted.content,
      /\[runtime\] the daemon restarted during this turn; this is not a new request\./,
    );
    // The same cell again: both receipts are the first ones, marked duplicate.
    const rerun = (posts[1].body.messages as Message[]).filter((m) => m.role === "tool").at(-1)!;
    assert.match(rerun.content, /^outcome: ok\nstdout:\nduplicates: True True\n/);

    // One message in the conversation, one outbox row, one POST to Discord.
    assert.deepEqual(records(client, "send").map((r) => r.data.text), [TEXT]);
    assert.equal(records(client, "cell.started").length, 3, "the first run, the re-run, wait()");
    assert.equal(discord.messagePosts().length, 1);
    assert.deepEqual(discord.botMessages("123").map((m) => m.content), [TEXT]);
    withDb(daemon.stateDir, (db) => {
      assert.equal(rows(db, "SELECT 1 FROM events WHERE kind = 'send'").length, 1);
      assert.equal(rows(db, "SELECT 1 FROM outbox").length, 1);
    });
    await client.close();
    assert.equal(await daemon.stop(), 0);
    checkStore(daemon.stateDir, [inputId]);
  } finally {
    await daemon.stop().catch(() => {});
    await fake.close();
    await discord.close();
    await removeDirs(daemon);
  }
});
