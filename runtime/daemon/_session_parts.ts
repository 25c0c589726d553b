/**
 * One session's wiring: its workbench kernel, its hook worker, the hook caller both share a
 * release with, the model turn, and the session loop that runs it. Each session has exactly
 * one of each; the coordinator keeps them in its sessions map.
 *
 * @module
 */

import { currentGeneration, startGeneration } from "../../store/kernel_generations.ts";
import { getRelease, markLastGood } from "../../store/releases.ts";
import { requireSession } from "../../store/sessions.ts";
import type { Store } from "../../store/store.ts";
import { DEFAULT_CELL_TIMEOUT_MS, type EventBus, type Logger } from "../core/mod.ts";
import type { BehaviorState } from "../behavior/mod.ts";
import {
  type BoundRpc,
  KernelSupervisor,
  loadSkills,
  type SkillChange,
  type SkillRoots,
} from "../kernel/mod.ts";
import type { SandboxBase } from "../sandbox/mod.ts";
import type { Provider } from "../model/mod.ts";
import type { Compaction } from "../../store/context_summaries.ts";
import { compactContext, type ContextBudget, repairContext } from "../context/mod.ts";
import {
  contractMessage,
  createModelTurn,
  type HookCaller,
  isMaintenanceInput,
  type ModelTurnOptions,
  type OfferedSkills,
  SessionRuntime,
  type TurnContext,
  type TurnHealth,
  type TurnResult,
} from "../session/mod.ts";
import { type Pin, pinnedHookCaller, recordRoleLoaded, replaceStale } from "./_hook_caller.ts";

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
  /** Called when a maintenance turn ended, to arm the next scheduled one. */
  afterMaintenanceTurn?: () => void;
  /** Where model calls and artifact writes are reported for `/health`. */
  health: TurnHealth;
  /** Notes a hook call running in the hook worker, for `/health`; returns what ends it. */
  hookRunning?: (hook: string) => () => void;
  /** How long an input may stay pending before it expires. */
  inputExpireMs: number;
  /** How long an input may wait before `status` and `/health` say so. */
  inputWaitWarnMs: number;
  /** The first retry's delay after a failed plan or model request. */
  retryBaseMs?: number;
  /** The configuration file, named by `model.failing` as the one to edit. */
  configPath?: string;
  /** Confines every worker and `workspace.run` program; undefined runs them unconfined. */
  sandbox?: SandboxBase;
  /** The state directory's real path: never part of a worker's workspace. */
  stateDir?: string;
  /** What of the workspace cells may not change; `code.patch` refuses it too. */
  protect?: string[];
  /** The programs `workspace.run` may start (`KLBR_RUN_PROGRAMS`); undefined means any. */
  runPrograms?: string[];
}

/** One running session's parts. */
export interface SessionParts {
  runtime: SessionRuntime;
  kernel: KernelSupervisor;
  hooks: KernelSupervisor;
  /** The active release: hooks between turns come from it; activation replaces it. */
  behavior: { releaseId: string; path: string };
  /**
   * The release the running turn is pinned to — the one its frame recorded — for every hook
   * call until the turn ends; null between turns.
   */
  pin: Pin | null;
  /** The frame whose turn is running, for routing sends and pinning the jobs it starts. */
  frame: { id: string; routing: unknown; policyRevision: string } | null;
  /** Hook calls that failed (or broke their contract) since the turn began. */
  hookFailures: number;
  /** Hook calls that reached the hook worker since the session started (for `status`). */
  hookCalls: number;
  /** The running turn's answers of hooks that depend on their arguments only. */
  memo: Map<string, unknown>;
  /** The operator's `compact`: extractive (no model, no hook), keeping the newest 20 items. */
  compact: () => Promise<Compaction | undefined>;
  /** The operator's `repair`: every item becomes an extractive summary (no model, no hook). */
  repair: (reason: string) => Promise<Compaction | undefined>;
  /** The skills the workbench's generation offers (the contract names them); null before a load. */
  skills: OfferedSkills | null;
  /** The last `skills.write`/`skills.delete` of a cell not yet offered; the boundary offers it. */
  skillsChanged: SkillChange | null;
  /** True while a maintenance turn runs (its contract message loads the `maintenance` skill). */
  maintenance: boolean;
  /** The cells of this session's turns that are running, each with what cancels it alone. */
  runningCells: Map<string, AbortController>;
}

