// A history a server refuses, after every sanitation: a server that refuses one item of the
// context with HTTP 400 naming it, as OpenAI's API does ("Invalid 'messages[N].content': …",
// https://platform.openai.com/docs/guides/error-codes) and as vLLM does for a message its
// chat template cannot render. The operator's `klbr repair` rewrites the context from the
// durable records with no model request; the daemon makes the same repair once by itself
// before it records the failure.

import assert from "node:assert/strict";
import type { LaneRecord } from "../../../runtime/core/mod.ts";
import { cli } from "../../_helpers/cli.ts";
import { startTestDaemon, type TestDaemon } from "../../_helpers/daemon.ts";
import { connectLane, type LaneClient } from "../../_helpers/lane_client.ts";
import {
  type FakeResponse,
  type RecordedRequest,
  startFakeOpenAI,
} from "../../fakes/openai_server.ts";

const POISON = "FORBIDDEN-ITEM";

/** Refuses any request whose messages hold the poison, naming the message, like the API does. */
function strictModel(request: RecordedRequest): FakeResponse {
  const messages = request.body.messages as { content: string | null }[];
  const bad = messages.findIndex((m) => JSON.stringify(m).includes(POISON));
  if (bad >= 0) {
    return { status: 400, message: `Invalid 'messages[${bad}].content': cannot be processed` };
  }
  const last = String(messages[messages.length - 1].content ?? "");
  if (last.includes("say one")) {
    // The cell's code holds the poison below its first line, which a summary does not keep.
    return {
      toolCall: { code: `await local.send("one")\n# ${POISON}\nwait()` },
    };
  }
  return { toolCall: { code: `await local.send("two")\nwait()` } };
}

const records = (client: LaneClient, type: string) =>
  client.messages.filter((m): m is LaneRecord => m.kind === "record" && m.type === type);

async function say(client: LaneClient, text: string, reply: string): Promise<void> {
  const ack = await client.request({ kind: "input", client_msg_id: text, text });
  assert.equal(ack.kind, "ack");
  await client.waitFor(
    (m) => m.kind === "record" && m.type === "send" && (m as LaneRecord).data.text === reply,
    60_000,
  );
}

async function withStrictDaemon(
  fn: (
    daemon: TestDaemon,
    client: LaneClient,
    fake: ReturnType<typeof startFakeOpenAI>,
  ) => Promise<void>,
): Promise<void> {
  const fake = startFakeOpenAI({ fallback: strictModel });
  const daemon = await startTestDaemon({ modelUrl: fake.url });
  const client = await connectLane({ port: daemon.port, token: daemon.token });
  try {
    await fn(daemon, client, fake);
  } finally {
    await client.close();
    await daemon.stop();
    await fake.close();
    await Deno.remove(daemon.stateDir, { recursive: true }).catch(() => {});
    await Deno.remove(daemon.workspace, { recursive: true }).catch(() => {});
  }
}

Deno.test("`klbr repair` rewrites a refused context from the records with no model request; the next input is answered", async () => {
  await withStrictDaemon(async (daemon, client, fake) => {
    await say(client, "say one", "one");
    const before = fake.requests.length;
    const out = await cli("klbr", ["repair", "default", "--state", daemon.stateDir, "--json"]);
    assert.equal(out.code, 0, out.stderr);
    const result = JSON.parse(out.stdout);
    assert.equal(result.repaired, true);
    assert.equal(fake.requests.length, before, "the repair asked the model nothing");
    const repaired = await client.waitFor<LaneRecord>((m) =>
      m.kind === "record" && m.type === "context.repaired"
    );
    assert.equal(repaired.data.by, "operator");

    await say(client, "say two", "two");
    const chats = fake.requests.slice(before).filter((r) => r.method === "POST");
    assert.ok(chats.every((r) => !JSON.stringify(r.body.messages).includes(POISON)));
    assert.equal(records(client, "model.failing").length, 0);
  });
});

Deno.test("the daemon repairs a history its server refuses once by itself, then answers", async () => {
  await withStrictDaemon(async (_daemon, client, fake) => {
    await say(client, "say one", "one");
    await say(client, "say two", "two");
    const repaired = records(client, "context.repaired");
    assert.equal(repaired.length, 1);
    assert.equal(repaired[0].data.by, "daemon");
    assert.match(String(repaired[0].data.reason), /Invalid 'messages\[\d+\]\.content'/);
    // One refused request, then the repaired one; no failure was recorded.
    const chats = fake.requests.filter((r) => r.method === "POST");
    const refused = chats.filter((r) => JSON.stringify(r.body.messages).includes(POISON));
    assert.equal(refused.length, 1);
    assert.equal(records(client, "model.failing").length, 0);
    assert.deepEqual(records(client, "send").map((r) => r.data.text), ["one", "two"]);
  });
});
