// The provider against fakes that behave like real servers (tests/fakes/model_quirks.ts), over
// real HTTP: reasoning, tool calls assembled by id, bodies that are not a stream, replies that
// end without a finish reason, and refusals that name their cause and fix and are not retried.

import assert from "node:assert/strict";
import { parseConfig, type Route } from "../../../runtime/config/mod.ts";
import { isKlbrError, type KlbrError } from "../../../runtime/core/mod.ts";
import {
  type ChatMessage,
  createProvider,
  modelFailureFacts,
  type ProviderDelta,
  ProviderFailure,
  type ProviderTurn,
} from "../../../runtime/model/mod.ts";
import {
  type FakeOpenAIOptions,
  type FakeResponse,
  startFakeOpenAI,
} from "../../fakes/openai_server.ts";

const HELLO: ChatMessage[] = [{ role: "user", content: "hello" }];

function route(url: string, fields = ""): Route {
  const text = `llm { url "${url}"; model "fake-model"; ${fields} }`;
  return parseConfig(text, { file: "test.kdl" }).config.routes.main;
}

interface Call {
  fields?: string;
  messages?: ChatMessage[];
  apiKey?: string;
  tools?: boolean;
}

/** Runs one request against a fresh fake with `options`, answering `response`. */
async function ask(
  options: FakeOpenAIOptions,
  response: FakeResponse,
  call: Call = {},
): Promise<
  {
    turn?: ProviderTurn;
    error?: KlbrError;
    failure?: ProviderFailure;
    deltas: ProviderDelta[];
    fake: ReturnType<typeof startFakeOpenAI>;
  }
> {
  const fake = startFakeOpenAI(options);
  fake.enqueue(response);
  const deltas: ProviderDelta[] = [];
  const provider = createProvider(route(fake.url, call.fields), { apiKey: call.apiKey });
  try {
    const turn = await provider.streamChat(
      { messages: call.messages ?? HELLO, tools: call.tools },
      { onDelta: (d) => deltas.push(d) },
    );
    return { turn, deltas, fake };
  } catch (error) {
    assert.ok(isKlbrError(error, "provider_failed"), `unexpected error: ${error}`);
    assert.ok(error.cause instanceof ProviderFailure);
    return { error, failure: error.cause, deltas, fake };
  } finally {
    await fake.close();
  }
}

// ---- reasoning ----

Deno.test("`streamChat()` keeps DeepSeek's reasoning_content apart from the text and streams it as reasoning deltas", async () => {
  const { turn, deltas } = await ask({ profile: "deepseek" }, {
    reasoning: "The user greets me; I should answer.",
    text: "hi there",
  });
  assert.deepEqual(turn?.reasoning, {
    field: "reasoning_content",
    text: "The user greets me; I should answer.",
  });
  assert.equal(turn?.text, "hi there");
  const kinds = deltas.map((d) => d.type);
  // Every reasoning delta reaches onDelta (the stall detector's progress), before the text.
  assert.ok(kinds.filter((k) => k === "reasoning").length > 1);
  assert.ok(kinds.lastIndexOf("reasoning") < kinds.indexOf("text"));
  assert.equal(
    deltas.filter((d) => d.type === "reasoning").map((d) => d.text).join(""),
    "The user greets me; I should answer.",
  );
});

Deno.test("`streamChat()` records the field the server used: Ollama's and OpenRouter's `reasoning`", async () => {
  for (const profile of ["ollama", "openrouter"] as const) {
    const { turn } = await ask({ profile }, { reasoning: "thinking…", text: "ok" });
    assert.deepEqual(turn?.reasoning, { field: "reasoning", text: "thinking…" }, profile);
    assert.equal(turn?.text, "ok", profile);
  }
});

