// The provider against the fake server over real HTTP: what is sent, what comes back, and
// how every way a stream can fail is reported.

import assert from "node:assert/strict";
import { parseConfig, type Route } from "../../../runtime/config/mod.ts";
import { isKlbrError, type KlbrError } from "../../../runtime/core/mod.ts";
import {
  createProvider,
  type ProviderDelta,
  ProviderFailure,
  type ProviderTurn,
  PYTHON_TOOL,
} from "../../../runtime/model/mod.ts";
import { type FakeOpenAI, type FakeResponse, startFakeOpenAI } from "../../fakes/openai_server.ts";

const MESSAGES = [{ role: "user" as const, content: "hello" }];

function route(url: string, fields = ""): Route {
  const text = `llm { url "${url}"; model "fake-model"; ${fields} }`;
  return parseConfig(text, { file: "test.kdl" }).config.routes.main;
}

/** Runs `body` against a fresh fake and always closes it. */
async function withFake(body: (fake: FakeOpenAI) => Promise<void>): Promise<void> {
  const fake = startFakeOpenAI();
  try {
    await body(fake);
  } finally {
    await fake.close();
  }
}

/** Streams one scripted response with the route's fields and returns the turn and deltas. */
async function streamOne(
  fake: FakeOpenAI,
  response: FakeResponse,
  fields = "",
): Promise<{ turn: ProviderTurn; deltas: ProviderDelta[] }> {
  fake.enqueue(response);
  const deltas: ProviderDelta[] = [];
  const provider = createProvider(route(fake.url, fields), { apiKey: undefined });
  const turn = await provider.streamChat({ messages: MESSAGES }, {
    onDelta: (d) => deltas.push(d),
  });
  return { turn, deltas };
}

/** Streams one scripted response that must fail, and returns the error and its failure. */
async function failOne(
  fake: FakeOpenAI,
  response: FakeResponse,
  fields = "",
  signal?: AbortSignal,
): Promise<{ error: KlbrError; failure: ProviderFailure }> {
  fake.enqueue(response);
  const provider = createProvider(route(fake.url, fields), { apiKey: undefined });
  try {
    await provider.streamChat({ messages: MESSAGES }, { signal });
  } catch (error) {
    assert.ok(isKlbrError(error, "provider_failed"), `unexpected error: ${error}`);
    assert.ok(error.cause instanceof ProviderFailure);
    return { error, failure: error.cause };
  }
  throw new Error("streamChat() resolved but was expected to fail");
}

Deno.test("`streamChat()` returns the streamed text and animates it in several deltas", async () => {
  await withFake(async (fake) => {
    const { turn, deltas } = await streamOne(fake, { text: "thinking about it" });
    assert.equal(turn.text, "thinking about it");
    assert.equal(turn.textPartial, false);
    assert.equal(turn.finishReason, "stop");
    assert.deepEqual(turn.toolCalls, []);
    assert.ok(deltas.length > 1);
    assert.equal(deltas.map((d) => d.text).join(""), "thinking about it");
    assert.ok(deltas.every((d) => d.type === "text"));
  });
});

Deno.test("`streamChat()` sends exactly one python tool, the model, the messages and usage streaming", async () => {
  await withFake(async (fake) => {
    await streamOne(fake, { text: "ok" }, `extra_options { temperature 0.2; }; max_tokens 64`);
    const { body, headers, path } = fake.requests[0];
    assert.equal(path, "/v1/chat/completions");
    assert.equal(body.model, "fake-model");
    assert.deepEqual(body.messages, MESSAGES);
    assert.equal(body.stream, true);
    assert.deepEqual(body.stream_options, { include_usage: true });
    assert.deepEqual(body.tools, [JSON.parse(JSON.stringify(PYTHON_TOOL))]);
    assert.equal(body.temperature, 0.2);
    assert.equal(body.max_tokens, 64);
    // A route without a profile gets no cache field at all: it might reject one.
    for (const field of ["prompt_cache_key", "prompt_cache_retention", "prompt_cache_options"]) {
      assert.equal(field in body, false, field);
    }
    // A keyless route sends no Authorization header, not an empty or placeholder one.
    assert.equal(headers.authorization, undefined);
  });
});

