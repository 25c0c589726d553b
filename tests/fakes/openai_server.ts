/**
 * A scripted OpenAI-compatible server over real HTTP on 127.0.0.1, for tests.
 *
 * With `profile` (and/or `quirks`) it behaves like a named real server: llama.cpp, vLLM, Ollama,
 * DeepSeek, Mistral, OpenRouter, OpenAI — their refusals, their stream shapes, their reasoning
 * field. The profiles and quirks, each citing the documented behaviour it follows, are in
 * `model_quirks.ts`.
 *
 * Each `POST /v1/chat/completions` takes the next scripted response from a queue (or asks
 * the fallback responder when the queue is empty) and records the request, so a test can
 * assert exactly what was sent. `GET /v1/models` lists the configured models.
 *
 * With `countTokens` every response reports `prompt_tokens` as {@linkcode fakePromptTokens}
 * counts the request (a tokenizer unlike klbr's estimate, so calibration has work to do). With
 * `summarizer` it acts as the `long` route's model: a request whose system message starts with
 * `[klbr summarizer]` is answered by the summarizer instead of the queue — `"faithful"` writes
 * the summary the prompt asks for ({@linkcode faithfulSummary}); a function answers as it likes.
 *
 * @example
 * ```ts
 * const fake = startFakeOpenAI();
 * fake.enqueue({ text: "thinking…" }, { toolCall: { code: "await local.send('hi')" } });
 * // … point a route at fake.url, run, then:
 * assertEquals(fake.requests[0].body.tools[0].function.name, "python");
 * await fake.close();
 * ```
 *
 * @module
 */

import {
  type FakeProfile,
  fakePromptTokens,
  type FakeQuirks,
  filteredChunks,
  htmlPage,
  OPENROUTER_COMMENT,
  refuseKey,
  refuseRequest,
  resolveQuirks,
  unexpectedEndpoint,
} from "./model_quirks.ts";

export {
  FAKE_PROFILES,
  type FakeProfile,
  fakePromptTokens,
  type FakeQuirks,
} from "./model_quirks.ts";

/**
 * One scripted tool call; `code` is shorthand for the `python` tool with `{code}` arguments.
 * The id defaults to `call_fake_<index>`; an empty id makes the provider mint one.
 */
export type FakeToolCall =
  & { id?: string }
  & ({ code: string } | { name: string; arguments: string });

/** A usage shape: a named provider style, or the exact object to send. */
export type FakeUsage = "openai" | "deepseek" | "none" | Record<string, unknown>;

/** One scripted response to a chat-completions request. */
export interface FakeResponse {
  /** Assistant text, split into small chunks; an array gives the chunks exactly. */
  text?: string | string[];
  /** Reasoning, streamed before the text in the profile's reasoning field; an array gives the chunks. */
  reasoning?: string | string[];
  /** Tool calls whose arguments are split across many chunks, interleaved by index. */
  toolCall?: FakeToolCall | FakeToolCall[];
  /** The usage chunk sent after the finish chunk. Default `none`. */
  usage?: FakeUsage;
  /** Default `tool_calls` when there are tool calls, else `stop`. */
  finishReason?: string;
  /** Answer this HTTP status with an OpenAI-style error body instead of a stream. */
  status?: number;
  /** The error message for `status`, or the message of an in-stream error with `streamError`. */
  message?: string;
  /** Sent as the `retry-after` header (seconds) with `status`. */
  retryAfter?: number | string;
  /** After the first content chunk, send nothing more until the client goes away. */
  stall?: boolean;
  /**
   * Send the headers, then nothing for this long before the first chunk: llama-server
   * processing a long prompt (since ggml-org/llama.cpp#23884 it sends the headers when the slot
   * starts and the first chunk after the prompt is processed; before it, not even the headers).
   */
  prefillMs?: number;
  /** After the content chunks: `reset` breaks the connection, `close` ends the body cleanly; neither sends a finish reason. */
  cut?: "reset" | "close";
  /** After the content chunks, send `data: {"error": …}` and end. */
  streamError?: boolean;
  /**
   * The provider's content filter stops the reply ({@linkcode filteredChunks}): its last content
   * chunk is omitted and the finish chunk says `content_filter`.
   */
  filtered?: boolean;
  /** Send exactly this body (HTTP 200), e.g. a hand-written event stream. */
  raw?: { body: string; contentType?: string };
}

/** One request the fake received. */
export interface RecordedRequest {
  /** `GET` or `POST`. */
  method: string;
  /** The URL path, e.g. `/v1/chat/completions`. */
  path: string;
  /** Request headers with lower-case names. */
  headers: Record<string, string>;
  /** The parsed JSON body (`null` when empty), so tests can read `body.tools[0]` directly. */
  // deno-lint-ignore no-explicit-any
  body: any;
}