Deno.test("`streamChat()` counts reasoning once when a server sends it under two names", async () => {
  const chunk = (delta: object, finish: string | null = null) =>
    `data: ${JSON.stringify({ choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
  const body = chunk({ role: "assistant", reasoning: "a", reasoning_content: "a" }) +
    chunk({ reasoning: "b", reasoning_content: "b" }) + chunk({ content: "done" }) +
    chunk({}, "stop") + "data: [DONE]\n\n";
  const { turn } = await ask({}, { raw: { body } });
  assert.deepEqual(turn?.reasoning, { field: "reasoning_content", text: "ab" });
});

Deno.test("`streamChat()` without reasoning gives `reasoning: null`", async () => {
  const { turn } = await ask({}, { text: "plain" });
  assert.equal(turn?.reasoning, null);
});

// ---- tool calls ----

Deno.test("`streamChat()` keeps Ollama's parallel calls apart although every one is at index 0", async () => {
  const { turn } = await ask({ profile: "ollama" }, {
    toolCall: [{ id: "call_a", code: "a = 1" }, { id: "call_b", code: "b = 2" }],
  });
  assert.deepEqual(turn?.toolCalls, [
    { id: "call_a", name: "python", arguments: JSON.stringify({ code: "a = 1" }) },
    { id: "call_b", name: "python", arguments: JSON.stringify({ code: "b = 2" }) },
  ]);
});

Deno.test("`streamChat()` assembles calls by id when fragments carry no index, and never merges two ids", async () => {
  const chunk = (delta: object, finish: string | null = null) =>
    `data: ${JSON.stringify({ choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
  const part = (fields: object) => chunk({ tool_calls: [fields] });
  const body = part({ id: "call_1", function: { name: "python", arguments: '{"code":' } }) +
    part({ function: { arguments: ' "x = 1"}' } }) + // no id, no index: the call being written
    part({ id: "call_2", function: { name: "python", arguments: '{"code": "y"}' } }) +
    part({ id: "call_1", function: { arguments: "" } }) + // an id seen before: the same call
    // An index first, its id later: one call.
    part({ index: 5, function: { name: "python", arguments: '{"code": ' } }) +
    part({ index: 5, id: "call_3", function: { arguments: '"z"}' } }) +
    chunk({}, "tool_calls") + "data: [DONE]\n\n";
  const { turn } = await ask({}, { raw: { body } });
  assert.deepEqual(turn?.toolCalls.map((c) => [c.id, c.arguments]), [
    ["call_3", '{"code": "z"}'],
    ["call_1", '{"code": "x = 1"}'],
    ["call_2", '{"code": "y"}'],
  ]);
});

Deno.test("`streamChat()` says when the token limit cut a tool call, and keeps its arguments as received", async () => {
  const { turn } = await ask({}, {
    toolCall: { id: "call_cut", name: "python", arguments: '{"code": "for i in range(10' },
    finishReason: "length",
  });
  assert.equal(turn?.finishReason, "length");
  assert.equal(turn?.cutInToolCall, true);
  assert.equal(turn?.toolCalls[0].arguments, '{"code": "for i in range(10');
  // A length stop in plain text is no cut call.
  const { turn: text } = await ask({}, { text: "a long answer", finishReason: "length" });
  assert.equal(text?.cutInToolCall, false);
});

Deno.test("`streamChat()` says a tool call was cut when Mistral stops at the model's context, `model_length`", async () => {
  // Mistral's API documents `model_length` beside `length` among a completion's finish reasons
  // (its OpenAPI spec's `ChatCompletionChoice.finish_reason`; the generated mistral-openapi-client
  // and AutoGen.Mistral `FinishReasonEnum` list it): the model's context ended the reply.
  const { turn } = await ask({}, {
    toolCall: { id: "call_cut", name: "python", arguments: '{"code": "for i in range(10' },
    finishReason: "model_length",
  }, { fields: "stream #false" });
  assert.equal(turn?.finishReason, "model_length");
  assert.equal(turn?.cutInToolCall, true);
  assert.equal(turn?.toolCalls[0].arguments, '{"code": "for i in range(10');
});

Deno.test("`streamChat()` streams tool-call argument text as deltas: progress while a long cell arrives", async () => {
  const { deltas } = await ask({}, { toolCall: { code: "x = 1\n".repeat(20) } });
  const args = deltas.filter((d) => d.type === "tool_call");
  assert.ok(args.length > 5);
  assert.equal(args.map((d) => d.text).join(""), JSON.stringify({ code: "x = 1\n".repeat(20) }));
});

// ---- how the reply ends ----

Deno.test("`streamChat()` takes `[DONE]` without a finish reason as a normal end, the reason inferred", async () => {
  const { turn } = await ask({ quirks: { noFinishReason: true } }, { text: "all of it" });
  assert.equal(turn?.text, "all of it");
  assert.equal(turn?.finishReason, "stop");
  assert.equal(turn?.finishInferred, true);
  const { turn: calls } = await ask({ quirks: { noFinishReason: true } }, {
    toolCall: { code: "wait()" },
  });
  assert.equal(calls?.finishReason, "tool_calls");
  assert.equal(calls?.finishInferred, true);
  assert.equal(calls?.toolCalls.length, 1);
  // A finish reason the server sent is not inferred.
  const { turn: sent } = await ask({}, { text: "x" });
  assert.equal(sent?.finishInferred, false);
});

Deno.test("`streamChat()` reads a JSON completion answered to `stream: true` as the reply", async () => {
  const { turn, deltas, fake } = await ask({ quirks: { jsonToStream: true } }, {
    reasoning: "hmm",
    text: "whole",
    toolCall: { id: "call_j", code: "wait()" },
    usage: "openai",
  });
  assert.equal(fake.requests[0].body.stream, true);
  assert.equal(turn?.text, "whole");
  assert.deepEqual(turn?.reasoning, { field: "reasoning_content", text: "hmm" });
  assert.deepEqual(turn?.toolCalls, [
    { id: "call_j", name: "python", arguments: JSON.stringify({ code: "wait()" }) },
  ]);
  assert.equal(turn?.finishReason, "tool_calls");
  assert.equal(turn?.usage.promptTokens, 1200);
  assert.deepEqual(deltas.map((d) => d.type), ["text", "reasoning", "tool_call"]);
});

Deno.test("`streamChat()` reads JSON with a stray `data: [DONE]` and labelled as an event stream", async () => {
  const completion = {
    choices: [{ index: 0, message: { role: "assistant", content: "ok" }, finish_reason: "stop" }],
  };
  const body = `${JSON.stringify(completion)}\n\ndata: [DONE]\n\n`;
  const { turn } = await ask({}, { raw: { body, contentType: "text/event-stream" } });
  assert.equal(turn?.text, "ok");
  assert.equal(turn?.finishReason, "stop");
});

Deno.test("`streamChat()` reads an event stream with CRLF line ends and comments", async () => {
  const chunk = (delta: object, finish: string | null = null) =>
    `data: ${JSON.stringify({ choices: [{ index: 0, delta, finish_reason: finish }] })}\r\n\r\n`;
  const body = ": OPENROUTER PROCESSING\r\n\r\n" + chunk({ content: "a" }) +
    chunk({ content: "b" }, "stop") + "data: [DONE]\r\n\r\n";
  const { turn } = await ask({}, { raw: { body } });
  assert.equal(turn?.text, "ab");
});

Deno.test("`streamChat()` fails on llama-server's `error:` line and never takes the `[DONE]` after it as a reply", async () => {
  // llama-server reports a failure after the stream began as an `error:` line, a field the
  // event-stream format does not define, and then still ends with `data: [DONE]`
  // (`server_sent_event(sink, "error", error_data)` in its server.cpp); e.g. a reply its chat
  // parser cannot read.
  const chunk = (delta: object) =>
    `data: ${JSON.stringify({ choices: [{ index: 0, delta, finish_reason: null }] })}\n\n`;
  const error = { code: 500, message: "Failed to parse input at pos 7", type: "server_error" };
  const body = chunk({ content: "I will " }) + `error: ${JSON.stringify(error)}\n\n` +
    "data: [DONE]\n\n";
  const { turn, failure, error: thrown } = await ask({}, { raw: { body } });
  assert.equal(turn, undefined);
  assert.equal(failure?.reason, "stream_error");
  assert.equal(failure?.retriable, true);
  assert.equal(failure?.serverMessage, "Failed to parse input at pos 7");
  assert.equal(failure?.partial?.text, "I will ");
  assert.equal(failure?.partial?.textPartial, true);
  assert.equal(
    thrown?.message,
    'cannot stream from llm "main": the provider sent an error inside the stream (got "Failed to parse input at pos 7")',
  );
});

Deno.test("llama-server's `error:` line with a 400 is read as that answer: a request past its context is a context refusal, not retried", async () => {
  // Before ggml-org/llama.cpp#16486 a streamed request found past the context (`-c`) was
  // refused after the 200 and its headers, on the `error:` line: `{code: 400, message, type:
  // "exceed_context_size_error"}`. Retrying it changes nothing; moving to a smaller context does.
  const error = {
    code: 400,
    message: "the request exceeds the available context size, try increasing it",
    type: "exceed_context_size_error",
  };
  const body = `error: ${JSON.stringify(error)}\n\ndata: [DONE]\n\n`;
  const { failure, error: thrown } = await ask({}, { raw: { body } });
  assert.equal(failure?.reason, "stream_error");
  assert.equal(failure?.refusal, "context");
  assert.equal(failure?.retriable, false);
  assert.deepEqual(modelFailureFacts(thrown), { retriable: false, refusal: "context" });
  assert.equal(
    thrown?.message,
    'cannot stream from llm "main": the provider sent an error inside the stream (got "the request exceeds the available context size, try increasing it"); the request is larger than the server\'s context: set context_tokens of llm "main" to what the server holds, or start the server with a larger context (llama-server -c, vLLM --max-model-len), then restart klbr',
  );
  // With the size beside its words (`n_ctx`, since ggml-org/llama.cpp#15780), the size is read.
  const sized = `error: ${JSON.stringify({ ...error, n_prompt_tokens: 5000, n_ctx: 4096 })}\n\n` +
    "data: [DONE]\n\n";
  const { failure: stated } = await ask({}, { raw: { body: sized } });
  assert.equal(stated?.serverContext, 4096);
  // An error the server words as its own failure (5xx) stays retriable.
  const crashed = `error: ${JSON.stringify({ code: 503, message: "Loading model" })}\n\n`;
  const { failure: busy } = await ask({}, { raw: { body: crashed } });
  assert.equal(busy?.refusal, null);
  assert.equal(busy?.retriable, true);
});

Deno.test("`streamChat()` fails on a finish reason that says the reply failed: Mistral's `error`, vLLM's `abort`", async () => {
  // Mistral documents `error` among a stream's finish reasons; vLLM ends a request its engine
  // aborted (generation paused in "abort" mode) with `abort`. Neither is a finished reply: its
  // text is a prefix and its calls may be cut, so nothing of it may run.
  for (const finish of ["error", "abort"]) {
    const chunk = (delta: object, reason: string | null = null) =>
      `data: ${JSON.stringify({ choices: [{ index: 0, delta, finish_reason: reason }] })}\n\n`;
    const call = { index: 0, id: "call_1", function: { name: "python", arguments: '{"code": "x' } };
    const body = chunk({ content: "Let me " }) + chunk({ tool_calls: [call] }) +
      chunk({}, finish) + "data: [DONE]\n\n";
    const { turn, failure, error } = await ask({}, { raw: { body } });
    assert.equal(turn, undefined, `finish_reason ${finish} was taken as a reply`);
    assert.equal(failure?.reason, "stream_error");
    assert.equal(failure?.retriable, true);
    assert.equal(failure?.partial?.text, "Let me ");
    assert.deepEqual(failure?.partial?.toolCalls, []);
    assert.equal(
      error?.message,
      `cannot stream from llm "main": the provider ended the reply with finish_reason "${finish}" (got 7 characters of text, 1 unfinished tool call(s))`,
    );
  }
});

Deno.test("`streamChat()` fails on DeepSeek's `insufficient_system_resource`: the reply was interrupted, not finished", async () => {
  // DeepSeek documents `insufficient_system_resource` among its finish reasons: "the request is
  // interrupted due to insufficient resource of the inference system"
  // (api-docs.deepseek.com/api/create-chat-completion; the ds-api crate's `FinishReason` lists it
  // too: docs.rs/crate/ds-api, src/raw/response/non_streaming/finish_reason.rs). The text is a prefix and the last call may be cut: nothing of it may run,
  // and asking again can succeed once the server has room.
  const { turn, failure, error } = await ask({ profile: "deepseek" }, {
    reasoning: "First I",
    text: "Let me ",
    toolCall: { id: "call_1", name: "python", arguments: '{"code": "x' },
    finishReason: "insufficient_system_resource",
  });
  assert.equal(turn, undefined, "an interrupted reply was taken as a finished one");
  assert.equal(failure?.reason, "stream_error");
  assert.equal(failure?.retriable, true);
  assert.equal(failure?.partial?.text, "Let me ");
  assert.deepEqual(failure?.partial?.toolCalls, []);
  assert.equal(
    error?.message,
    'cannot stream from llm "main": the provider ended the reply with finish_reason "insufficient_system_resource" (got 7 characters of text, 7 of reasoning, 1 unfinished tool call(s))',
  );
});

Deno.test("`streamChat()` quotes a proxy's plain-text line in a stream that ends without a finish: a retriable cut", async () => {
  // A proxy may write its own words into the event stream without `data:` framing and then
  // end the body cleanly (lemonade-sdk/lemonade#2826: the backend's error forwarded "without SSE
  // framing", then closed without `[DONE]`). The format ignores such lines, so the reply is cut;
  // the owner still needs the proxy's words to know why.
  const chunk = (delta: object) =>
    `data: ${JSON.stringify({ choices: [{ index: 0, delta, finish_reason: null }] })}\n\n`;
  const said = "upstream timeout: the model server did not answer within 60 s";
  const { failure, error } = await ask({}, {
    raw: { body: chunk({ content: "Let me " }) + `${said}\n` },
  });
  assert.equal(failure?.reason, "cut");
  assert.equal(failure?.retriable, true);
  assert.equal(failure?.partial?.text, "Let me ");
  assert.equal(
    error?.message,
    `cannot stream from llm "main": the stream ended before the provider finished (got 7 characters of text; text outside any event: "${said}")`,
  );
  // Alone in the body, and long: its start is quoted, 200 characters at most.
  const long = `Bad gateway ${"x".repeat(300)}`;
  const { error: alone } = await ask({}, { raw: { body: `${long}\n\n` } });
  const start = `${long.slice(0, 200)}…`;
  assert.equal(
    alone?.message,
    `cannot stream from llm "main": the stream ended before the provider finished (got 0 characters of text; text outside any event: "${start}")`,
  );
});

Deno.test("a `stream #false` route asks for one completion, without stream_options, and reads it", async () => {
  const { turn, fake } = await ask({}, { text: "not streamed" }, { fields: "stream #false" });
  const body = fake.requests[0].body;
  assert.equal(body.stream, false);
  assert.equal("stream_options" in body, false);
  assert.equal(turn?.text, "not streamed");
  assert.equal(turn?.finishReason, "stop");
});

Deno.test("the route's switches shape the request: stream_usage, tool_choice, max_tokens, and no tools in text mode", async () => {
  const fields = 'stream_usage #false; tool_choice "required"; max_tokens 321';
  const { fake } = await ask({}, { text: "ok" }, { fields });
  const body = fake.requests[0].body;
  assert.equal(body.stream, true);
  assert.equal("stream_options" in body, false);
  assert.equal(body.tool_choice, "required");
  assert.equal(body.max_tokens, 321);
  assert.equal(body.tools.length, 1);
  const { fake: text } = await ask({}, { text: "ok" }, { fields, tools: false });
  assert.equal("tools" in text.requests[0].body, false);
  assert.equal("tool_choice" in text.requests[0].body, false);
});

Deno.test("`streamChat()` names a 200 HTML page as such, once, and never as a cut stream", async () => {
  const { error, failure, fake } = await ask({ quirks: { htmlPage: "NextChat" } }, {});
  assert.equal(failure?.reason, "not_api");
  assert.equal(failure?.retriable, false);
  assert.equal(
    error?.message,
    'cannot stream from llm "main": the server answered an HTML page: NextChat (got HTTP 200 text/html; charset=utf-8); check url of llm "main": it must be the OpenAI-compatible API (often ending in /v1)',
  );
  assert.equal(fake.requests.length, 1);
});

Deno.test("LM Studio's 200 \"Unexpected endpoint or method\" names the route's url, once, and is not retried", async () => {
  // LM Studio answers a path it does not serve with HTTP 200 and `{"error": "Unexpected endpoint
  // or method. (POST /chat/completions)"}` (lmstudio-ai/lmstudio-bug-tracker#618): a route whose
  // url lacks `/v1`. No retry reaches another path; the url is what to fix.
  const fake = startFakeOpenAI({ quirks: { unknownPathOk: true } });
  try {
    const origin = fake.url.replace(/\/v1$/, "");
    const provider = createProvider(route(origin), { apiKey: undefined });
    const error = await provider.streamChat({ messages: HELLO }).then(
      () => assert.fail("an error body was taken as a reply"),
      (error: KlbrError) => error,
    );
    assert.deepEqual(fake.requests.map((r) => r.path), ["/chat/completions"]);
    const failure = error.cause as ProviderFailure;
    assert.equal(failure.reason, "not_api");
    assert.equal(failure.retriable, false);
    assert.equal(
      error.message,
      'cannot stream from llm "main": the server answered an error for a path it does not serve: Unexpected endpoint or method. (POST /chat/completions) (got HTTP 200 application/json); check url of llm "main": it must be the OpenAI-compatible API (often ending in /v1)',
    );
  } finally {
    await fake.close();
  }
});

Deno.test("a proxy's 502 HTML page is named by its title, as the server's words", async () => {
  // nginx in front of a model server that is down answers its default error page (the body of
  // ngx_http_special_response.c); the SDK keeps only the text, so the provider keeps the body.
  const page = "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n" +
    "<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx/1.24.0</center>\r\n" +
    "</body>\r\n</html>\r\n";
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    () => new Response(page, { status: 502, headers: { "content-type": "text/html" } }),
  );
  try {
    const provider = createProvider(route(`http://127.0.0.1:${server.addr.port}/v1`), {
      apiKey: undefined,
    });
    const error = await provider.streamChat({ messages: HELLO }).catch((caught) => caught);
    const failure = error.cause as ProviderFailure;
    assert.equal(failure.status, 502);
    assert.equal(failure.serverMessage, "an HTML page: 502 Bad Gateway");
    assert.match(error.message, /an HTML page: 502 Bad Gateway/);
  } finally {
    await server.shutdown();
  }
});

// ---- the completion limit's field ----

Deno.test("OpenAI's reasoning models refuse max_tokens: the provider asks again at once with max_completion_tokens, and sends that from then on", async () => {
  const fake = startFakeOpenAI({
    profile: "openai",
    quirks: { maxCompletionTokensOnly: true },
    fallback: () => ({ text: "ok" }),
  });
  try {
    const provider = createProvider(route(fake.url, "max_tokens 300"), { apiKey: undefined });
    assert.equal((await provider.streamChat({ messages: HELLO })).text, "ok");
    assert.equal((await provider.streamChat({ messages: HELLO, maxTokens: 20 })).text, "ok");
    const limits = fake.requests.map((r) => [r.body.max_tokens, r.body.max_completion_tokens]);
    assert.deepEqual(limits, [[300, undefined], [undefined, 300], [undefined, 20]]);
    assert.deepEqual(fake.statuses, [400, 200, 200]);
  } finally {
    await fake.close();
  }
  // Any other server keeps max_tokens: its refusals of other fields change nothing.
  const other = await ask({ quirks: { context: { tokens: 10, words: "openai" } } }, { text: "x" }, {
    fields: "max_tokens 300",
  });
  assert.equal(other.failure?.refusal, "context");
  assert.deepEqual(other.fake.requests.map((r) => r.body.max_tokens), [300]);
});

Deno.test("vLLM's 'max_tokens' or 'max_completion_tokens' is too large is a context refusal, asked once, and max_tokens stays", async () => {
  // vLLM's words when the prompt fits but the prompt and `max_tokens` do not (`_validate_input`
  // in its serving code); both field names are in them, and neither is refused as a field.
  const words = "'max_tokens' or 'max_completion_tokens' is too large: 8000. This model's " +
    "maximum context length is 4096 tokens and your request has 2778 input tokens " +
    "(8000 > 4096 - 2778). None";
  const fake = startFakeOpenAI({
    profile: "vllm",
    // vLLM counts either field alike.
    fallback: (request) =>
      (request.body.max_tokens ?? request.body.max_completion_tokens) > 4096 - 2778
        ? { status: 400, message: words }
        : { text: "ok" },
  });
  try {
    const provider = createProvider(route(fake.url, "max_tokens 8000"), { apiKey: undefined });
    const error = await provider.streamChat({ messages: HELLO }).catch((caught) => caught);
    const failure = error.cause as ProviderFailure;
    assert.equal(failure.refusal, "context");
    assert.equal(failure.serverContext, 4096);
    assert.equal(fake.requests.length, 1, "the refused request was sent again");
    await provider.streamChat({ messages: HELLO, maxTokens: 1000 });
    const limits = fake.requests.map((r) => [r.body.max_tokens, r.body.max_completion_tokens]);
    assert.deepEqual(limits, [[8000, undefined], [1000, undefined]]);
  } finally {
    await fake.close();
  }
});

// ---- refusals: named, with their fix, and not retriable ----

Deno.test("a 429 in quota words without `insufficient_quota` (Gemini's per-minute quota) stays a rate limit, retried", async () => {
  const { failure } = await ask({}, {
    status: 429,
    message:
      "You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.",
  });
  assert.equal(failure?.refusal, null);
  assert.equal(failure?.retriable, true);
});

Deno.test("a 401 names the key variable and where to set it, and is not retriable", async () => {
  const { error, failure } = await ask(
    { profile: "openai", quirks: { apiKey: "sk-right" } },
    { text: "never" },
    { apiKey: "sk-wrong-1234", fields: 'api_key_env "KLBR_TEST_KEY"' },
  );
  assert.equal(error?.status, 401);
  assert.equal(failure?.refusal, "key");
  assert.equal(failure?.retriable, false);
  assert.match(
    error!.message,
    /^cannot stream from llm "main": provider answered HTTP 401 \(got "Incorrect API key provided: sk-\*\*\*1234/,
  );
  assert.match(
    error!.message,
    /; the server refused the key: set the environment variable KLBR_TEST_KEY \(api_key_env of llm "main"\) to a valid key where klbr starts \(its shell or service unit\), then restart klbr$/,
  );
  assert.deepEqual(modelFailureFacts(error), { retriable: false, refusal: "key" });
});

Deno.test("an unknown model is named with the models the server lists, for OpenAI, vLLM and Ollama", async () => {
  for (const profile of ["openai", "vllm", "ollama"] as const) {
    const fake = { profile, models: ["qwen3:8b", "llama3.1:8b"] };
    const { error, failure, fake: server } = await ask(fake, { text: "never" });
    assert.equal(error?.status, 404, profile);
    assert.equal(failure?.refusal, "model", profile);
    assert.equal(failure?.retriable, false, profile);
    assert.match(
      error!.message,
      /; the server does not serve model "fake-model": set model of llm "main" to one it lists \("qwen3:8b", "llama3\.1:8b"\)$/,
      profile,
    );
    // The list came from one GET /models, told apart as klbr's own; one chat request was made.
    assert.equal(server.requests.length, 1, profile);
    assert.deepEqual(server.probes.map((p) => p.headers["x-klbr-probe"]), ["models"], profile);
  }
});

Deno.test("tools refused is named as such, whatever the status: llama-server's 500 and Ollama's 400", async () => {
  for (const profile of ["llama.cpp-no-jinja", "ollama-no-tools"] as const) {
    const models = ["fake-model"];
    const { error, failure } = await ask({ profile, models }, { text: "never" });
    assert.equal(failure?.refusal, "tools", profile);
    assert.equal(failure?.retriable, false, profile);
    assert.match(
      error!.message,
      /the server refused the python tool: set tool_calls "text" on llm "main"/,
    );
  }
  // Without tools the same server answers.
  const { turn } = await ask({ profile: "llama.cpp-no-jinja" }, { text: "fine" }, { tools: false });
  assert.equal(turn?.text, "fine");
});

const BAD_HISTORY: ChatMessage[] = [
  { role: "user", content: "go" },
  {
    role: "assistant",
    content: null,
    tool_calls: [{
      id: "call_x",
      type: "function",
      function: { name: "python", arguments: '{"code": "x' },
    }],
  },
  { role: "tool", tool_call_id: "call_x", content: "[not run: invalid arguments]" },
  { role: "assistant", content: "ok" },
  { role: "user", content: "again" },
];

Deno.test("a history with tool-call arguments that are no JSON is refused by vLLM (400) and llama-server (500), never retried", async () => {
  for (const profile of ["vllm", "llama.cpp"] as const) {
    const { error, failure } = await ask({ profile }, { text: "never" }, { messages: BAD_HISTORY });
    assert.equal(error?.status, profile === "vllm" ? 400 : 500, profile);
    assert.equal(failure?.refusal, "arguments", profile);
    assert.equal(failure?.retriable, false, profile);
  }
});

Deno.test("a request past the server's context is named with the size the server stated, in OpenAI's, vLLM's and llama-server's words", async () => {
  const long: ChatMessage[] = [{ role: "user", content: "word ".repeat(3_000) }];
  for (const words of ["openai", "vllm", "llama.cpp"] as const) {
    const quirks = { context: { tokens: 4_096, words } };
    const { error, failure } = await ask({ quirks }, { text: "never" }, { messages: long });
    assert.equal(error?.status, 400, words);
    assert.equal(failure?.refusal, "context", words);
    assert.equal(failure?.retriable, false, words);
    assert.equal(modelFailureFacts(error).serverContext, 4_096, words);
    assert.match(
      error!.message,
      /; the request is larger than the server's context: set context_tokens of llm "main" to 4096 tokens or less, or start the server with a larger context \(llama-server -c, vLLM --max-model-len\), then restart klbr$/,
      words,
    );
    // A request within it is served.
    const { turn } = await ask({ quirks }, { text: "fits" });
    assert.equal(turn?.text, "fits", words);
  }
  // Ollama's refusal names no size: the fix says so.
  const message = "the input length exceeds the context length";
  const { error, failure } = await ask({}, { status: 400, message });
  assert.equal(failure?.refusal, "context");
  assert.equal(modelFailureFacts(error).serverContext, undefined);
  assert.match(error!.message, /set context_tokens of llm "main" to what the server holds,/);
});

Deno.test("DeepSeek's thinking mode refuses a tool call sent back without its reasoning_content", async () => {
  const history: ChatMessage[] = [
    { role: "user", content: "go" },
    {
      role: "assistant",
      content: null,
      tool_calls: [{ id: "c1", type: "function", function: { name: "python", arguments: "{}" } }],
    },
    { role: "tool", tool_call_id: "c1", content: "done" },
  ];
  const { error, failure } = await ask({ profile: "deepseek" }, { text: "never" }, {
    messages: history,
  });
  assert.equal(error?.status, 400);
  assert.equal(failure?.refusal, "reasoning");
  assert.match(
    error!.message,
    /; the server wants the model's reasoning sent back: set reasoning "echo" on llm "main"$/,
  );
  // With the reasoning sent back, the same history is served.
  const echoed = history.map((m) =>
    m.role === "assistant" ? { ...m, reasoning_content: "I will run it." } : m
  );
  const { turn } = await ask({ profile: "deepseek" }, { text: "fine" }, {
    messages: echoed as ChatMessage[],
  });
  assert.equal(turn?.text, "fine");
});

Deno.test("Mistral's role-order refusal is read from its top-level error body", async () => {
  const history: ChatMessage[] = [
    { role: "user", content: "go" },
    {
      role: "assistant",
      content: null,
      tool_calls: [{ id: "c1", type: "function", function: { name: "python", arguments: "{}" } }],
    },
    { role: "tool", tool_call_id: "c1", content: "done" },
    { role: "user", content: "next" },
  ];
  const { error, failure } = await ask({ profile: "mistral" }, { text: "never" }, {
    messages: history,
  });
  assert.equal(failure?.refusal, "role_order");
  assert.equal(failure?.serverMessage, "Unexpected role 'user' after role 'tool'");
  assert.match(
    error!.message,
    /HTTP 400 \(got "Unexpected role 'user' after role 'tool'"\); the server refused the order of the messages: set role_order "strict" on llm "main"$/,
  );
});

Deno.test("Mistral's 422 for a field it does not take names the field and its switch, from the validation list in its body", async () => {
  // Mistral validates the request body (pydantic, extra fields forbidden) and answers 422 with
  // the list of errors under `message` (`{"object": "error", "message": {"detail": [...]}}`):
  // `stream_options`, which a route sends by default, is refused so (avante-corp/avante.nvim#2347,
  // openai/openai-agents-python#442); newer answers carry the list as `message` and `detail`
  // (partITech/php-mistral#76). A field inside a message is the history's, not the request's.
  const bodies = [
    {
      object: "error",
      message: {
        detail: [{
          type: "extra_forbidden",
          loc: ["body", "stream_options", "include_usage"],
          msg: "Extra inputs are not permitted",
          input: true,
        }],
      },
      type: "invalid_request_error",
      param: null,
      code: null,
    },
    {
      object: "Error",
      detail: [{
        type: "extra_forbidden",
        loc: ["body", "stream_options", "include_usage"],
        msg: "Extra inputs are not permitted",
        input: true,
      }],
      message: [{
        type: "extra_forbidden",
        loc: ["body", "stream_options", "include_usage"],
        msg: "Extra inputs are not permitted",
        input: true,
      }],
      type: "invalid_request_error",
      code: 3001,
    },
    {
      object: "error",
      message: {
        detail: [{
          type: "extra_forbidden",
          loc: ["body", "messages", 0, "user", "name"],
          msg: "Extra inputs are not permitted",
          input: "",
        }],
      },
      type: "invalid_request_error",
      param: null,
      code: null,
    },
  ];
  const failures: [ProviderFailure, string][] = [];
  for (const body of bodies) {
    const server = Deno.serve(
      { hostname: "127.0.0.1", port: 0, onListen() {} },
      () => Response.json(body, { status: 422 }),
    );
    try {
      const provider = createProvider(route(`http://127.0.0.1:${server.addr.port}/v1`), {
        apiKey: undefined,
      });
      const error = await provider.streamChat({ messages: HELLO }).catch((caught) => caught);
      failures.push([error.cause as ProviderFailure, error.message]);
    } finally {
      await server.shutdown();
    }
  }
  for (const [failure, message] of failures.slice(0, 2)) {
    assert.equal(failure.refusal, "field");
    assert.equal(
      failure.serverMessage,
      "stream_options.include_usage: Extra inputs are not permitted",
    );
    assert.equal(
      message,
      'cannot stream from llm "main": provider answered HTTP 422 (got "stream_options.include_usage: Extra inputs are not permitted"); the server does not take the field stream_options: set stream_usage #false on llm "main", then restart klbr',
    );
  }
  const [inMessage] = failures[2];
  assert.equal(inMessage.serverMessage, "messages.0.user.name: Extra inputs are not permitted");
  assert.equal(inMessage.refusal, "request");
});

Deno.test("what a retry can change stays retriable: 429 with retry-after-ms, 503, 408", async () => {
  const limited = await ask({ quirks: { rateLimited: { requests: 1, retryAfterMs: 1500 } } }, {});
  assert.equal(limited.failure?.retriable, true);
  assert.equal(limited.failure?.retryAfterMs, 1500);
  assert.equal(limited.failure?.refusal, null);
  assert.deepEqual(modelFailureFacts(limited.error), { retriable: true, retryAfterMs: 1500 });
  for (const status of [503, 408, 500]) {
    const { failure } = await ask({}, { status, message: "busy" });
    assert.equal(failure?.retriable, true, String(status));
  }
  // Any other 4xx is a refusal, named by the server's field when it names one.
  const { failure, error } = await ask({}, { status: 422, message: "temperature too high" });
  assert.equal(failure?.refusal, "request");
  assert.equal(failure?.retriable, false);
  assert.match(error!.message, /; the server refused the request as sent$/);
});
