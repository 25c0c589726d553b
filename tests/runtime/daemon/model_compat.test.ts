// The compatibility suite: one conversation per model-server profile, through the real daemon,
// against the fake server behaving as that server documents (tests/fakes/model_quirks.ts cites
// each behaviour). Every profile gets the same two messages; each must be answered exactly
// once, no request may be refused beyond the one a route learns from (tools refused), nothing
// may be lost, and /health must say `ok` at the end. The quirks no one server owns (JSON to a
// streamed request, no finish_reason, an HTML page) and a task longer than 16 steps follow.
// The 401, 429 and unknown-model cases are in model_failures.test.ts.

import assert from "node:assert/strict";
import type { LaneRecord } from "../../../runtime/core/mod.ts";
import { cli } from "../../_helpers/cli.ts";
import { startTestDaemon, type TestDaemon } from "../../_helpers/daemon.ts";
import { connectLane, type LaneClient, sendAndWait } from "../../_helpers/lane_client.ts";
import {
  type FakeOpenAIOptions,
  type FakeProfile,
  fakePromptTokens,
  type FakeResponse,
  isSummarizerRequest,
  type RecordedRequest,
  startFakeOpenAI,
} from "../../fakes/openai_server.ts";

type Message = { role: string; content: string | null };

/** The last user message's text, or "" when the last message is not a user's. */
function lastUserText(request: RecordedRequest): string {
  const messages = request.body.messages as Message[];
  const last = messages[messages.length - 1];
  return last.role === "user" ? String(last.content ?? "") : "";
}

/** The word a request's last message asks to hear (`say <word>`); undefined after a cell's result. */
function askedWord(request: RecordedRequest): string | undefined {
  const text = lastUserText(request);
  if (text.startsWith("[runtime] result of your python cell")) return undefined;
  return /say (\w+)/.exec(text)?.[1];
}

/**
 * A model that answers `say <word>` with a cell sending `heard <word>` and a cell's result with
 * `wait()`: through tool calls when the request offers tools, through a python fence when not.
 * It reasons aloud on every reply (a server without reasoning fields ignores that), and on a
 * parallel-call profile it sends the send together with a second call.
 */
function scriptedModel(parallel: boolean) {
  return (request: RecordedRequest): FakeResponse => {
    const tools = request.body.tools !== undefined;
    const asked = askedWord(request);
    const reasoning = "Let me think about what to do.";
    if (asked === undefined) {
      return tools
        ? { reasoning, toolCall: { code: "wait()" } }
        : { text: "```python\nwait()\n```" };
    }
    const send = `await local.send("heard ${asked}")`;
    if (!tools) return { text: `I will answer.\n\n\`\`\`python\n${send}\n\`\`\`` };
    return {
      reasoning,
      toolCall: parallel ? [{ code: send }, { code: "n = 1" }] : { code: send },
    };
  };
}

const records = (client: LaneClient, type: string) =>
  client.messages.filter((m): m is LaneRecord => m.kind === "record" && m.type === type);

/** Says `say <word>` and waits for the end of the frame that took it up. */
const say = (client: LaneClient, word: string) => sendAndWait(client, `say ${word}`);

async function withConversation(
  fake: FakeOpenAIOptions,
  fn: (parts: {
    daemon: TestDaemon;
    client: LaneClient;
    fake: ReturnType<typeof startFakeOpenAI>;
  }) => Promise<void>,
  model?: string,
): Promise<void> {
  const server = startFakeOpenAI({ ...fake, models: [model ?? "fake"] });
  const daemon = await startTestDaemon({ modelUrl: server.url, model });
  const client = await connectLane({ port: daemon.port, token: daemon.token });
  try {
    await fn({ daemon, client, fake: server });
  } finally {
    await client.close();
    await daemon.stop();
    await server.close();
    await Deno.remove(daemon.stateDir, { recursive: true }).catch(() => {});
    await Deno.remove(daemon.workspace, { recursive: true }).catch(() => {});
  }
}

