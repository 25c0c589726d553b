// A model server with no tool calling at all, as llama.cpp's `llama-server` without `--jinja`
// answers (HTTP 500 "tools param requires --jinja flag"; ggml-org/llama.cpp#10920 shows the
// older "Unsupported param: tools"), serving a model that writes its code in markdown fences.
// Through the real daemon: the `auto` route moves to text mode once, recorded; each input is
// answered exactly once through fenced cells; the conversation replays, compacts and survives
// a SIGKILL.

import assert from "node:assert/strict";
import type { LaneRecord } from "../../../runtime/core/mod.ts";
import { startTestDaemon } from "../../_helpers/daemon.ts";
import { connectLane, type LaneClient, sendAndWait } from "../../_helpers/lane_client.ts";
import {
  type FakeResponse,
  type RecordedRequest,
  startFakeOpenAI,
} from "../../fakes/openai_server.ts";

/** The last user message of a request: what the model is answering. */
function lastUser(request: RecordedRequest): string {
  const users = request.body.messages.filter((m: { role: string }) => m.role === "user");
  return String(users[users.length - 1]?.content ?? "");
}

/**
 * A text-only model: refuses `tools` as llama-server without --jinja does; otherwise answers a
 * person's message with a fenced cell that sends, and a cell's result with a fenced `wait()`.
 */
function textOnlyModel(request: RecordedRequest): FakeResponse {
  if (request.body.tools !== undefined) {
    return { status: 500, message: "tools param requires --jinja flag" };
  }
  const last = lastUser(request);
  if (last.startsWith("[runtime] result of your python cell")) {
    return { text: "Done.\n```python\nwait()\n```" };
  }
  const asked = /say (\w+)/.exec(last)?.[1] ?? "nothing";
  return {
    text: `I will answer.\n\n\`\`\`python\nawait local.send("heard ${asked}")\n\`\`\`\n` +
      "```python\nprint('never runs')\n```",
  };
}

function sends(client: LaneClient): string[] {
  return client.messages.filter((m): m is LaneRecord => m.kind === "record" && m.type === "send")
    .map((r) => String(r.data.text));
}

/** Says `say <word>` and waits for the end of the frame that took it up. */
const say = (client: LaneClient, word: string) => sendAndWait(client, `say ${word}`);

Deno.test("a text-only model answers through fenced cells, once each; the session replays, compacts and survives a SIGKILL", async () => {
  const fake = startFakeOpenAI({ fallback: textOnlyModel });
  let daemon = await startTestDaemon({ modelUrl: fake.url });
  let client = await connectLane({ port: daemon.port, token: daemon.token });
  try {
    await say(client, "alpha");
    const adapted = client.messages.filter((m) =>
      m.kind === "record" && m.type === "route.adapted"
    ) as LaneRecord[];
    assert.equal(adapted.length, 1, "the route moves to text mode once");
    assert.equal(adapted[0].data.setting, "tool_calls");
    assert.equal(adapted[0].data.to, "text");
    assert.match(String(adapted[0].data.reason), /tools param requires --jinja flag/);
    // Every request after the refusal is valid for this server: no tools, the fence rules told.
    const chats = fake.requests.filter((r) => r.method === "POST");
    assert.ok(chats[0].body.tools !== undefined, "auto starts native");
    for (const request of chats.slice(1)) {
      assert.equal(request.body.tools, undefined);
      assert.match(
        request.body.messages[0].content,
        /write each cell as one ```python fenced block/,
      );
    }
    // The second request's result names the unrun second fence.
    const resultMessage = lastUser(chats[2]);
    assert.match(resultMessage, /only the first python block of a reply runs; 1 more did not/);

    const words = ["alpha", "bravo", "charlie", "delta", "echo"];
    for (const word of words.slice(1)) await say(client, word);
    assert.deepEqual(sends(client), words.map((word) => `heard ${word}`));
    const cells = client.messages.filter((m) => m.kind === "record" && m.type === "cell.finished");
    assert.equal(cells.length, 10, "two cells a message: the send and the wait");

    // Compaction without the model's help (the extractive summary when `long` says nothing
    // useful): the next request carries the summary, still in text mode.
    const compacted = await client.request({
      kind: "op.compact",
      request: "c1",
      session: "default",
    });
    assert.equal(compacted.kind, "op.result", JSON.stringify(compacted));
    assert.equal(compacted.kind === "op.result" && compacted.result.compacted, true);

    // SIGKILL with nothing in flight, then a restart: a new client replays the whole session.
    await client.close();
    await daemon.kill();
    daemon = await daemon.restart();
    client = await connectLane({ port: daemon.port, token: daemon.token, since: 0 });
    await client.waitFor((m) => m.kind === "record" && m.type === "route.adapted", 30_000);
    const before = fake.requests.length;
    await say(client, "foxtrot");
    assert.deepEqual(sends(client), [...words, "foxtrot"].map((word) => `heard ${word}`));
    // The request after the compaction opens with the summary, then the new input.
    const after = fake.requests.slice(before).find((r) => r.method === "POST")!;
    assert.match(after.body.messages[1].content, /^\[runtime\] /);
    // Still text mode after the restart: the adaptation is durable, no tools sent again.
    for (const request of fake.requests.slice(before)) {
      if (request.method === "POST") assert.equal(request.body.tools, undefined);
    }
  } finally {
    await client.close();
    await daemon.stop();
    await fake.close();
    await Deno.remove(daemon.stateDir, { recursive: true }).catch(() => {});
    await Deno.remove(daemon.workspace, { recursive: true }).catch(() => {});
  }
});
