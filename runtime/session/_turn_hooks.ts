/**
 * The hooks a turn calls (`model.plan`, `context.prepare`, `turn.next`), each with its
 * documented safe default: a failing hook is recorded as `hook.failed` and the turn goes on
 * with the default.
 *
 * @module
 */

import { appendEvent } from "../../store/tables/events.ts";
import type { Store } from "../../store/store.ts";
import { DEFAULT_HOOK_TIMEOUT_MS, type HookName, type Logger } from "../core/mod.ts";
import type { HookResult } from "../behavior/mod.ts";
import type { HookCaller } from "./_turn_types.ts";

/** What a turn's hook calls need. */
export interface TurnHookDeps {
  store: Store;
  hooks: () => HookCaller;
  log: Logger;
}

/** One hook call of a turn, with its safe default. */
export interface TurnHookCall<N extends HookName> {
  session: string;
  name: N;
  args: Record<string, unknown>;
  /** The hook's documented safe default. */
  fallback: HookResult<N>;
  /** The turn's signal: a stop cancels the call (the hook worker's cancellation ladder). */
  signal: AbortSignal;
}

/**
 * Runs a hook of the turn; on any failure records `hook.failed` and returns `fallback`, the
 * hook's documented safe default. A call the turn's stop cancelled is no hook failure: it
 * returns `fallback` unrecorded, and the turn ends at its next step as stopped.
 */
export async function hookOr<N extends HookName>(
  deps: TurnHookDeps,
  call: TurnHookCall<N>,
): Promise<HookResult<N>> {
  const { session, name, args, fallback, signal } = call;
  if (signal.aborted) return fallback;
  const hooks = deps.hooks();
  try {
    return await hooks.call(name, args, { timeoutMs: DEFAULT_HOOK_TIMEOUT_MS, signal });
  } catch (error) {
    if (signal.aborted) return fallback;
    const message = error instanceof Error ? error.message : String(error);
    deps.log.warn("hook.fallback", `hook ${name} failed, using the safe default: ${message}`, {
      hook: name,
    });
    appendEvent(deps.store, session, "hook.failed", {
      hook: name,
      revision: hooks.revision,
      error: message.slice(0, 2000),
      fallback: true,
      ...(hooks.lastTrace === null ? {} : { trace_id: hooks.lastTrace }),
    });
    return fallback;
  }
}

/** The route `model.plan` picks for the next request (`main` when it fails). */
export async function planRoute(
  deps: TurnHookDeps,
  session: string,
  options: { signal: AbortSignal },
): Promise<string> {
  const plan = await hookOr(deps, {
    session,
    name: "model.plan",
    args: { session: { id: session } },
    fallback: { route: "main" },
    signal: options.signal,
  });
  return plan.route;
}

/** What a turn tells `turn.next` about the reply without tool calls that just ended a step. */
export interface TurnNextContext {
  /** Whether the turn consumed an input from the local UI. */
  consumed_local: boolean;
  /** Whether the reply had text (scratchpad, which reaches nobody). */
  replied_with_text: boolean;
  /** How many `local.send`s the turn made so far. */
  sent: number;
  /** How many reminders `turn.next` gave in this turn so far. */
  reminders: number;
}

/**
 * What `turn.next` says after a reply without tool calls (`wait` when it fails), with the
 * reminder it gives the model when it continues; `signal` is the turn's.
 */
export async function decideNext(
  deps: TurnHookDeps,
  session: string,
  options: TurnNextContext & { signal: AbortSignal },
): Promise<HookResult<"turn.next">> {
  const { signal, ...context } = options;
  return await hookOr(deps, {
    session,
    name: "turn.next",
    args: { session: { id: session }, ...context },
    fallback: { action: "wait" },
    signal,
  });
}