Deno.test("`streamChat()` sends the key as a bearer token when the route has one", async () => {
  await withFake(async (fake) => {
    fake.enqueue({ text: "ok" });
    const provider = createProvider(route(fake.url), { apiKey: "sk-test-123" });
    await provider.streamChat({ messages: MESSAGES });
    assert.equal(fake.requests[0].headers.authorization, "Bearer sk-test-123");
  });
});

Deno.test("`streamChat()` adds the declared profile's cache fields and never the smuggled ones", async () => {
  await withFake(async (fake) => {
    const fields = `cache_profile "openai_prompt_cache_retention"; cache_affinity "klbr:work"
      cache_retention "24h"
      extra_options { prompt_cache_key "smuggled"; cache_control "x"; cache_prompt #true }`;
    await streamOne(fake, { text: "ok" }, fields);
    const { body } = fake.requests[0];
    assert.equal(body.prompt_cache_key, "klbr:work");
    assert.equal(body.prompt_cache_retention, "24h");
    assert.equal("cache_control" in body, false);
    assert.equal("cache_prompt" in body, false);
    assert.equal("prompt_cache_options" in body, false);
  });
});

Deno.test("`streamChat()` sends a 30m retention as prompt_cache_options on an options route", async () => {
  await withFake(async (fake) => {
    const fields = `cache_profile "openai_prompt_cache_options"; cache_affinity "a"
      cache_retention "30m"`;
    await streamOne(fake, { text: "ok" }, fields);
    const { body } = fake.requests[0];
    assert.deepEqual(body.prompt_cache_options, { ttl: "30m" });
    assert.equal(body.prompt_cache_key, "a");
    assert.equal("prompt_cache_retention" in body, false);
  });
});

Deno.test("`streamChat()` reassembles a tool call whose arguments arrive in many chunks", async () => {
  await withFake(async (fake) => {
    const code = "await local.send('hi')\nwait()";
    const { turn } = await streamOne(fake, { text: "let me say hi", toolCall: { code } });
    assert.equal(turn.finishReason, "tool_calls");
    assert.equal(turn.text, "let me say hi");
    assert.equal(turn.toolCalls.length, 1);
    assert.equal(turn.toolCalls[0].id, "call_fake_0");
    assert.equal(turn.toolCalls[0].name, "python");
    assert.deepEqual(JSON.parse(turn.toolCalls[0].arguments), { code });
  });
});

Deno.test("`streamChat()` keeps interleaved tool calls apart by index", async () => {
  await withFake(async (fake) => {
    const { turn } = await streamOne(fake, {
      toolCall: [{ code: "x = 1 + 1" }, {
        id: "call_b",
        name: "other",
        arguments: '{"y": [1, 2]}',
      }],
    });
    assert.deepEqual(turn.toolCalls, [
      { id: "call_fake_0", name: "python", arguments: JSON.stringify({ code: "x = 1 + 1" }) },
      { id: "call_b", name: "other", arguments: '{"y": [1, 2]}' },
    ]);
  });
});

Deno.test("`streamChat()` mints a call id when the provider sends none", async () => {
  await withFake(async (fake) => {
    const { turn } = await streamOne(fake, { toolCall: { id: "", code: "wait()" } });
    assert.match(turn.toolCalls[0].id, /^call_[0-9A-Z]{26}$/);
  });
});

Deno.test("`streamChat()` reads OpenAI usage: cached_tokens as reads, cache_write_tokens as writes", async () => {
  await withFake(async (fake) => {
    const { turn } = await streamOne(fake, { text: "ok", usage: "openai" });
    assert.deepEqual(turn.usage, {
      promptTokens: 1200,
      completionTokens: 34,
      cacheReadTokens: 1024,
      cacheWriteTokens: 176,
    });
  });
});