/**
 * The session made one route move, `context_tokens` to `to` (the test daemon's route configures
 * 32,768), for the reason `reason` matches.
 */
function assertOneContextMove(client: LaneClient, move: { to: string; reason: RegExp }): void {
  const [adapted, ...more] = records(client, "route.adapted");
  assert.deepEqual(more, []);
  assert.deepEqual(
    [adapted?.data.setting, adapted?.data.to, adapted?.data.configured],
    ["context_tokens", move.to, 32_768],
  );
  assert.match(String(adapted?.data.reason), move.reason);
}

const health = async (daemon: TestDaemon) => await (await fetch(`${daemon.url}/health`)).json();

/** The profiles, and the refusals each may answer once while its route learns. */
const PROFILES: [FakeProfile, { learns?: "tool_calls" | "role_order"; parallel?: boolean }][] = [
  ["openai", {}],
  ["llama.cpp", {}],
  ["llama.cpp-no-jinja", { learns: "tool_calls" }],
  ["vllm", {}],
  ["ollama", { parallel: true }],
  ["ollama-no-tools", { learns: "tool_calls" }],
  ["deepseek", {}],
  ["mistral", {}],
  ["openrouter", {}],
];

for (const [profile, expect] of PROFILES) {
  Deno.test(`compat ${profile}: two messages, each answered once, every request accepted`, async () => {
    await withConversation(
      { profile, fallback: scriptedModel(expect.parallel ?? false) },
      async ({ daemon, client, fake }) => {
        await say(client, "one");
        await say(client, "two");
        assert.deepEqual(records(client, "send").map((r) => r.data.text), [
          "heard one",
          "heard two",
        ]);
        const refused = fake.statuses.filter((status) => status !== 200);
        const adapted = records(client, "route.adapted").map((r) => r.data.setting);
        if (expect.learns === undefined) {
          assert.deepEqual(refused, [], `${profile} refused a request`);
          assert.deepEqual(adapted, []);
        } else {
          assert.equal(refused.length, 1, `${profile} refuses once, then the route adapts`);
          assert.deepEqual(adapted, [expect.learns]);
        }
        assert.equal(records(client, "model.failing").length, 0);
        if (["deepseek", "ollama", "openrouter"].includes(profile)) {
          assert.ok(records(client, "reasoning").length > 0, "reasoning is recorded");
          // And streamed live as it comes, apart from the reply's text.
          const live = (reasoning: boolean) =>
            client.messages.filter((m) => m.kind === "token" && !!m.reasoning === reasoning)
              .map((m) => m.kind === "token" ? m.text : "").join("");
          assert.match(live(true), /^(Let me think about what to do\.)+$/);
          assert.doesNotMatch(live(false), /Let me think/);
        }
        const status = await health(daemon);
        assert.equal(status.status, "ok", JSON.stringify(status));
      },
      // A Mistral route is strict by default because its model (or URL) names Mistral.
      profile === "mistral" ? "mistral-small-latest" : undefined,
    );
  });
}

Deno.test("compat: a JSON completion to a streamed request and a stream without finish_reason are answered", async () => {
  for (const quirks of [{ jsonToStream: true }, { noFinishReason: true }]) {
    await withConversation({ quirks, fallback: scriptedModel(false) }, async ({ client }) => {
      await say(client, "one");
      assert.deepEqual(records(client, "send").map((r) => r.data.text), ["heard one"]);
      assert.equal(records(client, "model.failing").length, 0, JSON.stringify(quirks));
    });
  }
});

Deno.test("compat: an HTML page where the API should be is named, not retried, and /health says so", async () => {
  await withConversation(
    { quirks: { htmlPage: "Open WebUI" }, fallback: scriptedModel(false) },
    async ({ daemon, client, fake }) => {
      await client.request({ kind: "input", client_msg_id: "h1", text: "say one" });
      const failing = await client.waitFor<LaneRecord>(
        (m) => m.kind === "record" && m.type === "model.failing",
        30_000,
      );
      assert.match(String(failing.data.error), /the server answered an HTML page: Open WebUI/);
      assert.equal(failing.data.next_retry_ms, null, "an HTML page is not retried");
      assert.equal(fake.statuses.length, 1);
      assert.equal(records(client, "send").length, 0);
      const status = await health(daemon);
      assert.notEqual(status.status, "ok", JSON.stringify(status));
    },
  );
});