/** Options for {@linkcode startFakeOpenAI}. */
export interface FakeOpenAIOptions {
  /** Report `prompt_tokens` ({@linkcode fakePromptTokens}) in every response without a usage. */
  countTokens?: boolean;
  /** Answers summarizer requests (system message starting `[klbr summarizer]`). */
  summarizer?: "faithful" | ((request: RecordedRequest) => FakeResponse);
  /** Answers a chat request when the queue is empty; default: HTTP 500 "no scripted response". */
  fallback?: (request: RecordedRequest) => FakeResponse;
  /** Model ids `GET /v1/models` lists. Default `["fake-model", "fake"]` (the test daemon's model). */
  models?: string[];
  /** Behave like this server (`model_quirks.ts`). */
  profile?: FakeProfile;
  /** Quirks on top of the profile's (`model_quirks.ts`). */
  quirks?: FakeQuirks;
}

/** A running fake. */
export interface FakeOpenAI {
  /** The base URL, e.g. `http://127.0.0.1:41234/v1`. */
  url: string;
  /** Every request received, in order (chat and models), but klbr's probes. */
  requests: RecordedRequest[];
  /** When each of `requests` arrived (`Date.now()`), index for index. */
  arrivals: number[];
  /** What the fake answered each of `requests`: its HTTP status, index for index. */
  statuses: number[];
  /** klbr's reachability probes (`GET /v1/models` with the `x-klbr-probe` header), in order. */
  probes: RecordedRequest[];
  /** The quirks in force; a test may change them while the fake runs (credit added, say). */
  quirks: FakeQuirks;
  /** Appends scripted responses for the next chat requests. */
  enqueue(...responses: FakeResponse[]): void;
  /** Resolves once `count` requests have arrived; rejects after `timeoutMs` (default 10 s). */
  waitForRequests(count: number, timeoutMs?: number): Promise<RecordedRequest[]>;
  /** Ends stalled responses and stops the server. */
  close(): Promise<void>;
}

/** The usage objects the named shapes send. */
export const FAKE_USAGE = {
  openai: {
    prompt_tokens: 1200,
    completion_tokens: 34,
    total_tokens: 1234,
    prompt_tokens_details: { cached_tokens: 1024, cache_write_tokens: 176 },
  },
  deepseek: {
    prompt_tokens: 1200,
    completion_tokens: 34,
    total_tokens: 1234,
    prompt_cache_hit_tokens: 1024,
    prompt_cache_miss_tokens: 176,
  },
} as const;

const STALL_LIMIT_MS = 30_000;

/** The header klbr's reachability probe sends (`probeRoute` in runtime/model/_probe.ts). */
const PROBE_HEADER = "x-klbr-probe";

/** Whether a recorded chat request is a summarizer request. */
export function isSummarizerRequest(request: RecordedRequest): boolean {
  const first = request.body?.messages?.[0];
  return typeof first?.content === "string" && first.content.startsWith("[klbr summarizer]");
}

// deno-lint-ignore no-explicit-any
type Material = any;

/**
 * The summary a faithful model writes from summarizer material: the previous summary's
 * entries under the required headings, then the step's, every one named by its id, the oldest
 * dropped (sends of the step never) until it fits `max_chars`.
 */
export function faithfulSummary(material: Material): string {
  // The four headings, and the sends that did not reach the conversation after the sent ones.
  const headings: string[] = [...material.headings, material.unreached_heading];
  const sections: string[][] = headings.map(() => []);
  let current = -1;
  for (const line of String(material.previous_summary ?? "").split("\n")) {
    const at = headings.indexOf(line.trim());
    if (at >= 0) current = at;
    else if (line.trim() === "Notes:") current = -1;
    else if (current >= 0 && line.startsWith("- ") && line !== "- (none)") {
      sections[current].push(line);
    }
  }
  const items = material.new_items;
  // deno-lint-ignore no-explicit-any
  const add = (at: number, list: any[] = [], line: (e: any) => string) =>
    sections[at].push(...list.map(line));
  // deno-lint-ignore no-explicit-any
  const sent = (e: any) => `- to ${e.conversation}: ${e.text} (${e.state}) [${e.id}]`;
  add(0, items.inputs, (e) => `- ${e.text} [${e.id}] (${e.author} in ${e.conversation})`);
  add(1, items.sent.delivered, sent);
  for (const group of ["failed", "unknown", "pending"]) add(4, items.sent[group], sent);
  add(2, items.scratchpad, (e) => `- ${e.text} [${e.id}]`);
  add(
    3,
    items.cells,
    (e) => `- ${e.text} → ${e.outcome}${e.output ? `: ${e.output}` : ""} [${e.id}]`,
  );
  const required = new Set<string>(material.must_name_as_sent.map((m: { id: string }) => m.id));
  const keep = (line: string) => [...required].some((id) => line.includes(`[${id}]`));
  const block = (i: number) => [headings[i], ...(sections[i].length ? sections[i] : ["- (none)"])];
  const render = () =>
    [
      ...block(0),
      ...block(1),
      ...(sections[4].length ? [headings[4], ...sections[4]] : []),
      ...block(2),
      ...block(3),
    ].join("\n");
  let text = render();
  while (text.length > material.max_chars) {
    const lengths = sections.map((lines) => lines.filter((l) => !keep(l)).length);
    const at = lengths.indexOf(Math.max(...lengths));
    if (lengths[at] === 0) break;
    sections[at].splice(sections[at].findIndex((l) => !keep(l)), 1);
    text = render();
  }
  return text;
}

