/**
 * The OpenAI-compatible streaming provider: one route, one model-visible tool, one turn per call.
 *
 * A call streams `/chat/completions` and returns a complete {@linkcode ProviderTurn}, or
 * throws `provider_failed`. A stream that ends early (cut, idle, too slow, aborted) throws
 * too, and its {@linkcode ProviderFailure} carries the partial turn: text marked partial and
 * no tool calls, so nothing half-received can ever be executed.
 *
 * @module
 */

import type { OpenAI } from "openai";
import { type Route, routeRequestFields } from "../config/mod.ts";
import { type ProviderTurn, TurnBuilder } from "./_provider_turn.ts";
import {
  type CallState,
  failCall,
  failFromError,
  type ProviderFailureReason,
  received,
} from "./_provider_failure.ts";

export { ProviderFailure, type ProviderFailureReason } from "./_provider_failure.ts";

export {
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

/** One chat message, in the OpenAI chat-completions shape. */
export type ChatMessage = OpenAI.Chat.ChatCompletionMessageParam;

/** What to ask the model: the messages, and optionally how it must use the tool. */
export interface ChatRequest {
  /** The whole context, oldest first, as the model should read it. */
  messages: ChatMessage[];
  /** The route's `tool_choice` when absent; none is sent when neither says. */
  toolChoice?: "auto" | "required" | "none";
  /** The most completion tokens to ask for (`max_tokens`); the route's own setting when absent. */
  maxTokens?: number;
  /** `false` sends no `tools` (a route in text mode: cells come in fences). @default true */
  tools?: boolean;
}

/** A lossy animation event; the returned turn is the record. */
export type ProviderDelta = { type: "text"; text: string };

/** Options for {@linkcode Provider.streamChat}. */
export interface StreamChatOptions {
  /** Aborts the call; the failure reason is then `aborted`. */
  signal?: AbortSignal;
  /** Called with each text delta. It must not throw: an error it throws ends the stream and is rethrown as is. */
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
 * longest silence inside it.
 *
 * @example
 * ```ts
 * const provider = createProvider(config.routes.main, { apiKey: resolveApiKey(route, env) });
 * const turn = await provider.streamChat({ messages }, { onDelta: (d) => animate(d.text) });
 * ```
 */
export function createProvider(route: Route, options: CreateProviderOptions): Provider {
  let client: OpenAI | undefined;
  const clientOf = (SDK: typeof OpenAI) =>
    client ??= new SDK({
      baseURL: route.url,
      // The SDK refuses to start without a key; a keyless local route sends no header at all.
      apiKey: options.apiKey ?? "none",
      defaultHeaders: options.apiKey === undefined ? { Authorization: null } : undefined,
      organization: null,
      project: null,
      timeout: route.timeout_ms,
      maxRetries: 0,
      fetch: options.fetch,
    });

  return {
    route,
    async streamChat(request, { signal, onDelta } = {}) {
      const sdk = await loadSdk();
      const body = chatBody(route, request);
      const clock = new CallClock(route, signal);
      const call: CallState = { route, sdk, turn: new TurnBuilder(), started: false };
      let deltaError: { error: unknown } | undefined;
      try {
        const stream = await clientOf(sdk.OpenAI).chat.completions.create(body, {
          signal: clock.signal(),
        });
        call.started = true;
        deltaError = await pump(stream, call.turn, clock, onDelta);
      } catch (error) {
        failFromError(call, clock.stopped(), error);
      } finally {
        clock.clear();
      }
      if (deltaError !== undefined) throw deltaError.error;
      // The SDK ends iteration quietly on abort, so a stop is found here, not in `catch`.
      const reason = clock.stopped();
      if (reason !== undefined) failCall(call, reason, received(call.turn));
      if (!call.turn.finished) failCall(call, "cut", received(call.turn));
      return call.turn.complete();
    },
  };
}

/** The streaming chat-completions body of one request on `route`. */
function chatBody(
  route: Route,
  request: ChatRequest,
): OpenAI.Chat.ChatCompletionCreateParamsStreaming {
  const toolChoice = request.toolChoice ?? route.tool_choice;
  const maxTokens = request.maxTokens ?? route.max_tokens;
  return {
    ...route.extra_options,
    model: route.model,
    messages: request.messages,
    stream: true,
    ...(route.stream_usage ? { stream_options: { include_usage: true } } : {}),
    ...(request.tools === false ? {} : { tools: [PYTHON_TOOL] }),
    ...(toolChoice === undefined || request.tools === false ? {} : { tool_choice: toolChoice }),
    ...(maxTokens === undefined ? {} : { max_tokens: maxTokens }),
    ...routeRequestFields(route),
  } as unknown as OpenAI.Chat.ChatCompletionCreateParamsStreaming;
}

/** The idle and whole-call deadlines of one call, and which stop (theirs or the caller's) ended it. */
class CallClock {
  readonly #route: Route;
  readonly #caller: AbortSignal | undefined;
  readonly #idle = new AbortController();
  readonly #deadline = new AbortController();
  #idleTimer: ReturnType<typeof setTimeout>;
  readonly #deadlineTimer: ReturnType<typeof setTimeout>;

  constructor(route: Route, caller: AbortSignal | undefined) {
    this.#route = route;
    this.#caller = caller;
    this.#idleTimer = setTimeout(() => this.#idle.abort(), route.idle_timeout_ms);
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

  /** Data arrived: the idle deadline starts again. */
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

/**
 * Feeds every chunk to the turn and each text delta to `onDelta`; an error `onDelta` throws
 * ends the stream and is returned, to be rethrown as is.
 */
async function pump(
  stream: AsyncIterable<OpenAI.Chat.ChatCompletionChunk>,
  turn: TurnBuilder,
  clock: CallClock,
  onDelta: StreamChatOptions["onDelta"],
): Promise<{ error: unknown } | undefined> {
  for await (const chunk of stream) {
    clock.touch();
    const text = turn.add(chunk);
    if (text === "" || onDelta === undefined) continue;
    try {
      onDelta({ type: "text", text });
    } catch (error) {
      return { error };
    }
  }
  return undefined;
}