Deno.test("`streamChat()` reads DeepSeek usage: hit tokens as reads, miss tokens as misses", async () => {
  await withFake(async (fake) => {
    const { turn } = await streamOne(fake, { text: "ok", usage: "deepseek" });
    assert.deepEqual(turn.usage, {
      promptTokens: 1200,
      completionTokens: 34,
      cacheReadTokens: 1024,
      cacheMissTokens: 176,
    });
  });
});

Deno.test("`streamChat()` leaves usage absent, not zero, when the provider reports none", async () => {
  await withFake(async (fake) => {
    const { turn } = await streamOne(fake, { text: "ok", usage: "none" });
    assert.deepEqual(turn.usage, {});
    assert.equal(JSON.stringify(turn.usage), "{}");
  });
});

Deno.test("`streamChat()` keeps a reported zero and reads a top-level cache_write_tokens", async () => {
  await withFake(async (fake) => {
    const usage = {
      prompt_tokens: 10,
      completion_tokens: 2,
      cache_write_tokens: 10,
      prompt_tokens_details: { cached_tokens: 0 },
    };
    const { turn } = await streamOne(fake, { text: "ok", usage });
    assert.deepEqual(turn.usage, {
      promptTokens: 10,
      completionTokens: 2,
      cacheReadTokens: 0,
      cacheWriteTokens: 10,
    });
  });
});

Deno.test("`streamChat()` treats a usage value that is not a count as not reported", async () => {
  await withFake(async (fake) => {
    const usage = { prompt_tokens: "many", completion_tokens: -3, prompt_cache_hit_tokens: 1.5 };
    const { turn } = await streamOne(fake, { text: "ok", usage });
    assert.deepEqual(turn.usage, {});
  });
});

Deno.test("`streamChat()` fails with status 429 and the provider's retry-after", async () => {
  await withFake(async (fake) => {
    const response = { status: 429, message: "slow down", retryAfter: 2 };
    const { error, failure } = await failOne(fake, response);
    assert.equal(error.status, 429);
    assert.equal(
      error.message,
      'cannot stream from llm "main": provider answered HTTP 429 (got "slow down")',
    );
    assert.equal(failure.reason, "http");
    assert.equal(failure.retryAfterMs, 2000);
    assert.equal(failure.partial, undefined);
    // maxRetries is 0: retrying is the caller's policy, so exactly one request was made.
    assert.equal(fake.requests.length, 1);
  });
});

Deno.test("`streamChat()` fails with status 500 and no retry hint", async () => {
  await withFake(async (fake) => {
    const { error, failure } = await failOne(fake, { status: 500, message: "boom" });
    assert.equal(error.status, 500);
    assert.equal(
      error.message,
      'cannot stream from llm "main": provider answered HTTP 500 (got "boom")',
    );
    assert.equal(failure.retryAfterMs, undefined);
    assert.equal(fake.requests.length, 1);
  });
});

Deno.test("`streamChat()` ends a stalled stream at the idle timeout with the text so far", async () => {
  await withFake(async (fake) => {
    const { error, failure } = await failOne(
      fake,
      { text: ["partial ", "never sent"], stall: true },
      "idle_timeout_ms 200",
    );
    assert.equal(error.status, undefined);
    assert.equal(
      error.message,
      'cannot stream from llm "main": no data for 200 ms (got 8 characters of text)',
    );
    assert.equal(failure.reason, "idle_timeout");
    assert.equal(failure.partial?.text, "partial ");
    assert.equal(failure.partial?.textPartial, true);
    assert.equal(failure.partial?.finishReason, null);
  });
});

