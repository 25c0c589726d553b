/**
 * The OpenAI-compatible provider: one route, one model-visible tool, one turn per call.
 *
 * A call asks `/chat/completions` (streamed unless the route says `stream #false`) and returns a
 * complete {@linkcode ProviderTurn}, or throws `provider_failed`. The `openai` SDK sends the
 * request and classifies error answers; the body of a successful answer is read here
 * (`_reply_reader.ts`), since servers answer a stream with JSON, JSON with a stream, or an HTML
 * page, and the SDK can neither tell `[DONE]` from a cut nor read reasoning deltas. A reply that
 * ends early (cut, idle, too slow, aborted, or a finish reason that says it failed: `error`,
 * `abort`) throws too, and its {@linkcode ProviderFailure} carries the partial turn: text marked
 * partial and no tool calls, so nothing half-received can ever be executed.
 *
 * @module
 */

import type { OpenAI } from "openai";
import { type Route, routeRequestFields } from "../config/mod.ts";
import { type ProviderDelta, type ProviderTurn, TurnBuilder } from "./_provider_turn.ts";
import {
  type CallState,
  failCall,
  failFromError,
  ProviderFailure,
  type ProviderFailureReason,
} from "./_provider_failure.ts";
import { readReply } from "./_reply_reader.ts";
import { listModels } from "./_probe.ts";

export {
  modelFailureFacts,
  ProviderFailure,
  type ProviderFailureReason,
  type ProviderRefusal,
} from "./_provider_failure.ts";

export {
  type ProviderDelta,
  type ProviderReasoning,
  ProviderReasoningSchema,
  type ProviderToolCall,
  ProviderToolCallSchema,
  type ProviderTurn,
  ProviderTurnSchema,
  type ProviderUsage,
  ProviderUsageSchema,
} from "./_provider_turn.ts";

/** The one tool the model sees: a Python cell in the persistent workbench. */
export const PYTHON_TOOL = Object.freeze(
  {
    type: "function",
    function: Object.freeze({
      name: "python",
      // The same tool for the root agent and child agents: what a cell may reach and how work
      // ends is each one's contract message, not this description.
      description: [
        "Run one Python cell in your persistent workbench. Top-level `await` works; variables,",
        "imports and objects persist between calls. Your first message says what a cell can",
        "reach and how to finish.",
      ].join(" "),
      parameters: Object.freeze({
        type: "object",
        properties: Object.freeze({
          code: Object.freeze({ type: "string", description: "The Python source of one cell." }),
        }),
        required: Object.freeze(["code"]),
        additionalProperties: false,
      }),
    }),
  } as const,
);

/**
 * Whether `finishReason` says the provider's content filter stopped the reply: OpenAI's
 * `content_filter`, "content was omitted due to a flag from our content filters" (Azure OpenAI
 * ends a stream with it mid-reply). The reply is then not the model's whole answer, and its
 * calls may be cut.
 *
 * @example
 * ```ts
 * endedByFilter("content_filter"); // true
 * ```
 */
export function endedByFilter(finishReason: string | null | undefined): boolean {
  return finishReason === "content_filter";
}

/** One chat message, in the OpenAI chat-completions shape. */
export type ChatMessage = OpenAI.Chat.ChatCompletionMessageParam;

/** What to ask the model: the messages, and optionally how it must use the tool. */
export interface ChatRequest {
  /** The whole context, oldest first, as the model should read it. */
  messages: ChatMessage[];
  /**
   * Whether the python tool is sent as `tools` (native tool calls). `false` sends no `tools`
   * and no `tool_choice`: a route in text mode, where a cell is a fenced block. @default {true}
   */
  tools?: boolean;
  /** The most completion tokens to ask for (`max_tokens`); the route's own setting when absent. */
  maxTokens?: number;
}

/** Options for {@linkcode Provider.streamChat}. */
export interface StreamChatOptions {
  /** Aborts the call; the failure reason is then `aborted`. */
  signal?: AbortSignal;
  /**
   * Called with each delta: text, reasoning, and tool-call argument text (each counts as
   * progress). It must not throw: an error it throws ends the stream and is rethrown as is.
   */
  onDelta?: (delta: ProviderDelta) => void;
}

/** A model route ready to stream. */
export interface Provider {
  /** The route this provider calls. */
  readonly route: Route;
  /**
   * Streams one turn and returns it complete.
   *
   * @throws {KlbrError} `provider_failed` with the HTTP status when the provider answered
   * one, and a {@linkcode ProviderFailure} as `cause`.
   */
  streamChat(request: ChatRequest, options?: StreamChatOptions): Promise<ProviderTurn>;
}