/**
 * Builds one session's parts. `rpc` makes the host RPCs a cell of this session may call; it
 * is given the parts so handlers can read the running frame and the release.
 */
export function createSessionParts(
  deps: SessionDeps,
  session: string,
  rpc: (parts: SessionParts) => BoundRpc[],
): SessionParts {
  const parts = {
    behavior: { releaseId: deps.behavior.releaseId, path: deps.behavior.path },
    pin: null,
    frame: null,
    hookFailures: 0,
    hookCalls: 0,
    memo: new Map(),
    compact: () => compactContext(deps, session, { keep: { items: 20 }, model: false }),
    repair: (reason: string) => repairContext(deps, session, { by: "operator", reason }),
    skills: null,
    skillsChanged: null,
    maintenance: false,
    runningCells: new Map(),
  } as SessionParts;
  parts.kernel = workbenchSupervisor(deps, session, parts, rpc(parts));
  parts.hooks = hookSupervisor(deps, session, parts);
  parts.runtime = new SessionRuntime({
    store: deps.store,
    bus: deps.bus,
    session,
    hooks: () => hookCaller(deps, session, parts),
    log: deps.log,
    turn: modelTurnFor(deps, session, parts),
    boundary: async () => {
      await replaceStale({ log: deps.log, kernel: parts.kernel, hooks: parts.hooks });
      await offerChangedSkills(deps, parts);
    },
    inputExpireMs: deps.inputExpireMs,
    inputWaitWarnMs: deps.inputWaitWarnMs,
    retryBaseMs: deps.retryBaseMs,
    configPath: deps.configPath ?? null,
  });
  return parts;
}

/**
 * At a boundary between frames, after a cell wrote or deleted a managed skill: the workbench is
 * replaced by a new generation (its heap is lost, and the next request says so), which offers
 * the changed set. Nothing is replaced when no generation is live (the next one loads what is on
 * disk) or when the live one already offers that set.
 */
async function offerChangedSkills(deps: SessionDeps, parts: SessionParts): Promise<void> {
  const change = parts.skillsChanged;
  if (change === null) return;
  parts.skillsChanged = null;
  if (parts.kernel.current === null || parts.kernel.fingerprint?.skills === change.revision) return;
  const reason = `skills changed: ${change.action} ${change.id} (revision ${
    change.revision.slice(0, 12)
  })`;
  deps.log.info("skills.changed", `${reason}; the workbench starts a new generation`, {
    id: change.id,
    action: change.action,
  });
  await parts.kernel.reset(reason);
}

/**
 * What the workbench and the hook worker share: they run the same package, each given the
 * active release.
 */
function supervisorBase(deps: SessionDeps, session: string, parts: SessionParts) {
  return {
    python: deps.python,
    session,
    workspace: deps.workspace,
    repoRoot: deps.repoRoot,
    skillRoots: deps.skillRoots,
    behavior: () => ({ revision: parts.behavior.releaseId, path: parts.behavior.path }),
    sandbox: deps.sandbox,
    stateDir: deps.stateDir,
    runPrograms: deps.runPrograms,
    log: deps.log,
  };
}

/** The session's workbench: each generation recorded durably, its skills noted for the contract. */
function workbenchSupervisor(
  deps: SessionDeps,
  session: string,
  parts: SessionParts,
  rpc: BoundRpc[],
): KernelSupervisor {
  const records = { store: deps.store, bus: deps.bus, session };
  return new KernelSupervisor({
    ...supervisorBase(deps, session, parts),
    role: "workbench",
    firstGeneration: (currentGeneration(deps.store, session)?.generation ?? 0) + 1,
    onSkillsLoaded: (skills) => {
      parts.skills = { revision: skills.payload.revision, bodies: skills.payload.bodies };
    },
    recordGeneration: (record) => {
      startGeneration(deps.store, {
        session,
        reason: record.reason,
        skillsRevision: record.skillsRevision,
        behaviorRevision: record.behaviorRevision,
      });
      recordRoleLoaded(records, record);
    },
    rpc,
    runSlot: deps.runSlot?.(session),
  });
}

