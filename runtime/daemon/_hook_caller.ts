/**
 * The session's hook caller and its process roles' boundary.
 *
 * Pinning: a turn's hook calls all name the release its frame recorded, passed with each
 * `hook` request, so an activation during the turn changes nothing in it; between turns the
 * caller uses the active release. Every call leaves a trace (hook, release, inputs, output,
 * duration, error), durable with the session's next commit rather than one of its own.
 * `model.plan` and `turn.next` are asked again within a turn only when their arguments change.
 *
 * Fingerprints: between frames the hook worker reports what is on disk now; a role whose
 * loaded interpreter or package differs is replaced there — the hook worker once it is idle,
 * the workbench by a new generation (its heap is lost: the code it ran is gone).
 *
 * @module
 */

import { deferTrace } from "../../store/behavior_diagnostics.ts";
import { appendEvent } from "../../store/events.ts";
import type { Store } from "../../store/store.ts";
import type { EventBus, Logger } from "../core/mod.ts";
import { checkHookResult, hookErrorOf, type HookResult } from "../behavior/mod.ts";
import {
  type GenerationRecord,
  type KernelSupervisor,
  replaceStaleRoles,
  roleLoadedBody,
} from "../kernel/mod.ts";
import type { HookCaller } from "../session/mod.ts";

/** A release a turn or the loop runs hooks from. */
export interface Pin {
  /** The frame whose turn is pinned; null between turns (the active release). */
  frameId: string | null;
  releaseId: string;
  path: string;
}

/** What the hook caller needs. */
export interface HookCallerDeps {
  store: Store;
  log: Logger;
  session: string;
  hooks: KernelSupervisor;
  /** Counts a failed call (for the last-good rule). */
  failed: () => void;
  /** Counts each call that reached the hook worker (for `status`). */
  called?: () => void;
  /** Notes a call running in the hook worker (for `/health`); returns what ends it. */
  running?: (hook: string) => () => void;
  /** The answers of {@linkcode MEMO_HOOKS} in this turn, by release, hook and arguments. */
  memo?: Map<string, unknown>;
}

/**
 * A hook caller for `pin`: every call runs from the pinned release and is traced.
 *
 * @example
 * ```ts
 * const caller = pinnedHookCaller(deps, { frameId, releaseId, path });
 * await caller.call("model.plan", { session: { id } }, { timeoutMs: 10_000 });
 * caller.lastTrace; // "tr_…"
 * ```
 */
export function pinnedHookCaller(deps: HookCallerDeps, pin: Pin): HookCaller {
  let lastTrace: string | null = null;
  return {
    revision: pin.releaseId,
    get lastTrace() {
      return lastTrace;
    },
    call: async (name, args, options) => {
      const key = MEMO_HOOKS.has(name) ? `${pin.releaseId}\0${name}\0${JSON.stringify(args)}` : "";
      if (key !== "" && deps.memo?.has(key)) return deps.memo.get(key) as HookResult<typeof name>;
      const started = performance.now();
      let output: unknown;
      let failure: unknown;
      deps.called?.();
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
          return args.messages as HookResult<typeof name>;
        }
        const result = checkHookResult(name, output);
        if (key !== "") deps.memo?.set(key, result);
        return result;
      } catch (error) {
        failure = error;
        deps.failed();
        throw error;
      } finally {
        ended?.();
        lastTrace = trace(deps, pin, {
          hook: name,
          inputs: args,
          output,
          error: failure === undefined ? null : hookErrorOf(failure),
          durationMs: performance.now() - started,
        });
      }
    },
  };
}

/**
 * The output a trace records for a `context.prepare` that returned the messages it was given,
 * unchanged (its inputs hold them).
 */
export const UNCHANGED = { unchanged: "the messages it was given" } as const;

/**
 * Hooks whose answer depends on their arguments only: within a turn, a call with the same
 * arguments (and release) reuses the answer instead of asking the hook worker again.
 */
const MEMO_HOOKS: ReadonlySet<string> = new Set(["model.plan", "turn.next"]);

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

function trace(
  deps: HookCallerDeps,
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

/** What the boundary check needs. */
export interface BoundaryDeps {
  log: Logger;
  kernel: KernelSupervisor;
  hooks: KernelSupervisor;
}

/**
 * Replaces each process role whose interpreter or package changed on disk: the hook worker
 * once it is idle, the workbench by a new generation. Call it only between frames.
 */
export async function replaceStale(deps: BoundaryDeps): Promise<void> {
  const replaced = await replaceStaleRoles(deps.hooks, [
    { role: "hooks", supervisor: deps.hooks, replace: "retire" },
    { role: "workbench", supervisor: deps.kernel, replace: "reset" },
  ]);
  for (const { role, change } of replaced) {
    deps.log.info("role.stale", `${role}: ${change}; replaced`, { role });
  }
}

/** Records a role's new process (`role.loaded`): what it loaded and was given. */
export function recordRoleLoaded(
  deps: { store: Store; bus: EventBus; session: string },
  record: GenerationRecord,
): void {
  appendEvent(deps.store, deps.session, "role.loaded", roleLoadedBody(record));
}