/** Options for {@linkcode createProvider}. */
export interface CreateProviderOptions {
  /** The key from `resolveApiKey`; without one no `Authorization` header is sent. */
  apiKey: string | undefined;
  /** Replaces the global `fetch`, e.g. to observe requests. */
  fetch?: typeof fetch;
}

/**
 * The `openai` SDK, loaded by the first model call, not at start-up: it is the largest module
 * the daemon loads (about 0.1 s here), and `/health` needs none of it. The specifier is computed
 * so that Deno does not load it up front.
 */
let sdk: Promise<typeof import("openai")> | undefined;
const OPENAI = "openai";
function loadSdk(): Promise<typeof import("openai")> {
  sdk ??= import(OPENAI);
  return sdk;
}

/**
 * Creates a provider for one route with the `openai` SDK: no retries (the caller owns
 * retry policy), the route's `timeout_ms` for the whole call and `idle_timeout_ms` for the
 * longest silence inside it. A server that refuses `max_tokens` and names
 * `max_completion_tokens` instead (OpenAI's reasoning models) is asked again at once with that
 * field, and the provider sends it from then on.
 *
 * @example
 * ```ts
 * const provider = createProvider(config.routes.main, { apiKey: resolveApiKey(route, env) });
 * const turn = await provider.streamChat({ messages }, { onDelta: (d) => animate(d) });
 * ```
 */
export function createProvider(route: Route, options: CreateProviderOptions): Provider {
  const errorBodies = new ErrorBodies(options.fetch ?? fetch);
  let client: OpenAI | undefined;
  let limitField: LimitField = "max_tokens";
  const streamOnce: Provider["streamChat"] = async (request, { signal, onDelta } = {}) => {
    const sdk = await loadSdk();
    client ??= clientOf(sdk.OpenAI, route, { apiKey: options.apiKey, errorBodies });
    const clock = new CallClock(route, signal);
    const call: CallState = {
      route,
      sdk,
      turn: new TurnBuilder(),
      started: false,
      listModels: () => listModels(route.url, { apiKey: options.apiKey, fetch: options.fetch }),
    };
    let deltaError: { error: unknown } | undefined;
    let unframed: string | undefined;
    try {
      const response = await client.chat.completions
        .create(chatBody(route, { request, limitField }), { signal: clock.signal() }).asResponse();
      call.started = true;
      deltaError = await readReply(response, {
        turn: call.turn,
        touch: () => clock.touch(),
        onDelta,
        onUnframed: (text) => unframed = text,
      });
    } catch (error) {
      if (error instanceof sdk.APIError) call.errorBody = errorBodies.of(error.headers);
      await failFromError(call, clock.stopped(), error);
    } finally {
      clock.clear();
    }
    if (deltaError !== undefined) throw deltaError.error;
    const reason = clock.stopped();
    if (reason !== undefined) failCall(call, reason, { got: call.turn.received() });
    if (!call.turn.finished) {
      // A proxy's words written into the stream (a timeout, a gateway error) say why it ended.
      const said = unframed === undefined ? "" : `; text outside any event: "${unframed}"`;
      failCall(call, "cut", { got: `${call.turn.received()}${said}` });
    }
    const failed = call.turn.failedFinish;
    if (failed !== undefined) {
      failCall(call, "stream_error", {
        what: `the provider ended the reply with finish_reason "${failed}"`,
        got: call.turn.received(),
      });
    }
    return call.turn.complete();
  };
  return {
    route,
    async streamChat(request, options) {
      try {
        return await streamOnce(request, options);
      } catch (error) {
        if (limitField === "max_completion_tokens" || !namesCompletionLimit(error)) throw error;
        limitField = "max_completion_tokens";
        return await streamOnce(request, options);
      }
    },
  };
}

/** The field a request's completion limit is sent in. */
type LimitField = "max_tokens" | "max_completion_tokens";

/**
 * Whether a failed call is a server refusing `max_tokens` and naming `max_completion_tokens`
 * (OpenAI: 400 `unsupported_parameter`, "Unsupported parameter: 'max_tokens' is not supported
 * with this model. Use 'max_completion_tokens' instead."). vLLM names both in a request past its
 * context ("'max_tokens' or 'max_completion_tokens' is too large: …"), which either field meets.
 */
function namesCompletionLimit(error: unknown): boolean {
  const failure = error instanceof Error ? error.cause : undefined;
  return failure instanceof ProviderFailure && failure.status === 400 &&
    failure.refusal !== "context" &&
    /\bmax_tokens\b/.test(failure.serverMessage ?? "") &&
    /\bmax_completion_tokens\b/.test(failure.serverMessage ?? "");
}