Deno.test("`streamChat()` waits out a server's silence before its first chunk (a long prompt being processed) past the idle timeout, within the whole call's", async () => {
  await withFake(async (fake) => {
    const { turn } = await streamOne(
      fake,
      { text: "read it all", prefillMs: 400 },
      "timeout_ms 5000; idle_timeout_ms 150",
    );
    assert.equal(turn.text, "read it all");
  });
});

Deno.test("`streamChat()` ends a stream at the overall timeout when the idle timeout is longer", async () => {
  await withFake(async (fake) => {
    const { error, failure } = await failOne(
      fake,
      { text: ["a", "b"], stall: true },
      "timeout_ms 300; idle_timeout_ms 60000",
    );
    assert.equal(failure.reason, "timeout");
    assert.match(error.message, /^cannot stream from llm "main": the call took longer than 300 ms/);
  });
});

Deno.test("`streamChat()` reports a cut connection as partial text and drops the unfinished tool call", async () => {
  await withFake(async (fake) => {
    const response: FakeResponse = {
      text: "I will send",
      toolCall: { code: "await local.send('never run')" },
      cut: "reset",
    };
    const { error, failure } = await failOne(fake, response);
    assert.equal(failure.reason, "cut");
    assert.equal(
      error.message,
      'cannot stream from llm "main": the stream ended before the provider finished (got 11 characters of text, 1 unfinished tool call(s))',
    );
    assert.deepEqual(failure.partial, {
      text: "I will send",
      textPartial: true,
      reasoning: null,
      toolCalls: [],
      finishReason: null,
      finishInferred: false,
      cutInToolCall: false,
      usage: {},
    });
  });
});

Deno.test("`streamChat()` reports a body closed without a finish reason as cut", async () => {
  await withFake(async (fake) => {
    const { failure } = await failOne(fake, { text: "half a thou", cut: "close" });
    assert.equal(failure.reason, "cut");
    assert.equal(failure.partial?.text, "half a thou");
    assert.equal(failure.partial?.textPartial, true);
  });
});

Deno.test("`streamChat()` reports an error event inside the stream with the partial text", async () => {
  await withFake(async (fake) => {
    const { error, failure } = await failOne(fake, {
      text: "abc",
      streamError: true,
      message: "overloaded",
    });
    assert.equal(failure.reason, "stream_error");
    assert.equal(
      error.message,
      'cannot stream from llm "main": the provider sent an error inside the stream (got "overloaded")',
    );
    assert.equal(failure.partial?.text, "abc");
  });
});

Deno.test("`streamChat()` stops when the caller aborts and keeps what had arrived", async () => {
  await withFake(async (fake) => {
    fake.enqueue({ text: ["first", "second"], stall: true });
    const controller = new AbortController();
    const provider = createProvider(route(fake.url), { apiKey: undefined });
    const error = await provider.streamChat({ messages: MESSAGES }, {
      signal: controller.signal,
      onDelta: () => controller.abort(),
    }).then(() => undefined, (e) => e);
    assert.ok(isKlbrError(error, "provider_failed"));
    const failure = error.cause as ProviderFailure;
    assert.equal(failure.reason, "aborted");
    assert.equal(failure.partial?.text, "first");
  });
});

Deno.test("`streamChat()` fails as network, without a status, when nothing listens", async () => {
  const fake = startFakeOpenAI();
  const url = fake.url;
  await fake.close();
  const provider = createProvider(route(url), { apiKey: undefined });
  const error = await provider.streamChat({ messages: MESSAGES }).then(() => undefined, (e) => e);
  assert.ok(isKlbrError(error, "provider_failed"));
  assert.equal(error.status, undefined);
  assert.equal((error.cause as ProviderFailure).reason, "network");
  assert.equal((error.cause as ProviderFailure).partial, undefined);
});

Deno.test("`streamChat()` rethrows an error from onDelta unchanged and ends the stream", async () => {
  await withFake(async (fake) => {
    fake.enqueue({ text: ["one", "two"], stall: true });
    const provider = createProvider(route(fake.url), { apiKey: undefined });
    const boom = new Error("animation broke");
    const error = await provider.streamChat({ messages: MESSAGES }, {
      onDelta: () => {
        throw boom;
      },
    }).then(() => undefined, (e) => e);
    assert.equal(error, boom);
  });
});