/** The session's hook worker: its generations are logged, not recorded as kernel generations. */
function hookSupervisor(deps: SessionDeps, session: string, parts: SessionParts): KernelSupervisor {
  const records = { store: deps.store, bus: deps.bus, session };
  return new KernelSupervisor({
    ...supervisorBase(deps, session, parts),
    role: "hooks",
    recordGeneration: (record) => {
      deps.log.info(
        "hooks.generation",
        `hook worker generation ${record.generation} (${record.reason})`,
        { generation: record.generation, reason: record.reason },
      );
      recordRoleLoaded(records, record);
    },
  });
}

/**
 * The hook caller of the running turn's pinned release, else of the active one; a failing
 * call is counted.
 */
function hookCaller(deps: SessionDeps, session: string, parts: SessionParts): HookCaller {
  const pin = parts.pin ?? { frameId: null, ...parts.behavior };
  return pinnedHookCaller({
    store: deps.store,
    log: deps.log,
    session,
    hooks: parts.hooks,
    failed: () => parts.hookFailures++,
    called: () => parts.hookCalls++,
    running: deps.hookRunning,
    memo: parts.pin === null ? undefined : parts.memo,
  }, pin);
}

/** The workbench as a turn uses it: each cell cancellable alone by the operator. */
function turnKernel(parts: SessionParts): ModelTurnOptions["kernel"] {
  return {
    generation: async () => {
      await parts.kernel.ready();
      return parts.kernel.generation;
    },
    execute: async (cellId, code, options) => {
      // The operator's `cancel_cell` ends this cell alone; the turn goes on and tells the
      // model the cell was cancelled.
      const own = new AbortController();
      parts.runningCells.set(cellId, own);
      try {
        const signal = AbortSignal.any([options.signal, own.signal]);
        return await parts.kernel.execute(cellId, code, { ...options, signal });
      } finally {
        parts.runningCells.delete(cellId);
      }
    },
  };
}

/** What a turn starts with: its frame exposed, its release pinned, its hook memo fresh. */
async function beginTurn(deps: SessionDeps, parts: SessionParts, ctx: TurnContext): Promise<void> {
  parts.frame = {
    id: ctx.frame.id,
    routing: ctx.frame.routing,
    policyRevision: ctx.frame.policyRevision,
  };
  parts.pin = pinOf(deps, parts, ctx.frame);
  parts.hookFailures = 0;
  parts.memo = new Map();
  parts.maintenance = ctx.inputs.some(isMaintenanceInput);
  // Before the workbench's first generation, name what its first load will offer.
  if (parts.kernel.current === null) {
    const skills = await loadSkills(deps.skillRoots).then((s) => s.payload, () => null);
    parts.skills = skills && { revision: skills.revision, bodies: skills.bodies };
  }
}

/** Pins the turn of `frame` to the release it recorded (the active one if that is gone). */
function pinOf(deps: SessionDeps, parts: SessionParts, frame: TurnContext["frame"]): Pin {
  const release = getRelease(deps.store, frame.policyRevision);
  if (release === undefined) {
    deps.log.warn(
      "frame.pin",
      `frame ${frame.number} names release ${
        frame.policyRevision.slice(0, 12)
      }, which is not published; its turn uses the active release`,
    );
    return { frameId: frame.id, ...parts.behavior };
  }
  return { frameId: frame.id, releaseId: release.id, path: release.path };
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
    hooks: () => hookCaller(deps, session, parts),
    log: deps.log,
    system: ({ maxSteps }) =>
      contractMessage(deps.workspace, {
        skills: parts.skills,
        maintenance: parts.maintenance,
        limits: { maxSteps, cellTimeoutMs: deps.cellTimeoutMs ?? DEFAULT_CELL_TIMEOUT_MS },
      }),
    cellTimeoutMs: deps.cellTimeoutMs,
    artifactBytes: deps.artifactBytes,
    health: deps.health,
    kernel: turnKernel(parts),
  });
  return async (ctx) => {
    await beginTurn(deps, parts, ctx);
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
      parts.pin = null;
      if (parts.maintenance) deps.afterMaintenanceTurn?.();
      parts.maintenance = false;
    }
  };
}
