// What the page needs from the daemon, end to end (the real daemon under its derived
// permissions, the real workbench, the fake model over HTTP): every model reply recorded with
// its route, model and usage (also a reply with no text), `op.cancel_cell` ending one cell
// while its turn goes on, and `/artifacts/<id>` serving spooled output only with credentials.

import assert from "node:assert/strict";
import { type FakeOpenAI, startFakeOpenAI } from "../../fakes/openai_server.ts";
import { startTestDaemon, type TestDaemon } from "../../_helpers/daemon.ts";
import { connectLane, type LaneClient } from "../../_helpers/lane_client.ts";
import { cli } from "../../_helpers/cli.ts";
import type { LaneRecord } from "../../../runtime/core/mod.ts";

const records = (client: LaneClient, type: string) =>
  client.messages.filter((m): m is LaneRecord => m.kind === "record" && m.type === type);

const waitRecord = (
  client: LaneClient,
  type: string,
  extra: (r: LaneRecord) => boolean = () => true,
) => client.waitFor<LaneRecord>((m) => m.kind === "record" && m.type === type && extra(m), 30_000);

async function withModelDaemon(
  fn: (parts: { fake: FakeOpenAI; daemon: TestDaemon; client: LaneClient }) => Promise<void>,
): Promise<void> {
  const fake = startFakeOpenAI({ fallback: () => ({ toolCall: { code: "wait()" } }) });
  const daemon = await startTestDaemon({ modelUrl: fake.url });
  const client = await connectLane({ port: daemon.port, token: daemon.token });
  try {
    await fn({ fake, daemon, client });
  } finally {
    await client.close();
    await daemon.stop();
    await fake.close();
  }
}

Deno.test("every model reply is recorded with its route, model and usage, also one with no text", async () => {
  await withModelDaemon(async ({ fake, client }) => {
    // A reply of a tool call alone with usage, then one without any usage chunk.
    fake.enqueue({ toolCall: { code: "print(1)" }, usage: "openai" }, {
      toolCall: { code: "wait()" },
    });
    await client.request({ kind: "input", client_msg_id: "u1", text: "count" });
    await waitRecord(client, "frame.finished");
    assert.equal(records(client, "scratchpad").length, 0, "neither reply had text");
    const replies = records(client, "model.reply");
    assert.equal(replies.length, 2);
    const frame = records(client, "frame.accepted")[0].data.frame_id;
    assert.deepEqual(replies[0].data, {
      frame_id: frame,
      route: "main",
      model: replies[0].data.model,
      url: fake.url,
      usage: {
        prompt_tokens: 1200,
        completion_tokens: 34,
        cache_read_tokens: 1024,
        cache_write_tokens: 176,
      },
      finish_reason: "tool_calls",
      tool_calls: 1,
      text_chars: 0,
    });
    assert.equal(typeof replies[0].data.model, "string");
    // What the provider did not report is absent, never 0.
    assert.deepEqual(replies[1].data.usage, {});
  });
});

Deno.test("op.cancel_cell (and `klbr cancel-cell`) ends one running cell `cancelled`; the turn goes on and the model hears it", async () => {
  await withModelDaemon(async ({ fake, daemon, client }) => {
    fake.enqueue({ toolCall: { code: "import asyncio\nawait asyncio.sleep(10**6)" } });
    await client.request({ kind: "input", client_msg_id: "c1", text: "block" });
    const started = await waitRecord(client, "cell.started");
    const cell = String(started.data.cell_id);
    const wrong = await client.request({
      kind: "op.cancel_cell",
      session: "default",
      cell: "cell_not_running",
    });
    assert.equal(wrong.kind, "error");
    assert.match(JSON.stringify(wrong), /cannot cancel cell cell_not_running: it is not running/);
    const base = ["--state", daemon.stateDir, "--port", String(daemon.port)];
    const usage = await cli("klbr", ["cancel-cell", ...base]);
    assert.notEqual(usage.code, 0);
    assert.match(usage.stderr, /usage: klbr cancel-cell <cell-id> \[session\]/);
    // The operator's command line, as a person would type it.
    const answer = await cli("klbr", ["cancel-cell", cell, "default", ...base]);
    assert.equal(answer.code, 0, answer.stderr);
    const finished = await waitRecord(client, "cell.finished");
    assert.equal(finished.data.cell_id, cell);
    assert.equal(finished.data.outcome, "cancelled");
    // The turn was not stopped: the model is asked again, hears the outcome and waits.
    const ended = await waitRecord(client, "turn.ended");
    assert.equal(ended.data.reason, "wait");
    const tool = fake.requests.filter((r) => r.method === "POST")[1].body.messages.at(-1);
    assert.equal(tool.role, "tool");
    assert.match(tool.content, /^outcome: cancelled/);
    const note = records(client, "operator").find((r) => r.data.op === "op.cancel_cell");
    assert.equal(note?.data.cell, cell);
  });
});

Deno.test("/artifacts/<id> serves spooled output with the token or session cookie, never without", async () => {
  await withModelDaemon(async ({ fake, daemon, client }) => {
    fake.enqueue({ toolCall: { code: "print('y' * 40_000 + 'END')\nwait()" } });
    await client.request({ kind: "input", client_msg_id: "a1", text: "print a lot" });
    const finished = await waitRecord(client, "cell.finished");
    const id = (finished.data.result as { stdout_artifact: { id: string } }).stdout_artifact.id;
    const url = `${daemon.url}/artifacts/${id}`;

    const bare = await fetch(url);
    assert.equal(bare.status, 401);
    assert.equal((await bare.json()).code, "token_missing");
    const wrong = await fetch(url, { headers: { authorization: `Bearer ${"0".repeat(64)}` } });
    assert.equal(wrong.status, 401);
    assert.equal((await wrong.json()).code, "token_wrong");
    // A foreign page cannot read it either: its Origin is refused before any credential.
    const foreign = await fetch(url, {
      headers: { origin: "http://evil.example", authorization: `Bearer ${daemon.token}` },
    });
    assert.equal(foreign.status, 403);
    await foreign.body?.cancel();

    const byToken = await fetch(url, { headers: { authorization: `Bearer ${daemon.token}` } });
    assert.equal(byToken.status, 200);
    assert.equal(byToken.headers.get("content-type"), "text/plain; charset=utf-8");
    assert.equal(byToken.headers.get("x-content-type-options"), "nosniff");
    assert.equal(await byToken.text(), "y".repeat(40_000) + "END\n");

    const auth = await fetch(`${daemon.url}/auth`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ token: daemon.token }),
    });
    const cookie = auth.headers.get("set-cookie")!.split(";")[0];
    await auth.body?.cancel();
    const part = await fetch(`${url}?offset=39998&length=10`, { headers: { cookie } });
    assert.equal(part.status, 200);
    assert.equal(part.headers.get("x-artifact-bytes"), "40004");
    assert.equal(await part.text(), "yyEND\n");

    const missing = await fetch(`${daemon.url}/artifacts/${"a".repeat(64)}`, {
      headers: { cookie },
    });
    assert.equal(missing.status, 404);
    assert.equal((await missing.json()).code, "not_found");
    const malformed = await fetch(`${daemon.url}/artifacts/nothex`, { headers: { cookie } });
    assert.equal(malformed.status, 400);
    assert.equal((await malformed.json()).code, "invalid_input");
  });
});