for (const provider of ["openai", "deepseek", "openrouter"] as const) {
  Deno.test(`compat: an account out of credit (${provider}) is named with its fix, not retried and its history not "repaired"; with credit added the next message takes the waiting one up`, async () => {
    await withConversation({ fallback: scriptedModel(false) }, async ({ client, fake }) => {
      await say(client, "one");
      const before = fake.statuses.length;
      fake.quirks.outOfCredit = provider;
      await client.request({ kind: "input", client_msg_id: "c2", text: "say two" });
      const failing = await client.waitFor<LaneRecord>(
        (m) => m.kind === "record" && m.type === "model.failing",
        30_000,
      );
      assert.match(String(failing.data.error), /out of credit or past its spending limit/);
      assert.equal(failing.data.next_retry_ms, null, "no retry changes a balance");
      await client.waitFor((m) => m.kind === "record" && m.type === "session.stalled", 10_000);
      assert.equal(fake.statuses.length, before + 1);
      // The history was not the problem: it is not rewritten.
      assert.deepEqual(records(client, "context.repaired"), []);
      fake.quirks.outOfCredit = undefined;
      // The waiting message and the new one are taken up together, and answered.
      await say(client, "three");
      assert.equal(records(client, "send").length, 2);
      const frame = records(client, "frame.finished").at(-1)!;
      assert.deepEqual([frame.data.state, (frame.data.input_ids as string[]).length], ["done", 2]);
    });
  });
}

Deno.test('compat: a field the server does not take is named with the switch that stops it, and the history is not "repaired"', async () => {
  await withConversation({ fallback: scriptedModel(false) }, async ({ client, fake }) => {
    await say(client, "one");
    // A proxy in front of the server, updated, now refuses `stream_options`.
    fake.quirks.unknownFields = ["stream_options"];
    await client.request({ kind: "input", client_msg_id: "f2", text: "say two" });
    const failing = await client.waitFor<LaneRecord>(
      (m) => m.kind === "record" && m.type === "model.failing",
      30_000,
    );
    assert.match(
      String(failing.data.error),
      /does not take the field stream_options: set stream_usage #false on llm "main", then restart klbr/,
    );
    assert.equal(failing.data.next_retry_ms, null);
    await client.waitFor((m) => m.kind === "record" && m.type === "session.stalled", 10_000);
    assert.deepEqual(records(client, "context.repaired"), []);
  });
});

Deno.test("compat: a python call the server's tool parser left in the text runs; two in a row move the route to text mode", async () => {
  // vLLM's hermes parser missing a Qwen call: `content` holds the <tool_call> block and
  // `tool_calls` is empty, finish_reason "stop" (vllm-project/vllm#17161, #21571).
  const leak = (code: string): FakeResponse => ({
    text: `<tool_call>\n${JSON.stringify({ name: "python", arguments: { code } })}\n</tool_call>`,
    finishReason: "stop",
  });
  const model = (request: RecordedRequest): FakeResponse => {
    const asked = askedWord(request);
    return leak(asked === undefined ? "wait()" : `await local.send("heard ${asked}")`);
  };
  await withConversation({ profile: "vllm", fallback: model }, async ({ client, fake }) => {
    await say(client, "one");
    await say(client, "two");
    assert.deepEqual(records(client, "send").map((r) => r.data.text), ["heard one", "heard two"]);
    const [adapted, ...more] = records(client, "route.adapted");
    assert.deepEqual(more, []);
    assert.deepEqual([adapted?.data.setting, adapted?.data.to], ["tool_calls", "text"]);
    assert.match(String(adapted?.data.reason), /left in its text, not in tool_calls/);
    assert.deepEqual(fake.statuses.filter((s) => s !== 200), []);
  });
});

