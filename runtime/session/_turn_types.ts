/**
 * The shapes the session loop and the turn it runs share: the hook caller, what a turn is
 * given, and how it ended.
 *
 * @module
 */

import type { FrameRecord } from "../../store/tables/frames.ts";
import type { InputRecord } from "../../store/tables/inputs.ts";
import type { Store } from "../../store/store.ts";
import type { EventBus, HookName, Logger } from "../core/mod.ts";
import type { HookResult } from "../behavior/mod.ts";

/**
 * Calls the policy hooks of one release: the active one between turns, the one its frame
 * recorded during a turn (a turn is pinned to its frame's release until it ends).
 */
export interface HookCaller {
  /** The release id the hooks come from. */
  readonly revision: string;
  /** The trace of the last call made through this caller, once it has ended. */
  readonly lastTrace: string | null;
  /**
   * Runs one hook and checks its result against its contract; rejects on any failure. An
   * aborted `signal` cancels the call (the hook worker's cancellation ladder).
   */
  call<N extends HookName>(
    name: N,
    args: Record<string, unknown>,
    options: { timeoutMs: number; signal?: AbortSignal },
  ): Promise<HookResult<N>>;
}

/** What a turn is given. */
export interface TurnContext {
  session: string;
  frame: { id: string; number: number; policyRevision: string; routing: unknown };
  inputs: InputRecord[];
  /**
   * True for a turn continued from the persisted sequence: one a previous daemon started, or
   * one whose model request failed after it had effects and is retried.
   */
  resumed: boolean;
  /** Which retry of the frame's turn this is (1, 2, …); absent for a first attempt. */
  attempt?: number;
  /** Aborted when the operator stops the session; its reason says why. */
  signal: AbortSignal;
}

/**
 * How a turn ended: `ok` when it finished (a wait, `turn.next`, the step limit), otherwise
 * failed; `effects` says whether it left anything that must not be repeated (a model reply in
 * the sequence, a cell); `retriable` whether the same turn may be continued later (its model
 * request failed).
 */
export interface TurnResult {
  ok: boolean;
  /** Why it ended, for the frame record. */
  reason: string;
  effects: boolean;
  retriable?: boolean;
  /**
   * Set when the model request failed: the route, its URL and model, and the error; whether a
   * retry can succeed (`false` for a refusal: a key, a model name, a field the server refused),
   * the wait the server asked for, and what it refused (`ProviderRefusal`).
   */
  model?: {
    route: string;
    url: string;
    model: string;
    error: string;
    retriable?: boolean;
    retryAfterMs?: number;
    refusal?: string;
  };
}

/** Runs one turn for one accepted frame; a failure is a result, never a rejection. */
export type TurnRunner = (context: TurnContext) => Promise<TurnResult>;

/** Options for `SessionRuntime`. */
export interface SessionRuntimeOptions {
  store: Store;
  bus: EventBus;
  session: string;
  hooks: () => HookCaller;
  turn: TurnRunner;
  log: Logger;
  /** @default {DEFAULT_HOOK_TIMEOUT_MS} */
  hookTimeoutMs?: number;
  /** Retries after failed attempts (1 s, 2 s, 4 s, … apart) before the loop waits for a wake. @default {6} */
  maxRetries?: number;
  /** The first retry's delay; each later one doubles it, up to a minute. @default {1000} */
  retryBaseMs?: number;
  /** How long an input may stay pending before it expires. @default {Infinity} */
  inputExpireMs?: number;
  /** How long an input may wait before `status` lists it as waiting too long. @default {300_000} */
  inputWaitWarnMs?: number;
  /** The configuration file `model.failing` names as the one to edit. @default {null} */
  configPath?: string | null;
  /**
   * Whether a hook call runs past `KLBR_HOOK_SLOW_MS` now; while it does, or while the last
   * hook call failed, `hook_backlog` counts every pending input (once). @default {() => false}
   */
  hookSlow?: () => boolean;
  /**
   * Runs between frames, before each plan and each continued turn: where process roles whose
   * dependencies changed are replaced. It must not reject: it logs its own failures.
   */
  boundary?: () => Promise<void>;
  /** The retry and expiry timers. @default {the host's `setTimeout`} */
  timers?: SessionTimers;
}

/**
 * The host timers a session loop arms for its retries and input expiry: `setTimeout` and
 * `clearTimeout` unless a test drives time by hand.
 */
export interface SessionTimers {
  set(fn: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}

/** The host's own timers. */
export const HOST_TIMERS: SessionTimers = {
  set: (fn, ms) => setTimeout(fn, ms),
  clear: (handle) => clearTimeout(handle as number),
};

/** Why the loop is not taking new frames. */
export type SessionState = "running" | "stopped" | "draining" | "drained";

/** An open frame the loop continues from its persisted sequence. */
export interface Continuation {
  frame: FrameRecord;
  /** 0 for a frame adopted at start; 1, 2, … for a retry after a failed model request. */
  attempt: number;
}
