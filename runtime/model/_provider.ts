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

import type { APIError, OpenAI } from "openai";
import { type Route, routeRequestFields } from "../config/mod.ts";
import { KlbrError } from "../core/mod.ts";
import { type ProviderTurn, TurnBuilder } from "./_provider_turn.ts";

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
      description: [
        "Run Python code in your persistent workbench. Top-level `await` works. Variables,",
        "imports and objects persist between calls: the heap survives until the kernel is reset.",
        "Your plain replies are a private scratchpad that nobody reads; `await local.send(text)`",
        "is the only way to speak to the person. Call `wait()` when you are done: it ends the",
        "cell and your turn, and you are woken by new input, a timer or a finished job.",
        "open_file, ls, search, delete and run act on the workspace in every cell.",
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
  /** `auto` when absent. */
  toolChoice?: "auto" | "required" | "none";
  /** The most completion tokens to ask for (`max_tokens`); the route's own setting when absent. */
  maxTokens?: number;
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

/** Why a stream failed. */
export type ProviderFailureReason =
  | "http"
  | "network"
  | "stream_error"
  | "cut"
  | "idle_timeout"
  | "timeout"
  | "aborted";

/** The `cause` of every `provider_failed` error: why, and what had arrived by then. */
export class ProviderFailure extends Error {
  /** The failure class callers branch on. */
  readonly reason: ProviderFailureReason;
  /** The provider's HTTP status, for `http`. */
  readonly status: number | undefined;
  /** How long the provider asked us to wait (`retry-after-ms` / `retry-after`), if it said. */
  readonly retryAfterMs: number | undefined;
  /** The turn so far once the stream had started: text marked partial and no tool calls. */
  readonly partial: ProviderTurn | undefined;

  /** Creates a failure record; `cause` is the underlying error, if any. */
  constructor(
    reason: ProviderFailureReason,
    details: { status?: number; retryAfterMs?: number; partial?: ProviderTurn; cause?: unknown },
  ) {
    super(reason, { cause: details.cause });
    this.name = "ProviderFailure";
    this.reason = reason;
    this.status = details.status;
    this.retryAfterMs = details.retryAfterMs;
    this.partial = details.partial;
  }
}

function retryAfterMs(headers: Headers | undefined): number | undefined {
  const ms = Number(headers?.get("retry-after-ms") ?? NaN);
  if (Number.isFinite(ms) && ms >= 0) return ms;
  const value = headers?.get("retry-after");
  if (value === null || value === undefined) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now());
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

function apiMessage(error: APIError): string {
  const body = error.error as { message?: unknown } | undefined;
  return typeof body?.message === "string" ? body.message : error.message;
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
  const where = `llm "${route.name}"`;

  return {
    route,
    async streamChat(request, { signal, onDelta } = {}) {
      const { APIConnectionTimeoutError, APIError, OpenAI } = await loadSdk();
      const body = {
        ...route.extra_options,
        model: route.model,
        messages: request.messages,
        stream: true,
        stream_options: { include_usage: true },
        tools: [PYTHON_TOOL],
        ...(request.toolChoice === undefined ? {} : { tool_choice: request.toolChoice }),
        ...(request.maxTokens === undefined ? {} : { max_tokens: request.maxTokens }),
        ...routeRequestFields(route),
      } as unknown as OpenAI.Chat.ChatCompletionCreateParamsStreaming;

      const idle = new AbortController();
      const deadline = new AbortController();
      const aborts = [idle.signal, deadline.signal, ...(signal ? [signal] : [])];
      let idleTimer = setTimeout(() => idle.abort(), route.idle_timeout_ms);
      const deadlineTimer = setTimeout(() => deadline.abort(), route.timeout_ms);
      const turn = new TurnBuilder();
      let started = false;
      let deltaError: { error: unknown } | undefined;

      const fail = (reason: ProviderFailureReason, got: string, cause?: unknown): never => {
        const status = reason === "http" && cause instanceof APIError ? cause.status : undefined;
        const failure = new ProviderFailure(reason, {
          status,
          retryAfterMs: cause instanceof APIError ? retryAfterMs(cause.headers) : undefined,
          partial: started ? turn.partial() : undefined,
          cause,
        });
        const what = {
          http: `provider answered HTTP ${status}`,
          network: "no response from the provider",
          stream_error: "the provider sent an error inside the stream",
          cut: "the stream ended before the provider finished",
          idle_timeout: `no data for ${route.idle_timeout_ms} ms`,
          timeout: `the call took longer than ${route.timeout_ms} ms`,
          aborted: "aborted by the caller",
        }[reason];
        throw new KlbrError(
          "provider_failed",
          `cannot stream from ${where}: ${what} (got ${got})`,
          {
            status,
            cause: failure,
          },
        );
      };
      const received = () => `${turn.partial().text.length} characters of text`;
      const stopped = (): ProviderFailureReason | undefined =>
        idle.signal.aborted
          ? "idle_timeout"
          : deadline.signal.aborted
          ? "timeout"
          : signal?.aborted
          ? "aborted"
          : undefined;

      try {
        const stream = await clientOf(OpenAI).chat.completions.create(body, {
          signal: AbortSignal.any(aborts),
        });
        started = true;
        for await (const chunk of stream) {
          clearTimeout(idleTimer);
          idleTimer = setTimeout(() => idle.abort(), route.idle_timeout_ms);
          const text = turn.add(chunk);
          if (text === "" || onDelta === undefined) continue;
          try {
            onDelta({ type: "text", text });
          } catch (error) {
            deltaError = { error };
            break;
          }
        }
      } catch (error) {
        const reason = stopped();
        if (reason !== undefined) fail(reason, received(), error);
        if (error instanceof APIConnectionTimeoutError) fail("timeout", received(), error);
        if (error instanceof APIError && error.status !== undefined) {
          fail("http", JSON.stringify(apiMessage(error)), error);
        }
        if (error instanceof APIError && started) {
          fail("stream_error", JSON.stringify(apiMessage(error)), error);
        }
        fail(started ? "cut" : "network", started ? received() : String(error), error);
      } finally {
        clearTimeout(idleTimer);
        clearTimeout(deadlineTimer);
      }
      if (deltaError !== undefined) throw deltaError.error;
      // The SDK ends iteration quietly on abort, so a stop is found here, not in `catch`.
      const reason = stopped();
      if (reason !== undefined) fail(reason, received());
      if (!turn.finished) fail("cut", received());
      return turn.complete();
    },
  };
}