Deno.test("compat: a tool call whose arguments hold raw newlines (a small model's code) runs, and the history a strict server reads back holds it as JSON", async () => {
  // The arguments text as such models write it: the code's newlines unescaped. vLLM refuses
  // that text in a history ("Invalid control character at"); the fake's vLLM profile refuses
  // any history arguments that are no JSON object.
  const raw = (code: string) => `{"code": "${code.replaceAll('"', '\\"')}"}`;
  const model = (request: RecordedRequest): FakeResponse => {
    const asked = askedWord(request);
    if (asked === undefined) {
      return { toolCall: { name: "python", arguments: raw("n = 1\nwait()") } };
    }
    return {
      toolCall: {
        name: "python",
        arguments: raw(`word = "${asked}"\nawait local.send("heard " + word)`),
      },
    };
  };
  await withConversation({ profile: "vllm", fallback: model }, async ({ client, fake }) => {
    await say(client, "one");
    await say(client, "two");
    assert.deepEqual(records(client, "send").map((r) => r.data.text), ["heard one", "heard two"]);
    assert.deepEqual(fake.statuses.filter((s) => s !== 200), []);
    // The later requests carry the first call's code, re-encoded as a JSON object.
    const last = fake.requests.at(-1)!.body.messages as {
      tool_calls?: { function: { arguments: string } }[];
    }[];
    const first = last.find((m) => m.tool_calls !== undefined)!.tool_calls![0].function.arguments;
    assert.deepEqual(JSON.parse(first), {
      code: 'word = "one"\nawait local.send("heard " + word)',
    });
  });
});

Deno.test("compat: a task of 20 steps runs to its end within the default step limit", async () => {
  let steps = 0;
  const model = (request: RecordedRequest): FakeResponse => {
    if (lastUserText(request).includes("say")) steps = 0;
    steps++;
    if (steps < 20) return { toolCall: { code: `step = ${steps}` } };
    if (steps === 20) return { toolCall: { code: 'await local.send("done in 20")' } };
    return { toolCall: { code: "wait()" } };
  };
  await withConversation({ fallback: model }, async ({ client }) => {
    await say(client, "long");
    assert.deepEqual(records(client, "send").map((r) => r.data.text), ["done in 20"]);
    const ended = records(client, "turn.ended").at(-1)!;
    assert.equal(ended.data.reason, "wait");
  });
});

Deno.test("compat: a reply cut by its token limit inside a tool call is not run, and the model is told why", async () => {
  const fake = {
    fallback: (request: RecordedRequest): FakeResponse => {
      const messages = request.body.messages as Message[];
      if (messages[messages.length - 1].role === "tool") {
        return { toolCall: { code: 'await local.send("shorter")\nwait()' } };
      }
      return {
        toolCall: { name: "python", arguments: '{"code": "print(\'a very long cell' },
        finishReason: "length",
      };
    },
  };
  await withConversation(fake, async ({ client, fake }) => {
    await say(client, "one");
    assert.deepEqual(records(client, "send").map((r) => r.data.text), ["shorter"]);
    assert.equal(records(client, "cell.started").length, 1, "only the second cell ran");
    const second = fake.requests.filter((r) => r.method === "POST")[1];
    const result = (second.body.messages as Message[]).at(-1)!;
    assert.equal(
      result.content,
      "[not run: your reply hit the token limit in the middle of the call; write a shorter cell]",
    );
    // The raw arguments stay in the store; the request carries a JSON object.
    const call = (second.body.messages as { tool_calls?: { function: { arguments: string } }[] }[])
      .find((m) => m.tool_calls !== undefined)!;
    assert.equal(call.tool_calls![0].function.arguments, "{}");
  });
});

/** A model whose cell prints about 2,000 of the fake's tokens each `say` turn, then sends. */
function longOutputs(request: RecordedRequest): FakeResponse {
  return /say \w+/.test(lastUserText(request))
    ? { toolCall: { code: `print('x' * 6000)\nawait local.send("heard")` } }
    : { toolCall: { code: "wait()" } };
}

