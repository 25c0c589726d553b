/**
 * How a provider call fails: the {@linkcode ProviderFailure} every `provider_failed` error
 * carries, the classification of what went wrong into one failure reason, whether a retry can
 * succeed, and — for a refusal — the message that names the cause and the fix.
 *
 * @module
 */

import type { APIError } from "openai";
import type { Route } from "../config/mod.ts";
import { KlbrError } from "../core/mod.ts";
import type { ProviderTurn, TurnBuilder } from "./_provider_turn.ts";
import { errorMessage, htmlTitle, ReplyError } from "./_reply_reader.ts";
import {
  type ProviderRefusal,
  refusalOf,
  refusalWords,
  RETRIABLE_STATUSES,
  statedContext,
  statedPrompt,
} from "./_refusal.ts";

export type { ProviderRefusal };

/** Why a call failed. */
export type ProviderFailureReason =
  | "http"
  | "network"
  | "stream_error"
  | "not_api"
  | "cut"
  | "idle_timeout"
  | "timeout"
  | "aborted";

/** The details a {@linkcode ProviderFailure} is made of. */
export interface ProviderFailureDetails {
  status?: number;
  retryAfterMs?: number;
  partial?: ProviderTurn;
  refusal?: ProviderRefusal | null;
  /** The server's own words, when it gave any. */
  serverMessage?: string;
  /** The context size, in tokens, a `context` refusal stated. */
  serverContext?: number;
  /** The refused request's size, in the server's tokens, a `context` refusal stated. */
  serverPrompt?: number;
  cause?: unknown;
}

/** The `cause` of every `provider_failed` error: why, what had arrived, and whether to retry. */
export class ProviderFailure extends Error {
  /** The failure class callers branch on. */
  readonly reason: ProviderFailureReason;
  /** The provider's HTTP status, for `http`. */
  readonly status: number | undefined;
  /** How long the provider asked us to wait (`retry-after-ms` / `retry-after`), if it said. */
  readonly retryAfterMs: number | undefined;
  /** The turn so far once the stream had started: text marked partial and no tool calls. */
  readonly partial: ProviderTurn | undefined;
  /** What the server refused, when it refused the request itself; null otherwise. */
  readonly refusal: ProviderRefusal | null;
  /** The server's own message, when it sent one. */
  readonly serverMessage: string | undefined;
  /** The context size, in tokens, a `context` refusal stated. */
  readonly serverContext: number | undefined;
  /** The refused request's size, in the server's tokens, a `context` refusal stated. */
  readonly serverPrompt: number | undefined;
  /**
   * Whether the same request can succeed later: a connection failure, a cut or silent stream,
   * 408, 409, 425, 429 and 5xx — never a refusal (400, 401, 403, 404, 422, a 500 that names a
   * refused part), an HTML page, or an abort.
   */
  readonly retriable: boolean;

  /** Creates a failure record; `cause` is the underlying error, if any. */
  constructor(reason: ProviderFailureReason, details: ProviderFailureDetails) {
    super(reason, { cause: details.cause });
    this.name = "ProviderFailure";
    this.reason = reason;
    this.status = details.status;
    this.retryAfterMs = details.retryAfterMs;
    this.partial = details.partial;
    this.refusal = details.refusal ?? null;
    this.serverMessage = details.serverMessage;
    this.serverContext = details.serverContext;
    this.serverPrompt = details.serverPrompt;
    this.retriable = isRetriable(reason, this.status, this.refusal);
  }
}

function isRetriable(
  reason: ProviderFailureReason,
  status: number | undefined,
  refusal: ProviderRefusal | null,
): boolean {
  if (refusal !== null || reason === "not_api" || reason === "aborted") return false;
  if (reason !== "http" || status === undefined) return true;
  return RETRIABLE_STATUSES.has(status) || status >= 500;
}

/**
 * What a turn's runner needs of a failed model call to schedule what comes next: whether a
 * retry can succeed, the wait the server asked for, and what it refused.
 *
 * @example
 * ```ts
 * const { retriable, retryAfterMs } = modelFailureFacts(error); // error from streamChat
 * ```
 */
export function modelFailureFacts(
  error: unknown,
): {
  retriable: boolean;
  retryAfterMs?: number;
  refusal?: ProviderRefusal;
  /** The context size, in tokens, the server stated when it refused a request past it. */
  serverContext?: number;
  /** The refused request's size, in the server's tokens, when its context refusal stated it. */
  serverPrompt?: number;
} {
  const failure = error instanceof Error && error.cause instanceof ProviderFailure
    ? error.cause
    : undefined;
  if (failure === undefined) return { retriable: true };
  return {
    retriable: failure.retriable,
    ...(failure.retryAfterMs === undefined ? {} : { retryAfterMs: failure.retryAfterMs }),
    ...(failure.refusal === null ? {} : { refusal: failure.refusal }),
    ...(failure.serverContext === undefined ? {} : { serverContext: failure.serverContext }),
    ...(failure.serverPrompt === undefined ? {} : { serverPrompt: failure.serverPrompt }),
  };
}

/** The wait a provider asked for, from `retry-after-ms` or `retry-after` (seconds or a date). */
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

/** One call in progress: its route, the SDK it uses and what has arrived. */
export interface CallState {
  route: Route;
  sdk: typeof import("openai");
  turn: TurnBuilder;
  /** Whether the provider answered and the stream began. */
  started: boolean;
  /** The body of an error answer, as the server sent it (the SDK keeps only part of it). */
  errorBody?: string;
  /** Lists the server's models, for a refused model name; absent in tests that need none. */
  listModels?: () => Promise<string[] | string>;
}

