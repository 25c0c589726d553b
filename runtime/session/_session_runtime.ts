/**
 * One session's work loop: pending inputs → `attention.plan` → an accepted frame → a turn.
 *
 * Admission never passes through here: inputs are already durable when this loop is woken.
 * Inputs become consumed only through {@linkcode acceptFrame}; a failing hook or a turn that
 * failed before any effect leaves them pending, and the loop retries after a backoff.
 *
 * @module
 */

import { z } from "zod";
import { appendEvent } from "../../store/events.ts";
import { acceptFrame, finishFrame, type FrameRecord } from "../../store/frames.ts";
import { getInput, type InputRecord, pendingInputs, pendingSummary } from "../../store/inputs.ts";
import { requireSession } from "../../store/sessions.ts";
import type { Store } from "../../store/store.ts";
import {
  DEFAULT_HOOK_TIMEOUT_MS,
  type EventBus,
  type HookName,
  type Logger,
  type RecordInput,
  type RecordType,
  SerialRunner,
} from "../core/mod.ts";
import type { AttentionPlan, HookResult } from "../behavior/mod.ts";

/**
 * Calls the policy hooks of one release: the active one between turns, the one its frame
 * recorded during a turn (a turn is pinned to its frame's release until it ends).
 */
export interface HookCaller {
  /** The release id the hooks come from. */
  readonly revision: string;
  /** The trace of the last call made through this caller, once it has ended. */
  readonly lastTrace: string | null;
  /** Runs one hook and checks its result against its contract; rejects on any failure. */
  call<N extends HookName>(
    name: N,
    args: Record<string, unknown>,
    options: { timeoutMs: number },
  ): Promise<HookResult<N>>;
}

/** What a turn is given. */
export interface TurnContext {
  session: string;
  frame: { id: string; number: number; policyRevision: string; routing: unknown };
  inputs: InputRecord[];
  /** True for a turn that a previous daemon started and this one continues. */
  resumed: boolean;
  /** Aborted when the operator stops the session. */
  signal: AbortSignal;
}

/**
 * How a turn ended: `ok` when it finished (a wait, `turn.next`, the step limit), otherwise
 * failed; `effects` says whether it did something that must not be repeated (a cell ran).
 */
export interface TurnResult {
  ok: boolean;
  /** Why it ended, for the frame record. */
  reason: string;
  effects: boolean;
}

/** Runs one turn for one accepted frame; a failure is a result, never a rejection. */
export type TurnRunner = (context: TurnContext) => Promise<TurnResult>;

/** Options for {@linkcode SessionRuntime}. */
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
  /**
   * Runs between frames, before each plan and each continued turn: where process roles whose
   * dependencies changed are replaced. A failure is logged and the loop goes on.
   */
  boundary?: () => Promise<void>;
}

/** Why the loop is not taking new frames. */
export type SessionState = "running" | "stopped" | "draining" | "drained";

/**
 * The single owner of one session's turn loop.
 *
 * @example
 * ```ts
 * const runtime = new SessionRuntime({ store, bus, session: "default", hooks, turn, log });
 * runtime.wake();
 * ```
 */
export class SessionRuntime {
  #o: Required<SessionRuntimeOptions>;
  #state: SessionState = "running";
  #loop = new SerialRunner(() => this.#takeFrames());
  #turnAbort: AbortController | undefined;
  #currentFrame: { id: string; number: number; startedAt: number } | undefined;
  #retryTimer: ReturnType<typeof setTimeout> | undefined;
  #failures = 0;
  #lastHookFailure: string | undefined;
  #resumable: FrameRecord[] = [];

