/**
 * One session's wiring: its workbench kernel, its hook worker, the hook caller both share a
 * release with, the model turn, and the session loop that runs it. Each session has exactly
 * one of each; the coordinator keeps them in its sessions map.
 *
 * @module
 */

import { currentGeneration, startGeneration } from "../../store/kernel_generations.ts";
import { markLastGood } from "../../store/releases.ts";
import { requireSession } from "../../store/sessions.ts";
import type { Store } from "../../store/store.ts";
import type { EventBus, Logger } from "../core/mod.ts";
import { type BehaviorState, checkHookResult } from "../behavior/mod.ts";
import { KernelSupervisor, type RpcHandler, type SkillRoots } from "../kernel/mod.ts";
import type { Provider } from "../model/mod.ts";
import type { Compaction } from "../../store/context_summaries.ts";
import { compactContext, type ContextBudget } from "../context/mod.ts";
import {
  contractMessage,
  createModelTurn,
  type HookCaller,
  SessionRuntime,
  type TurnContext,
  type TurnResult,
} from "../session/mod.ts";

/** What every session of the daemon is built from. */
export interface SessionDeps {
  store: Store;
  bus: EventBus;
  log: Logger;
  python: string;
  repoRoot: string;
  workspace: string;
  skillRoots: SkillRoots;
  provider: (route: string) => Provider;
  /** Each route's token budget (`context_tokens`, `compact_at`, `summary_share`). */
  contextBudget: (route: string) => ContextBudget;
  behavior: BehaviorState;
  /** How long one cell may run before it is ended `timed_out`. */
  cellTimeoutMs?: number;
  /** The agent's provider for a route, metered against the daemon's budgets. */
  meter?: (route: string, scope: () => { session: string; frameId: string | null }) => Provider;
  /** Waits for a process slot before each `workspace.run` of the session's cells. */
  runSlot?: (session: string) => (signal: AbortSignal) => Promise<() => void>;
  /** The artifacts directory's size limit, in bytes. */
  artifactBytes?: number;
}

/** One running session's parts. */
export interface SessionParts {
  runtime: SessionRuntime;
  kernel: KernelSupervisor;
  hooks: KernelSupervisor;
  /** The release the hooks come from; activation replaces it. */
  behavior: { releaseId: string; path: string };
  /** The frame whose turn is running, for routing sends and pinning the jobs it starts. */
  frame: { id: string; routing: unknown; policyRevision: string } | null;
  /** Hook calls that failed (or broke their contract) since the turn began. */
  hookFailures: number;
  /** The operator's `compact`: extractive (no model, no hook), keeping the newest 20 items. */
  compact: () => Promise<Compaction | undefined>;
}

/**
 * Builds one session's parts. `rpc` makes the host RPCs a cell of this session may call; it
 * is given the parts so handlers can read the running frame and the release.
 */
export function createSessionParts(
  deps: SessionDeps,
  session: string,
  rpc: (parts: SessionParts) => Record<string, RpcHandler>,
): SessionParts {
  const parts = {
    behavior: { releaseId: deps.behavior.releaseId, path: deps.behavior.path },
    frame: null,
    hookFailures: 0,
    compact: () => compactContext(deps, session, { keep: { items: 20 }, model: false }),
  } as SessionParts;
  // The workbench and the hook worker run the same package from the same release.
  const common = {
    python: deps.python,
    session,
    workspace: deps.workspace,
    repoRoot: deps.repoRoot,
    skillRoots: deps.skillRoots,
    behavior: () => ({ revision: parts.behavior.releaseId, path: parts.behavior.path }),
  };
  parts.kernel = new KernelSupervisor({
    ...common,
    firstGeneration: (currentGeneration(deps.store, session)?.generation ?? 0) + 1,
    recordGeneration: (record) => {
      startGeneration(deps.store, {
        session,
        reason: record.reason,
        skillsRevision: record.skillsRevision,
        behaviorRevision: record.behaviorRevision,
      });
      deps.bus.wake(session);
    },
    rpc: rpc(parts),
    runSlot: deps.runSlot?.(session),
  });
  parts.hooks = new KernelSupervisor({
    ...common,
    recordGeneration: (record) =>
      deps.log.info(
        "hooks.generation",
        `hook worker generation ${record.generation} (${record.reason})`,
        { generation: record.generation, reason: record.reason },
      ),
  });
  parts.runtime = new SessionRuntime({
    store: deps.store,
    bus: deps.bus,
    session,
    hooks: () => hookCaller(parts),
    log: deps.log,
    turn: modelTurnFor(deps, session, parts),
  });
  return parts;
}

/** The hook caller of the session's current release; a failing call is counted. */
function hookCaller(parts: SessionParts): HookCaller {
  return {
    revision: parts.behavior.releaseId,
    call: async (name, args, options) => {
      try {
        return checkHookResult(name, await parts.hooks.hook(name, args, options));
      } catch (error) {
        parts.hookFailures++;
        throw error;
      }
    },
  };
}

/**
 * The session's turn runner: the model turn, with the running frame exposed for routing and
 * the release marked last good when a whole turn ran with every hook answering.
 */
function modelTurnFor(
  deps: SessionDeps,
  session: string,
  parts: SessionParts,
): (ctx: TurnContext) => Promise<TurnResult> {
  const meter = deps.meter;
  const modelTurn = createModelTurn({
    store: deps.store,
    bus: deps.bus,
    provider: meter === undefined
      ? deps.provider
      : (route) => meter(route, () => ({ session, frameId: parts.frame?.id ?? null })),
    contextBudget: deps.contextBudget,
    hooks: () => hookCaller(parts),
    log: deps.log,
    system: () => contractMessage(deps.workspace),
    cellTimeoutMs: deps.cellTimeoutMs,
    artifactBytes: deps.artifactBytes,
    kernel: {
      generation: async () => {
        await parts.kernel.ready();
        return parts.kernel.generation;
      },
      execute: (cellId, code, options) => parts.kernel.execute(cellId, code, options),
    },
  });
  return async (ctx) => {
    parts.frame = {
      id: ctx.frame.id,
      routing: ctx.frame.routing,
      policyRevision: ctx.frame.policyRevision,
    };
    parts.hookFailures = 0;
    try {
      const result = await modelTurn(ctx);
      const row = requireSession(deps.store, session);
      if (
        result.ok && parts.hookFailures === 0 && row.activeRelease === ctx.frame.policyRevision &&
        row.lastGoodRelease !== row.activeRelease
      ) {
        markLastGood(deps.store, session, row.activeRelease);
        deps.bus.wake(session);
      }
      return result;
    } finally {
      parts.frame = null;
    }
  };
}
