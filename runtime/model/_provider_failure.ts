/**
 * How a provider call fails: the {@linkcode ProviderFailure} every `provider_failed` error
 * carries, and the classification of what the SDK threw into one failure reason.
 *
 * @module
 */

import type { APIError } from "openai";
import type { Route } from "../config/mod.ts";
import { KlbrError } from "../core/mod.ts";
import type { ProviderTurn, TurnBuilder } from "./_provider_turn.ts";

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

/** The provider's own error message when its body has one, else the SDK's. */
function apiMessage(error: APIError): string {
  const body = error.error as { message?: unknown } | undefined;
  return typeof body?.message === "string" ? body.message : error.message;
}

/** One call in progress: its route, the SDK it uses and what has arrived. */
export interface CallState {
  route: Route;
  sdk: typeof import("openai");
  turn: TurnBuilder;
  /** Whether the provider answered and the stream began. */
  started: boolean;
}

/** What a cut stream had delivered, for the failure message. */
export function received(turn: TurnBuilder): string {
  return `${turn.partial().text.length} characters of text`;
}

/** Classifies an error the SDK threw: a stop, a timeout, an HTTP answer, a broken stream or none. */
export function failFromError(
  call: CallState,
  stopped: ProviderFailureReason | undefined,
  error: unknown,
): never {
  const { APIConnectionTimeoutError, APIError } = call.sdk;
  if (stopped !== undefined) failCall(call, stopped, received(call.turn), error);
  if (error instanceof APIConnectionTimeoutError) {
    failCall(call, "timeout", received(call.turn), error);
  }
  if (error instanceof APIError && error.status !== undefined) {
    failCall(call, "http", JSON.stringify(apiMessage(error)), error);
  }
  if (error instanceof APIError && call.started) {
    failCall(call, "stream_error", JSON.stringify(apiMessage(error)), error);
  }
  return failCall(
    call,
    call.started ? "cut" : "network",
    call.started ? received(call.turn) : String(error),
    error,
  );
}

/** Throws `provider_failed` for `reason`, its {@linkcode ProviderFailure} carrying the partial turn. */
export function failCall(
  call: CallState,
  reason: ProviderFailureReason,
  got: string,
  cause?: unknown,
): never {
  const { route, sdk: { APIError } } = call;
  const status = reason === "http" && cause instanceof APIError ? cause.status : undefined;
  const failure = new ProviderFailure(reason, {
    status,
    retryAfterMs: cause instanceof APIError ? retryAfterMs(cause.headers) : undefined,
    partial: call.started ? call.turn.partial() : undefined,
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
    `cannot stream from llm "${route.name}": ${what} (got ${got})`,
    { status, cause: failure },
  );
}
