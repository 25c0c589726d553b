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

/**
 * Runs a hook of the turn; on any failure records `hook.failed` and returns `fallback`, the
 * hook's documented safe default.
 */
export async function hookOr<N extends HookName>(
  deps: TurnHookDeps,
  session: string,
  name: N,
  args: Record<string, unknown>,
  fallback: HookResult<N>,
): Promise<HookResult<N>> {
  const hooks = deps.hooks();
  try {
    return await hooks.call(name, args, { timeoutMs: DEFAULT_HOOK_TIMEOUT_MS });
  } catch (error) {
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
export async function planRoute(deps: TurnHookDeps, session: string): Promise<string> {
  const plan = await hookOr(deps, session, "model.plan", { session: { id: session } }, {
    route: "main",
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
 * reminder it gives the model when it continues.
 */
export async function decideNext(
  deps: TurnHookDeps,
  session: string,
  context: TurnNextContext,
): Promise<HookResult<"turn.next">> {
  return await hookOr(deps, session, "turn.next", { session: { id: session }, ...context }, {
    action: "wait",
  });
}
