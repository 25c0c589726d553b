/**
 * Hook invocation traces as the agent and the operator read them, and the one way a failed
 * hook call becomes a trace's `{code, message, traceback}`.
 *
 * @module
 */

import { type HookError, type HookTrace } from "../../store/tables/behavior_diagnostics.ts";
import { isKlbrError } from "../core/mod.ts";

/**
 * The error of a failed hook call as a trace keeps it: the stable code, the message, and the
 * hook's Python traceback when the worker sent one.
 *
 * @example
 * ```ts
 * hookErrorOf(new KlbrError("worker_timeout", "cannot run hook turn.next: no reply"));
 * // { code: "worker_timeout", message: "cannot run hook turn.next: no reply", traceback: null }
 * ```
 */
export function hookErrorOf(error: unknown): HookError {
  const cause = (error as { cause?: { traceback?: unknown } } | null)?.cause;
  return {
    code: isKlbrError(error) ? error.code : "contract",
    message: error instanceof Error ? error.message : String(error),
    traceback: typeof cause?.traceback === "string" ? cause.traceback : null,
  };
}

/**
 * A trace as JSON for `hooks.trace` and `klbr trace`.
 *
 * @example
 * ```ts
 * traceView(getTrace(store, id)!); // { id, hook, release_id, frame_id, origin, inputs, … }
 * ```
 */
export function traceView(trace: HookTrace): Record<string, unknown> {
  return {
    id: trace.id,
    hook: trace.hook,
    release_id: trace.releaseId,
    frame_id: trace.frameId,
    origin: trace.origin,
    inputs: trace.inputs,
    output: trace.output,
    error: trace.error,
    truncated: trace.truncated,
    duration_ms: trace.durationMs,
    at: trace.at,
  };
}