function pieces(text: string, size: number): string[] {
  const out: string[] = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out;
}

/** Builds the SSE data lines of one scripted stream, without the ending. */
function contentChunks(
  response: FakeResponse,
  model: string,
  quirks: FakeQuirks,
): Record<string, unknown>[] {
  const base = { id: "chatcmpl-fake", object: "chat.completion.chunk", created: 1, model };
  const chunk = (delta: Record<string, unknown>, finish: string | null = null) => ({
    ...base,
    choices: [{ index: 0, delta, finish_reason: finish }],
  });
  const out = [chunk({ role: "assistant", content: "" })];
  const field = quirks.reasoningField ?? "reasoning_content";
  const thoughts = typeof response.reasoning === "string"
    ? pieces(response.reasoning, 4)
    : response.reasoning ?? [];
  // Ollama sends `content: ""` beside each reasoning delta (dirac-run/dirac#227).
  for (const text of thoughts) out.push(chunk({ content: "", [field]: text }));
  const texts = typeof response.text === "string" ? pieces(response.text, 3) : response.text ?? [];
  for (const text of texts) out.push(chunk({ content: text }));
  const calls = response.toolCall === undefined ? [] : [response.toolCall].flat();
  const parts = calls.map((call, index) => {
    const name = "code" in call ? "python" : call.name;
    const args = "code" in call ? JSON.stringify({ code: call.code }) : call.arguments;
    return { index, id: call.id ?? `call_fake_${index}`, name, args: pieces(args, 5) };
  });
  if (quirks.toolCallIndexZero) {
    // Ollama streams each parallel call whole, every one at index 0, each with its own id
    // (ollama/ollama#15457).
    for (const p of parts) {
      out.push(chunk({
        tool_calls: [{
          index: 0,
          id: p.id,
          type: "function",
          function: { name: p.name, arguments: p.args.join("") },
        }],
      }));
    }
    return out;
  }
  for (const p of parts) {
    out.push(chunk({
      tool_calls: [{
        index: p.index,
        id: p.id,
        type: "function",
        function: { name: p.name, arguments: "" },
      }],
    }));
  }
  // Round-robin the argument pieces so calls interleave, as parallel tool calls do.
  const longest = Math.max(0, ...parts.map((p) => p.args.length));
  for (let i = 0; i < longest; i++) {
    for (const p of parts) {
      if (i < p.args.length) {
        out.push(chunk({ tool_calls: [{ index: p.index, function: { arguments: p.args[i] } }] }));
      }
    }
  }
  return out;
}

function finishChunks(
  response: FakeResponse,
  model: string,
  quirks: FakeQuirks,
): Record<string, unknown>[] {
  const base = { id: "chatcmpl-fake", object: "chat.completion.chunk", created: 1, model };
  const finish = response.filtered
    ? "content_filter"
    : response.finishReason ?? (response.toolCall === undefined ? "stop" : "tool_calls");
  // Some gateways end with `[DONE]` and no finish reason at all (anomalyco/opencode#43882).
  const out: Record<string, unknown>[] = quirks.noFinishReason ? [] : [{
    ...base,
    choices: [{ index: 0, delta: {}, finish_reason: finish }],
  }];
  const usage = response.usage ?? "none";
  if (usage !== "none") {
    out.push({
      ...base,
      choices: [],
      usage: typeof usage === "string" ? FAKE_USAGE[usage] : usage,
    });
  }
  return out;
}