/** The fake's token count of each turn's request it got, summarizer requests left out. */
function turnRequestSizes(fake: ReturnType<typeof startFakeOpenAI>): number[] {
  return fake.requests.filter((r) => r.method === "POST" && !isSummarizerRequest(r))
    .map((r) => fakePromptTokens(r.body));
}

Deno.test("compat: a server whose context is smaller than the route's refuses once; the route shrinks to the size it stated and every message is answered", async () => {
  // llama-server started with a small -c: each turn's cell prints about 2,000 of its tokens, so
  // the fourth turn's history passes 6,000 while the route says 32,768.
  const quirks = { context: { tokens: 6_000, words: "llama.cpp" as const } };
  await withConversation(
    { quirks, countTokens: true, summarizer: "faithful", fallback: longOutputs },
    async ({ daemon, client, fake }) => {
      for (const word of ["one", "two", "three", "four", "five"]) await say(client, word);
      assert.equal(records(client, "send").length, 5, "every message answered once");
      assertOneContextMove(client, {
        to: "6000",
        reason: /exceeds the available context size \(6000/,
      });
      // The turns' requests: one refused, none past the server's context after it.
      const sizes = turnRequestSizes(fake);
      const refused = sizes.findIndex((size) => size > 6_000);
      assert.ok(refused > 0, `sizes: ${sizes}`);
      assert.deepEqual(sizes.slice(refused + 1).filter((size) => size > 6_000), [], `${sizes}`);
      // The summaries are the model's: the summarizer's own requests keep to the learned size.
      const compactions = records(client, "context.compacted");
      assert.ok(compactions.length > 0);
      assert.deepEqual(
        compactions.map((c) => [c.data.source, c.data.fallback_reason ?? null]),
        compactions.map(() => ["model", null]),
      );
      assert.equal(records(client, "model.failing").length, 0);
      // What the route learned is shown, not hidden: in /health and in `klbr status`'s words.
      const report = await health(daemon);
      assert.equal(report.status, "ok");
      assert.deepEqual(report.routes_adapted, [
        { route: "main", context_tokens: 6_000, configured_context_tokens: 32_768 },
      ]);
      const status = await cli("klbr", ["status", "--state", daemon.stateDir]);
      assert.match(
        status.stdout,
        /^session default route main learned its server: requests within 6000 tokens \(configured 32768\)/m,
      );
    },
  );
});

Deno.test("compat: Ollama cutting requests past its num_ctx without a word: the route shrinks under what it kept, and the requests after it are whole", async () => {
  const quirks = { truncateAt: 4_096 };
  await withConversation(
    { profile: "ollama", quirks, countTokens: true, summarizer: "faithful", fallback: longOutputs },
    async ({ daemon, client, fake }) => {
      for (const word of ["one", "two", "three", "four", "five", "six"]) await say(client, word);
      assert.equal(records(client, "send").length, 6, "every message answered once");
      assertOneContextMove(client, {
        to: "3686",
        reason: /reported 4096 prompt tokens for a request of/,
      });
      // The same count reported for a growing request is the mark: a few cut requests in a
      // row, then every request is whole.
      const sizes = turnRequestSizes(fake);
      const cut = sizes.map((size, i) => size > 4_096 ? i : -1).filter((i) => i >= 0);
      assert.ok(cut.length >= 2 && cut.length <= 3, `sizes: ${sizes}`);
      assert.equal(cut.at(-1), cut[0] + cut.length - 1, `in a row: ${sizes}`);
      assert.ok(sizes.length > cut.at(-1)! + 2, `requests went on after the move: ${sizes}`);
      const log = daemon.logs().split("\n").filter((line) => line.includes(" route.cut "));
      assert.equal(log.length, 1, log.join("\n"));
      assert.match(log[0], /OLLAMA_CONTEXT_LENGTH/);
    },
  );
});