Deno.test("`PYTHON_TOOL` is one python function taking only a code string", () => {
  assert.equal(PYTHON_TOOL.type, "function");
  assert.equal(PYTHON_TOOL.function.name, "python");
  assert.deepEqual(Object.keys(PYTHON_TOOL.function.parameters.properties), ["code"]);
  assert.equal(PYTHON_TOOL.function.parameters.properties.code.type, "string");
  assert.deepEqual(PYTHON_TOOL.function.parameters.required, ["code"]);
  const description = PYTHON_TOOL.function.description;
  assert.match(description, /persist/);
  // The same tool serves child agents, who cannot speak: speech and waiting are the contract's.
  assert.doesNotMatch(description, /local\.send/);
  assert.match(description, /first message says what a cell can\s+reach and how to finish/);
  assert.ok(Object.isFrozen(PYTHON_TOOL.function.parameters));
});

// ---- the fake itself: the daemon's end-to-end tests rely on its script API ----

Deno.test("`startFakeOpenAI()` lists its models and records the request", async () => {
  const fake = startFakeOpenAI({ models: ["a", "b"] });
  try {
    const response = await fetch(`${fake.url}/models`);
    const listed = await response.json();
    assert.deepEqual(listed.data.map((m: { id: string }) => m.id), ["a", "b"]);
    assert.equal(fake.requests[0].method, "GET");
    assert.equal(fake.requests[0].path, "/v1/models");
  } finally {
    await fake.close();
  }
});

Deno.test("`startFakeOpenAI()` answers 500 when nothing is scripted, or asks the fallback", async () => {
  const bare = startFakeOpenAI();
  try {
    const { error } = await failOne(bare, {
      status: 500,
      message: "fake: no scripted response left",
    });
    assert.equal(error.status, 500);
    // The queue is empty now: the default fallback says so in the same words.
    const provider = createProvider(route(bare.url), { apiKey: undefined });
    const again = await provider.streamChat({ messages: MESSAGES }).then(() => undefined, (e) => e);
    assert.equal(again.message, error.message);
  } finally {
    await bare.close();
  }
  const scripted = startFakeOpenAI({ fallback: (req) => ({ text: `seen ${req.body.model}` }) });
  try {
    const provider = createProvider(route(scripted.url), { apiKey: undefined });
    const turn = await provider.streamChat({ messages: MESSAGES });
    assert.equal(turn.text, "seen fake-model");
  } finally {
    await scripted.close();
  }
});

Deno.test("`startFakeOpenAI()` answers a non-streaming request with one whole completion", async () => {
  await withFake(async (fake) => {
    fake.enqueue({ text: "hi", toolCall: { code: "wait()" }, usage: "deepseek" });
    const response = await fetch(`${fake.url}/chat/completions`, {
      method: "POST",
      body: JSON.stringify({ model: "m", messages: MESSAGES }),
    });
    const body = await response.json();
    assert.equal(body.choices[0].message.content, "hi");
    assert.equal(body.choices[0].message.tool_calls[0].function.arguments, '{"code":"wait()"}');
    assert.equal(body.choices[0].finish_reason, "tool_calls");
    assert.equal(body.usage.prompt_cache_miss_tokens, 176);
  });
});

Deno.test("`waitForRequests()` resolves once enough requests arrived and rejects after its timeout", async () => {
  await withFake(async (fake) => {
    const waiting = fake.waitForRequests(1);
    await (await fetch(`${fake.url}/models`)).body?.cancel();
    assert.equal((await waiting)[0].path, "/v1/models");
    await assert.rejects(fake.waitForRequests(2, 50), /fake: 1 of 2 requests after 50 ms/);
  });
});
