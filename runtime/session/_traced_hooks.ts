/**
 * `TracedHooks`: the session's hook caller, the wrapper around its hook-worker port.
 *
 * Pinning: a turn's hook calls all name the release its frame recorded, passed with each
 * `hook` request, so an activation during the turn changes nothing in it; between turns the
 * caller uses the active release. Every call leaves a trace (hook, release, inputs, output,
 * duration, error), durable with the session's next commit rather than one of its own.
 * Each call is counted, and each failure too (the last-good rule reads the count).
 *
 * @module
 */

import { deferTrace } from "../../store/tables/behavior_diagnostics.ts";
import type { Store } from "../../store/store.ts";
import type { HookName, Logger } from "../core/mod.ts";
import { checkHookResult, hookErrorOf, type HookResult } from "../behavior/mod.ts";
import type { HookWorkerPort } from "./_session_ports.ts";
import type { HookCaller } from "./_turn_types.ts";

/** A release a turn or the loop runs hooks from. */
export interface Pin {
  /** The frame whose turn is pinned; null between turns (the active release). */
  frameId: string | null;
  releaseId: string;
  path: string;
}

/** A session's hook calls so far: every call that reached the worker, and the failed ones. */
export interface HookCounters {
  /** Calls that reached the hook worker since the session started (for `status`). */
  calls: number;
  /** Calls that failed (or broke their contract) since the turn began (the last-good rule). */
  failures: number;
}

/** What {@linkcode TracedHooks} needs. */
export interface TracedHooksDeps {
  store: Store;
  log: Logger;
  session: string;
  hooks: HookWorkerPort;
  /** Counted on each call and each failure. */
  counters: HookCounters;
  /** Notes a call running in the hook worker (for `/health`); returns what ends it. */
  running?: (hook: string) => () => void;
}

/**
 * The hook caller for `pin`: every call runs from the pinned release, is counted and traced.
 *
 * @example
 * ```ts
 * const caller = new TracedHooks(deps, { frameId, releaseId, path });
 * await caller.call("model.plan", { session: { id } }, { timeoutMs: 10_000 });
 * caller.lastTrace; // "tr_…"
 * ```
 */
export class TracedHooks implements HookCaller {
  readonly #deps: TracedHooksDeps;
  readonly #pin: Pin;
  #lastTrace: string | null = null;

  /** A caller of `deps.hooks` pinned to `pin`. */
  constructor(deps: TracedHooksDeps, pin: Pin) {
    this.#deps = deps;
    this.#pin = pin;
  }

  get revision(): string {
    return this.#pin.releaseId;
  }

  get lastTrace(): string | null {
    return this.#lastTrace;
  }

  async call<N extends HookName>(
    name: N,
    args: Record<string, unknown>,
    options: { timeoutMs: number; signal?: AbortSignal },
  ): Promise<HookResult<N>> {
    const deps = this.#deps;
    const pin = this.#pin;
    const started = performance.now();
    let output: unknown;
    let failure: unknown;
    deps.counters.calls++;
    const ended = deps.running?.(name);
    try {
      output = await deps.hooks.hook(name, args, {
        ...options,
        behavior: { revision: pin.releaseId, path: pin.path },
      });
      // The messages context.prepare was given, handed back unchanged, are what the host
      // built: its own, already valid; nothing to check, and the trace says "unchanged"
      // instead of holding the request a second time.
      if (name === "context.prepare" && sameJson(output, args.messages)) {
        output = UNCHANGED;
        return args.messages as HookResult<N>;
      }
      return checkHookResult(name, output);
    } catch (error) {
      failure = error;
      deps.counters.failures++;
      throw error;
    } finally {
      ended?.();
      this.#lastTrace = trace(deps, pin, {
        hook: name,
        inputs: args,
        output,
        error: failure === undefined ? null : hookErrorOf(failure),
        durationMs: performance.now() - started,
      });
    }
  }
}

/**
 * The output a trace records for a `context.prepare` that returned the messages it was given,
 * unchanged (its inputs hold them).
 */
const UNCHANGED = { unchanged: "the messages it was given" } as const;

/** Whether two JSON values are equal, key order aside. */
function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    return a.every((item, i) => sameJson(item, b[i]));
  }
  if (Array.isArray(b)) return false;
  const keys = Object.keys(a);
  if (keys.length !== Object.keys(b).length) return false;
  return keys.every((k) =>
    Object.hasOwn(b, k) &&
    sameJson((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k])
  );
}

/** Records one call's trace, durable with the session's next commit. */
function trace(
  deps: TracedHooksDeps,
  pin: Pin,
  call: {
    hook: string;
    inputs: unknown;
    output: unknown;
    error: ReturnType<typeof hookErrorOf> | null;
    durationMs: number;
  },
): string | null {
  const warn = (error: unknown) =>
    deps.log.warn("hook.trace", `cannot record the trace of ${call.hook}: ${String(error)}`);
  try {
    // Durable with the session's next commit: the frame the plan made, the reply it shaped.
    return deferTrace(deps.store, {
      session: deps.session,
      frameId: pin.frameId,
      releaseId: pin.releaseId,
      origin: pin.frameId === null ? "attention" : "turn",
      ...call,
    }, warn);
  } catch (error) {
    // A trace that cannot be written must not change what the hook call did.
    warn(error);
    return null;
  }
}