  /** Creates the runtime; nothing runs until {@linkcode SessionRuntime.wake}. */
  constructor(options: SessionRuntimeOptions) {
    this.#o = {
      hookTimeoutMs: DEFAULT_HOOK_TIMEOUT_MS,
      maxRetries: 6,
      boundary: () => Promise.resolve(),
      ...options,
    };
  }

  /** The loop's state. */
  get state(): SessionState {
    return this.#state;
  }

  /** Schedules the loop; merged with a run already in progress. */
  wake(): void {
    if (this.#state !== "running") return;
    void this.#loop.run();
  }

  /** A JSON view for `status` and `/health`. */
  status(): Record<string, unknown> {
    // One aggregate query: /health calls this, and the backlog may be large.
    const pending = pendingSummary(this.#o.store, this.#o.session);
    const now = this.#o.store.clock();
    return {
      state: this.#state,
      pending_inputs: pending.count,
      oldest_pending_age_ms: pending.oldestAdmittedAt === null
        ? null
        : now - pending.oldestAdmittedAt,
      hook_backlog: this.#lastHookFailure === undefined ? 0 : pending.count,
      last_hook_failure: this.#lastHookFailure ?? null,
      consecutive_failures: this.#failures,
      stalled: this.#failures >= this.#o.maxRetries,
      current_frame: this.#currentFrame === undefined ? null : {
        ...this.#currentFrame,
        running_ms: now - this.#currentFrame.startedAt,
      },
    };
  }

  /** Stops the current turn now and takes no new frames until {@linkcode resume}. */
  async stop(reason: string): Promise<void> {
    this.#state = "stopped";
    this.#clearRetry();
    this.#turnAbort?.abort(new Error(reason));
    await this.#loop.idle();
  }

  /** Lets the current turn finish, then takes no new frames. */
  async drain(): Promise<void> {
    this.#state = "draining";
    this.#clearRetry();
    await this.#loop.idle();
    if (this.#state === "draining") this.#state = "drained";
  }

  /** Takes frames again after a stop or drain. */
  resume(): void {
    this.#state = "running";
    this.#failures = 0;
    this.wake();
  }

  /**
   * Queues frames a dead owner left open after their turn had effects; the loop continues
   * them before it plans new frames.
   */
  resumeFrames(frames: FrameRecord[]): void {
    this.#resumable.push(...frames);
    this.wake();
  }

  async #takeFrames(): Promise<void> {
    while (this.#state === "running" && this.#resumable.length > 0) {
      await this.#boundary();
      const frame = this.#resumable.shift()!;
      const ignored = new Set(
        ((frame.routing as { ignored?: { input_id: string }[] })?.ignored ?? [])
          .map((i) => i.input_id),
      );
      const inputs = frame.inputIds.filter((id) => !ignored.has(id))
        .map((id) => getInput(this.#o.store, id)!);
      await this.#runTurn(
        { id: frame.id, number: frame.number, policyRevision: frame.policyRevision },
        inputs,
        (frame.routing ?? {}) as Record<string, unknown>,
        true,
      );
    }
    while (this.#state === "running") {
      const inputs = pendingInputs(this.#o.store, this.#o.session);
      if (inputs.length === 0) return;
      await this.#boundary();
      const plan = await this.#plan(inputs);
      if (plan === undefined) return this.#retryLater();
      const chosen = inputs.filter((input) => plan.consume.includes(input.id));
      const ignored = plan.ignore.filter((i) =>
        !plan.consume.includes(i.id) && inputs.some((input) => input.id === i.id)
      );
      if (chosen.length === 0 && ignored.length === 0) return; // nothing until the next wake
      // Ignored inputs are taken by the frame, with their reasons, and given to no turn.
      const routing = ignored.length === 0 ? plan.routing : {
        ...plan.routing,
        ignored: ignored.map((i) => ({ input_id: i.id, reason: i.reason })),
      };
      const ignoredIds = ignored.map((i) => i.id);
      if (!(await this.#runFrame(chosen, { ...plan, routing }, ignoredIds))) {
        return this.#retryLater();
      }
    }
  }

  async #boundary(): Promise<void> {
    try {
      await this.#o.boundary();
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      this.#o.log.warn("session.boundary", `checking process roles failed: ${message}`);
    }
  }

  async #plan(
    inputs: InputRecord[],
  ): Promise<(z.infer<typeof AttentionPlan> & { revision: string; trace?: string }) | undefined> {
    const hooks = this.#o.hooks();
    try {
      const value = await hooks.call("attention.plan", {
        inputs: inputs.map((input) => ({
          id: input.id,
          source_kind: input.sourceKind,
          conversation: input.conversationId,
          author: input.author,
          body: input.body,
          received_at: input.receivedAt,
        })),
        session: { id: this.#o.session },
      }, { timeoutMs: this.#o.hookTimeoutMs });
      this.#lastHookFailure = undefined;
      return { ...value, revision: hooks.revision, trace: hooks.lastTrace ?? undefined };
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      this.#lastHookFailure = message;
      this.#record("hook.failed", {
        hook: "attention.plan",
        revision: hooks.revision,
        error: message,
        pending: inputs.length,
        ...(hooks.lastTrace === null ? {} : { trace_id: hooks.lastTrace }),
      });
      return undefined;
    }
  }

  /**
   * Runs one frame; returns `false` when its inputs were given back and a retry is due. A frame
   * of ignored inputs only runs no turn: it ends `done` at once. The frame records the release
   * its plan ran on; its turn is pinned to it.
   */
  async #runFrame(
    inputs: InputRecord[],
    plan: { routing: Record<string, unknown>; revision: string; trace?: string },
    ignoredIds: string[] = [],
  ): Promise<boolean> {
    const { store, session } = this.#o;
    const sessionRow = requireSession(store, session);
    const frame = acceptFrame(store, {
      session,
      inputIds: [...inputs.map((input) => input.id), ...ignoredIds],
      routing: plan.routing,
      contextEpoch: sessionRow.contextEpoch,
      policyRevision: plan.revision,
      attentionTrace: plan.trace,
    });
    this.#o.bus.wake(session);
    if (inputs.length === 0) {
      finishFrame(store, frame.frameId, "done", "every input ignored; no turn");
      this.#o.bus.wake(session);
      return true;
    }
    return await this.#runTurn(
      { id: frame.frameId, number: frame.number, policyRevision: plan.revision },
      inputs,
      plan.routing,
      false,
    );
  }

  /** Runs the turn of an accepted frame; `false` when its inputs were given back. */
  async #runTurn(
    frame: { id: string; number: number; policyRevision: string },
    inputs: InputRecord[],
    routing: Record<string, unknown>,
    resumed: boolean,
  ): Promise<boolean> {
    const { store, session } = this.#o;
    const abort = new AbortController();
    this.#turnAbort = abort;
    this.#currentFrame = { id: frame.id, number: frame.number, startedAt: store.clock() };
    try {
      const result = await this.#o.turn({
        session,
        frame: { ...frame, routing },
        inputs,
        resumed,
        signal: abort.signal,
      }).catch((error): TurnResult => ({
        // A runner that broke its contract may have done anything: keep the inputs with the
        // frame rather than risk repeating what it did.
        ok: false,
        reason: error instanceof Error ? error.message : String(error),
        effects: true,
      }));
      if (result.ok) {
        finishFrame(store, frame.id, "done", result.reason);
        this.#failures = 0;
        return true;
      }
      const { reason, effects } = result;
      const stopped = abort.signal.aborted;
      // A turn that failed before any effect gives its inputs back; one that had effects keeps
      // them, so nothing it did is repeated.
      const end = stopped || effects ? "failed" : "abandoned";
      finishFrame(
        store,
        frame.id,
        end,
        `${stopped ? "stopped: " : ""}${reason}`.slice(0, 1000),
      );
      this.#o.log.warn("frame.ended", `frame ${frame.number} ${end}: ${reason}`, {
        frame: frame.number,
        end,
      });
      return end !== "abandoned";
    } finally {
      this.#turnAbort = undefined;
      this.#currentFrame = undefined;
      this.#o.bus.wake(session);
    }
  }

  #retryLater(): void {
    this.#clearRetry();
    if (this.#state !== "running") return;
    if (this.#failures >= this.#o.maxRetries) {
      // Past the limit nothing retries by itself: the next input, `reset` or a restart does.
      this.#record("session.stalled", {
        failures: this.#failures,
        message:
          `gave up retrying after ${this.#failures} failed attempts; the inputs stay pending`,
      });
      return;
    }
    const delay = Math.min(60_000, 1000 * 2 ** Math.min(this.#failures, 6));
    this.#failures++;
    this.#retryTimer = setTimeout(() => {
      this.#retryTimer = undefined;
      this.wake();
    }, delay);
  }

  #clearRetry(): void {
    if (this.#retryTimer !== undefined) clearTimeout(this.#retryTimer);
    this.#retryTimer = undefined;
  }

  #record<T extends RecordType>(type: T, body: RecordInput<T>): void {
    appendEvent(this.#o.store, this.#o.session, type, body);
    this.#o.bus.wake(this.#o.session);
  }

  /** Clears timers; call after {@linkcode stop} or {@linkcode drain}. */
  dispose(): void {
    this.#clearRetry();
  }
}
