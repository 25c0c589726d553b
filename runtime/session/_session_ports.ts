/**
 * The ports of a {@linkcode Session}: what it is built from, and the two worker processes it
 * drives (the workbench and the hook worker), as interfaces. The daemon gives it kernel
 * supervisors; an in-process test gives it fakes of the same shape.
 *
 * @module
 */

import type { Store } from "../../store/store.ts";
import type { EventBus, HookName, Logger } from "../core/mod.ts";
import type { BehaviorState } from "../behavior/mod.ts";
import type { ContextBudget } from "../context/mod.ts";
import type { CellResult, ExecuteOptions, RoleFingerprint, SkillRoots } from "../kernel/mod.ts";
import type { Provider } from "../model/mod.ts";
import type { TurnHealth } from "./_turn_health.ts";
import type { SessionTimers } from "./_turn_types.ts";

/** The workbench as a session drives it; `KernelSupervisor` is one. */
export interface WorkbenchPort {
  /** The running generation (0 before the first). */
  readonly generation: number;
  /** The live process, or null when none runs. */
  readonly current: unknown | null;
  /** What the live process loaded; null when none runs. */
  readonly fingerprint: RoleFingerprint | null;
  /** Starts a generation when none runs. */
  ready(): Promise<unknown>;
  /** Runs one cell; resolves with its outcome, never rejects for what the cell did. */
  execute(cellId: string, code: string, options: ExecuteOptions): Promise<CellResult>;
  /** Replaces the process by a new generation (the heap is lost). */
  reset(reason: string): Promise<{ generation: number }>;
  /** Ends the process group. */
  shutdown(): Promise<void>;
  /** Lets a port ended by `shutdown` start a new generation again (`resume` after `drain`). */
  reopen(): void;
}

/** The hook worker as a session drives it; `KernelSupervisor` is one. */
export interface HookWorkerPort {
  /** What the live process loaded; null when none runs. */
  readonly fingerprint: RoleFingerprint | null;
  /** Runs one hook of the release `options.behavior`; rejects with its failure. */
  hook(
    name: HookName,
    args: Record<string, unknown>,
    options: {
      timeoutMs?: number;
      signal?: AbortSignal;
      behavior?: { revision: string; path: string };
    },
  ): Promise<unknown>;
  /** Replaces the process once it is idle (an activation, a stale package). */
  retire(reason: string): void;
  /** Ends the process group. */
  shutdown(): Promise<void>;
}

/** The worker processes of one session. */
export interface SessionWorkers {
  kernel: WorkbenchPort;
  hooks: HookWorkerPort;
  /**
   * Between frames: replaces each role whose interpreter or package changed on disk. A failure
   * is logged and the loop goes on.
   */
  refreshRoles(): Promise<void>;
}

/** What every session of the daemon is built from. */
export interface SessionOptions {
  store: Store;
  bus: EventBus;
  log: Logger;
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
  /** The artifacts directory's size limit, in bytes. */
  artifactBytes?: number;
  /** Called when a maintenance turn ended, to arm the next scheduled one. */
  afterMaintenanceTurn?: () => void;
  /** Where model calls and artifact writes are reported for `/health`. */
  health: TurnHealth;
  /** Notes a hook call running in the hook worker, for `/health`; returns what ends it. */
  hookRunning?: (hook: string) => () => void;
  /** Whether a hook call runs past `KLBR_HOOK_SLOW_MS` now: it holds back the pending inputs. */
  hookSlow?: () => boolean;
  /** How long an input may stay pending before it expires. */
  inputExpireMs: number;
  /** How long an input may wait before `status` and `/health` say so. */
  inputWaitWarnMs: number;
  /** The first retry's delay after a failed plan or model request. */
  retryBaseMs?: number;
  /** The configuration file, named by `model.failing` as the one to edit. */
  configPath?: string;
  /** The loop's retry and expiry timers; `setTimeout` unless a test injects its own. */
  timers?: SessionTimers;
}