/** The server's words in an error answer: from its body as sent, else from the SDK's error. */
function serverWords(call: CallState, error: APIError): string {
  const body = call.errorBody;
  if (body !== undefined && body.trim() !== "") {
    if (body.trimStart().startsWith("<")) return `an HTML page: ${htmlTitle(body)}`;
    try {
      const message = errorMessage(JSON.parse(body));
      if (message !== undefined) return message;
    } catch { /* not JSON: the text itself */ }
    return body.trim().slice(0, 500);
  }
  const inner = error.error as { message?: unknown } | undefined;
  return typeof inner?.message === "string" ? inner.message : error.message;
}

/**
 * Classifies an error the SDK or the reader threw: a stop, a timeout, an HTTP answer, a body
 * that is no completion, a broken stream or none.
 */
export async function failFromError(
  call: CallState,
  stopped: ProviderFailureReason | undefined,
  error: unknown,
): Promise<never> {
  const { APIConnectionTimeoutError, APIError } = call.sdk;
  if (stopped !== undefined) failCall(call, stopped, { got: call.turn.received(), cause: error });
  if (error instanceof ReplyError) {
    const notApi = error.reason === "not_api";
    // An error in the body that states a status (llama-server's after its stream began) is
    // read as that answer would be: a refusal is named and not retried.
    const refused = error.status === undefined ? {} : await refusalFacts(call, {
      status: error.status,
      words: error.message,
      code: error.code,
      body: error.body,
    });
    failCall(call, error.reason, {
      what: notApi ? `the server answered ${error.message}` : undefined,
      got: notApi ? error.detail : JSON.stringify(error.message),
      serverMessage: error.message,
      ...refused,
      cause: error,
    });
  }
  if (error instanceof APIConnectionTimeoutError) {
    failCall(call, "timeout", { got: call.turn.received(), cause: error });
  }
  if (error instanceof APIError && error.status !== undefined) {
    const words = serverWords(call, error);
    failCall(call, "http", {
      got: JSON.stringify(words),
      serverMessage: words,
      // OpenAI's older answers put `insufficient_quota` in `type` with a null `code`.
      ...await refusalFacts(call, {
        status: error.status,
        words,
        code: error.code ?? error.type,
        param: error.param,
        body: call.errorBody,
      }),
      cause: error,
    });
  }
  if (error instanceof APIError && call.started) {
    failCall(call, "stream_error", { got: JSON.stringify(error.message), cause: error });
  }
  return failCall(call, call.started ? "cut" : "network", {
    got: call.started ? call.turn.received() : String(error),
    cause: error,
  });
}

/** What a server refused, in its answer's status, words and body: the refusal and its fix. */
async function refusalFacts(
  call: CallState,
  answer: { status: number; words: string; code?: unknown; param?: unknown; body?: string },
): Promise<Pick<FailureWords, "refusal" | "serverContext" | "serverPrompt" | "fix">> {
  const { status, words } = answer;
  const refusal = refusalOf(status, words, answer.code);
  const listed = refusal === "model" && call.listModels ? await call.listModels() : undefined;
  const stated = `${words}\n${answer.body ?? ""}`;
  const context = refusal === "context" ? statedContext(stated) : undefined;
  return {
    refusal,
    serverContext: context,
    serverPrompt: refusal === "context" ? statedPrompt(stated) : undefined,
    fix: refusal === null ? undefined : refusalWords(refusal, {
      route: call.route,
      status,
      message: words,
      param: answer.param,
      listed,
      context,
    }),
  };
}

/** What a failure message says beyond its reason. */
interface FailureWords {
  /** What happened, when the reason's own words say too little. */
  what?: string;
  /** The value after "got". */
  got: string;
  serverMessage?: string;
  serverContext?: number;
  serverPrompt?: number;
  refusal?: ProviderRefusal | null;
  /** The sentence naming the fix, after the message. */
  fix?: string;
  cause?: unknown;
}

/** Throws `provider_failed` for `reason`, its {@linkcode ProviderFailure} carrying the partial turn. */
export function failCall(
  call: CallState,
  reason: ProviderFailureReason,
  words: FailureWords,
): never {
  const { route, sdk: { APIError } } = call;
  const { cause } = words;
  const status = reason === "http" && cause instanceof APIError ? cause.status : undefined;
  const failure = new ProviderFailure(reason, {
    status,
    retryAfterMs: cause instanceof APIError ? retryAfterMs(cause.headers) : undefined,
    partial: call.started && reason !== "not_api" ? call.turn.partial() : undefined,
    refusal: words.refusal,
    serverMessage: words.serverMessage,
    serverContext: words.serverContext,
    serverPrompt: words.serverPrompt,
    cause,
  });
  const what = words.what ?? {
    http: `provider answered HTTP ${status}`,
    network: "no response from the provider",
    stream_error: "the provider sent an error inside the stream",
    not_api: "the server answered no chat completion",
    cut: "the stream ended before the provider finished",
    idle_timeout: `no data for ${route.idle_timeout_ms} ms`,
    timeout: `the call took longer than ${route.timeout_ms} ms`,
    aborted: "aborted by the caller",
  }[reason];
  const fix = words.fix ??
    (reason === "not_api"
      ? `; check url of llm "${route.name}": it must be the OpenAI-compatible API (often ending in /v1)`
      : "");
  throw new KlbrError(
    "provider_failed",
    `cannot stream from llm "${route.name}": ${what} (got ${words.got})${fix}`,
    { status, cause: failure },
  );
}