/**
 * The `fetch` of a provider's SDK client, which keeps the body of each error answer as the
 * server sent it: the SDK reads only `{error: {message}}`, and Mistral, older vLLM and Ollama
 * put their words elsewhere. A body is found again by the answer's `Headers`, which the SDK's
 * `APIError` carries (`headers`), so calls in flight at once never see each other's.
 */
class ErrorBodies {
  readonly #fetch: typeof fetch;
  readonly #bodies = new WeakMap<Headers, string>();

  constructor(base: typeof fetch) {
    this.#fetch = base;
  }

  /** Fetches, and keeps the first 64 KiB of the body of an answer that is not ok. */
  async fetch(input: RequestInfo | URL, init?: RequestInit): Promise<Response> {
    const response = await this.#fetch(input, init);
    if (!response.ok) {
      const text = await response.clone().text().catch(() => "");
      this.#bodies.set(response.headers, text.slice(0, 64 * 1024));
    }
    return response;
  }

  /** The body kept for the answer of `headers`, if it was an error answer. */
  of(headers: Headers | undefined): string | undefined {
    return headers === undefined ? undefined : this.#bodies.get(headers);
  }
}

/**
 * The SDK client of one provider, made once: a client reads five environment variables when it
 * is made, and the daemon, which may read none, pays a refused permission for each.
 */
function clientOf(
  SDK: typeof OpenAI,
  route: Route,
  options: { apiKey: string | undefined; errorBodies: ErrorBodies },
): OpenAI {
  const { apiKey, errorBodies } = options;
  return new SDK({
    baseURL: route.url,
    // The SDK refuses to start without a key; a keyless local route sends no header at all.
    apiKey: apiKey ?? "none",
    defaultHeaders: apiKey === undefined ? { Authorization: null } : undefined,
    organization: null,
    project: null,
    timeout: route.timeout_ms,
    maxRetries: 0,
    fetch: errorBodies.fetch.bind(errorBodies),
  });
}

/** The chat-completions body of one request on `route`, its switches applied. */
function chatBody(
  route: Route,
  call: { request: ChatRequest; limitField: LimitField },
): OpenAI.Chat.ChatCompletionCreateParamsStreaming {
  const { request, limitField } = call;
  const tools = request.tools ?? true;
  const toolChoice = route.tool_choice;
  const maxTokens = request.maxTokens ?? route.max_tokens;
  return {
    ...route.extra_options,
    model: route.model,
    messages: request.messages,
    stream: route.stream,
    ...(route.stream && route.stream_usage ? { stream_options: { include_usage: true } } : {}),
    ...(tools ? { tools: [PYTHON_TOOL] } : {}),
    ...(tools && toolChoice !== undefined ? { tool_choice: toolChoice } : {}),
    ...(maxTokens === undefined ? {} : { [limitField]: maxTokens }),
    ...routeRequestFields(route),
  } as unknown as OpenAI.Chat.ChatCompletionCreateParamsStreaming;
}

/**
 * The idle and whole-call deadlines of one call, and which stop (theirs or the caller's) ended
 * it. The idle deadline starts at the first data: until then the server may be processing a
 * long prompt, silent for minutes (llama-server sends its first chunk only after the prompt,
 * ggml-org/llama.cpp#23884), and only the whole call's deadline bounds the wait.
 */
class CallClock {
  readonly #route: Route;
  readonly #caller: AbortSignal | undefined;
  readonly #idle = new AbortController();
  readonly #deadline = new AbortController();
  #idleTimer: ReturnType<typeof setTimeout> | undefined;
  readonly #deadlineTimer: ReturnType<typeof setTimeout>;

  constructor(route: Route, caller: AbortSignal | undefined) {
    this.#route = route;
    this.#caller = caller;
    this.#deadlineTimer = setTimeout(() => this.#deadline.abort(), route.timeout_ms);
  }

  /** Aborts on the first of the three stops. */
  signal(): AbortSignal {
    return AbortSignal.any([
      this.#idle.signal,
      this.#deadline.signal,
      ...(this.#caller ? [this.#caller] : []),
    ]);
  }

  /** Data arrived: the idle deadline starts (again). */
  touch(): void {
    clearTimeout(this.#idleTimer);
    this.#idleTimer = setTimeout(() => this.#idle.abort(), this.#route.idle_timeout_ms);
  }

  /** Which stop ended the call, if one did. */
  stopped(): ProviderFailureReason | undefined {
    return this.#idle.signal.aborted
      ? "idle_timeout"
      : this.#deadline.signal.aborted
      ? "timeout"
      : this.#caller?.aborted
      ? "aborted"
      : undefined;
  }

  /** Ends both deadlines. */
  clear(): void {
    clearTimeout(this.#idleTimer);
    clearTimeout(this.#deadlineTimer);
  }
}
