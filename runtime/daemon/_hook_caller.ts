/**
 * The session's hook caller and its process roles' boundary.
 *
 * Pinning: a turn's hook calls all name the release its frame recorded, passed with each
 * `hook` request, so an activation during the turn changes nothing in it; between turns the
 * caller uses the active release. Every call leaves a durable trace (hook, release, inputs,
 * output, duration, error).
 *
 * Fingerprints: between frames the hook worker reports what is on disk now; a role whose
 * loaded interpreter or package differs is replaced there — the hook worker once it is idle,
 * the workbench by a new generation (its heap is lost: the code it ran is gone).
 *
 * @module
 */

import { recordTrace } from "../../store/behavior_diagnostics.ts";
import { appendEvent } from "../../store/events.ts";
import type { Store } from "../../store/store.ts";
import type { EventBus, Logger } from "../core/mod.ts";
import { checkHookResult, hookErrorOf } from "../behavior/mod.ts";
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
      const started = performance.now();
      let output: unknown;
      let failure: unknown;
      try {
        output = await deps.hooks.hook(name, args, {
          ...options,
          behavior: { revision: pin.releaseId, path: pin.path },
        });
        return checkHookResult(name, output);
      } catch (error) {
        failure = error;
        deps.failed();
        throw error;
      } finally {
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
  try {
    return recordTrace(deps.store, {
      session: deps.session,
      frameId: pin.frameId,
      releaseId: pin.releaseId,
      origin: pin.frameId === null ? "attention" : "turn",
      ...call,
    });
  } catch (error) {
    // A trace that cannot be written must not change what the hook call did.
    deps.log.warn("hook.trace", `cannot record the trace of ${call.hook}: ${String(error)}`);
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
  deps.bus.wake(deps.session);
}