/**
 * Starts the fake on 127.0.0.1 with an OS-chosen port.
 *
 * @example
 * ```ts
 * const fake = startFakeOpenAI({ fallback: () => ({ toolCall: { code: "wait()" } }) });
 * ```
 */
export function startFakeOpenAI(options: FakeOpenAIOptions = {}): FakeOpenAI {
  const queue: FakeResponse[] = [];
  const requests: RecordedRequest[] = [];
  const arrivals: number[] = [];
  const statuses: number[] = [];
  const quirks = resolveQuirks(options.profile, options.quirks);
  let chats = 0;
  const probes: RecordedRequest[] = [];
  const waiters = new Set<() => void>();
  const closing = new AbortController();
  const models = options.models ?? ["fake-model", "fake"];
  const fallback: (request: RecordedRequest) => FakeResponse = options.fallback ??
    (() => ({ status: 500, message: "fake: no scripted response left" }));

  // `completed` (the handler's info), not `request.signal`: touching the signal makes Deno
  // warn about its legacy abort-on-success behaviour, once per process that does.
  const sse = (response: FakeResponse, model: string, completed: Promise<void>) => {
    const encoder = new TextEncoder();
    const line = (data: unknown) =>
      encoder.encode(`data: ${typeof data === "string" ? data : JSON.stringify(data)}\n\n`);
    const all = contentChunks(response, model, quirks);
    const content = response.filtered ? filteredChunks(all) : all;
    // The script of the body: data to send, then how it ends.
    const steps: (Uint8Array | "stall" | "reset")[] = [];
    let prefillMs = response.prefillMs;
    if (quirks.keepAliveComments) steps.push(encoder.encode(OPENROUTER_COMMENT));
    if (response.stall) {
      steps.push(...content.slice(0, 2).map(line), "stall");
    } else {
      steps.push(...content.map(line));
      if (response.cut === "reset") steps.push("reset");
      else if (response.cut === "close") { /* end the body without a finish reason */ }
      else if (response.streamError) {
        steps.push(line({ error: { message: response.message ?? "fake stream error" } }));
      } else steps.push(...finishChunks(response, model, quirks).map(line), line("[DONE]"));
    }
    const cancelled = new AbortController();
    // Rejected when the response was not delivered: the client left.
    completed.catch(() => cancelled.abort());
    // highWaterMark 0: a step runs only when the server asks for the next piece, so every
    // chunk before a reset has been written to the socket when the reset happens.
    return new ReadableStream<Uint8Array>({
      cancel() {
        cancelled.abort();
      },
      async pull(controller) {
        if (prefillMs !== undefined) {
          await delay(prefillMs, AbortSignal.any([cancelled.signal, closing.signal]));
          prefillMs = undefined;
        }
        const step = steps.shift();
        if (step === undefined) return controller.close();
        if (step === "reset") return controller.error(new Error("fake: connection cut"));
        if (step !== "stall") return controller.enqueue(step);
        // Bounded: a stall ends when the client leaves, the fake closes, or at the limit.
        await delay(STALL_LIMIT_MS, AbortSignal.any([cancelled.signal, closing.signal]));
        try {
          controller.close();
        } catch { /* the client already cancelled the body */ }
      },
    }, { highWaterMark: 0 });
  };

  const nonStreaming = (response: FakeResponse, model: string) => {
    const calls = response.toolCall === undefined ? [] : [response.toolCall].flat();
    const text = [response.text ?? ""].flat().join("");
    const reasoning = [response.reasoning ?? ""].flat().join("");
    const usage = response.usage ?? "none";
    return {
      id: "chatcmpl-fake",
      object: "chat.completion",
      created: 1,
      model,
      choices: [{
        index: 0,
        finish_reason: quirks.noFinishReason
          ? null
          : response.filtered
          ? "content_filter"
          : response.finishReason ?? (calls.length > 0 ? "tool_calls" : "stop"),
        message: {
          role: "assistant",
          content: text === "" ? null : text,
          ...(reasoning === ""
            ? {}
            : { [quirks.reasoningField ?? "reasoning_content"]: reasoning }),
          tool_calls: calls.length === 0 ? undefined : calls.map((call, index) => ({
            id: call.id ?? `call_fake_${index}`,
            type: "function",
            function: "code" in call
              ? { name: "python", arguments: JSON.stringify({ code: call.code }) }
              : { name: call.name, arguments: call.arguments },
          })),
        },
      }],
      ...(usage === "none" ? {} : { usage: typeof usage === "string" ? FAKE_USAGE[usage] : usage }),
    };
  };

  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    async (req, info) => {
      const path = new URL(req.url).pathname;
      const text = await req.text();
      let body: unknown = null;
      try {
        body = text === "" ? null : JSON.parse(text);
      } catch {
        body = text;
      }
      const recorded: RecordedRequest = {
        method: req.method,
        path,
        headers: Object.fromEntries(req.headers),
        body,
      };
      // klbr's reachability probe (serve's start-up block, doctor) is no request a test scripted:
      // it is kept apart, so counts of `requests` stay what the test caused.
      const probe = req.headers.get(PROBE_HEADER) !== null;
      if (probe) probes.push(recorded);
      else {
        requests.push(recorded);
        arrivals.push(Date.now());
      }
      const answer = (response: Response) => {
        if (!probe) statuses[requests.indexOf(recorded)] = response.status;
        for (const wake of [...waiters]) wake();
        return response;
      };
      const keyRefused = refuseKey(quirks, recorded.headers);
      if (keyRefused !== undefined) {
        return answer(Response.json(keyRefused.body, { status: keyRefused.status }));
      }
      return answer(respond(recorded, probe, info.completed));
    },
  );

  /** The fake's answer to one request, after the key check. */
  const respond = (
    recorded: RecordedRequest,
    probe: boolean,
    completed: Promise<void>,
  ): Response => {
    const { method, path } = recorded;
    if (method === "GET" && path === "/v1/models") {
      return Response.json({
        object: "list",
        data: models.map((id) => ({ id, object: "model", created: 1, owned_by: "fake" })),
      });
    }
    if (method !== "POST" || path !== "/v1/chat/completions" || probe) {
      if (quirks.unknownPathOk) return unexpectedEndpoint(method, path);
      return Response.json({ error: { message: `fake: no route ${method} ${path}` } }, {
        status: 404,
      });
    }
    const before = chats++;
    const refused = refuseRequest(quirks, {
      body: recorded.body,
      headers: recorded.headers,
      models,
      before,
    });
    if (refused !== undefined) {
      return Response.json(refused.body, { status: refused.status, headers: refused.headers });
    }
    if (quirks.htmlPage !== undefined) return htmlPage(quirks.htmlPage);
    const summarizer = options.summarizer;
    let response: FakeResponse = summarizer !== undefined && isSummarizerRequest(recorded)
      ? (summarizer === "faithful"
        ? {
          text: faithfulSummary(JSON.parse(recorded.body.messages[1].content)),
          usage: {
            prompt_tokens: fakePromptTokens(recorded.body, quirks.tokenizer),
            completion_tokens: 50,
          },
        }
        : summarizer(recorded))
      : queue.shift() ?? fallback(recorded);
    if (options.countTokens && response.usage === undefined && response.status === undefined) {
      const counted = fakePromptTokens(recorded.body, quirks.tokenizer);
      const prompt = Math.min(counted, quirks.truncateAt ?? Infinity);
      response = { ...response, usage: { prompt_tokens: prompt, completion_tokens: 10 } };
    }
    if (response.status !== undefined) {
      const headers: Record<string, string> = {};
      if (response.retryAfter !== undefined) headers["retry-after"] = String(response.retryAfter);
      return Response.json({
        error: {
          message: response.message ?? `fake error ${response.status}`,
          type: "fake_error",
          code: null,
        },
      }, { status: response.status, headers });
    }
    if (response.raw !== undefined) {
      const type = response.raw.contentType ?? "text/event-stream";
      return new Response(response.raw.body, { headers: { "content-type": type } });
    }
    const model = typeof recorded.body?.model === "string" ? recorded.body.model : models[0];
    // A server that ignores `stream: true` answers one JSON completion
    // (BaseIntelligence/bounty-challenge#17821; tinyhumansai/tinyagents#56 reads it).
    if (recorded.body?.stream !== true || quirks.jsonToStream) {
      return Response.json(nonStreaming(response, model));
    }
    return new Response(sse(response, model, completed), {
      headers: { "content-type": "text/event-stream", "cache-control": "no-cache" },
    });
  };

  return {
    url: `http://127.0.0.1:${server.addr.port}/v1`,
    requests,
    arrivals,
    statuses,
    probes,
    quirks,
    enqueue(...responses) {
      queue.push(...responses);
    },
    waitForRequests(count, timeoutMs = 10_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          if (requests.length < count) return;
          waiters.delete(check);
          clearTimeout(timer);
          resolve(requests.slice(0, count));
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`fake: ${requests.length} of ${count} requests after ${timeoutMs} ms`));
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
    async close() {
      closing.abort();
      await server.shutdown();
    },
  };
}

/** Resolves after `ms`, or at once when `signal` aborts. */
function delay(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(timer);
      resolve();
    }, { once: true });
  });
}
