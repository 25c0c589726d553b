/**
 * One session's work loop: pending inputs → `attention.plan` → an accepted frame → a turn.
 *
 * Admission never passes through here: inputs are already durable when this loop is woken.
 * Inputs become consumed only through {@linkcode acceptFrame}; a failing hook or a turn that
 * failed before any effect leaves them pending, and the loop retries after a backoff. A turn
 * whose model request fails after it had effects keeps its frame and is continued from the
 * persisted sequence with the same backoff; only when retries run out does it end `failed`.
 * Inputs a plan ignores, and inputs pending past the configured age, end with that
 * disposition, so none is pending forever.
 *
 * @module
 */

import { appendEvent } from "../../store/tables/events.ts";
import { acceptFrame, finishFrame, type FrameRecord, getFrame } from "../../store/tables/frames.ts";
import { getInputs, type InputRecord, pendingInputs } from "../../store/tables/inputs.ts";
import { oldestPendingAt } from "../../store/tables/work_counts.ts";
import { requireSession } from "../../store/tables/sessions.ts";
import {
  DEFAULT_HOOK_TIMEOUT_MS,
  DEFAULT_RETRY_BASE_MS,
  LONGEST_TIMER_MS,
  type RecordInput,
  type RecordType,
  SerialRunner,
} from "../core/mod.ts";
import { answered, callPlan, expireOld, frameOfPlan, inputsView, type Plan } from "./_attention.ts";
import { recoverSession } from "./_recovery.ts";
import { lastFailure, ModelTrouble } from "./_model_trouble.ts";
import { RetrySchedule } from "./_retry_schedule.ts";
import {
  type Continuation,
  HOST_TIMERS,
  type SessionRuntimeOptions,
  type SessionState,
  type TurnResult,
} from "./_turn_types.ts";

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
  #planAbort: AbortController | undefined;
  #currentFrame: { id: string; number: number; startedAt: number } | undefined;
  #retryTimer: unknown;
  /** Set while the retry timer keeps a wait the model server asked for: wakes wait for it. */
  #serverHold = false;
  #expiryTimer: unknown;
  #retry: RetrySchedule;
  #lastHookFailure: string | undefined;
  #continuations: Continuation[] = [];
  #retrying: { frame: string; attempt: number; reason: string } | undefined;
  /** Set when the loop met a store failure: the next pass recovers the session first. */
  #repair = false;
  #trouble: ModelTrouble;

  /** Creates the runtime; nothing runs until {@linkcode SessionRuntime.wake}. */
  constructor(options: SessionRuntimeOptions) {
    this.#o = {
      hookTimeoutMs: DEFAULT_HOOK_TIMEOUT_MS,
      maxRetries: 6,
      retryBaseMs: DEFAULT_RETRY_BASE_MS,
      inputExpireMs: Infinity,
      inputWaitWarnMs: 300_000,
      boundary: () => Promise.resolve(),
      configPath: null,
      hookSlow: () => false,
      timers: HOST_TIMERS,
      ...options,
    };
    this.#retry = new RetrySchedule(this.#o);
    this.#trouble = new ModelTrouble(
      (type, body) => this.#record(type, body),
      this.#o.configPath,
      () => lastFailure(this.#o.store, this.#o.session),
    );
  }

  /** The loop's state. */
  get state(): SessionState {
    return this.#state;
  }

  /** Schedules the loop; merged with a run in progress or a held `Retry-After`. Never rejects. */
  wake(): void {
    if (this.#state !== "running" || this.#serverHold) return;
    this.#loop.run().catch((error) => this.#loopFailed(error));
  }

  /** A JSON view for `status` and `/health`. */
  status(): Record<string, unknown> {
    const { store, session, inputWaitWarnMs } = this.#o;
    const now = store.clock();
    const inputs = inputsView(store, session, inputWaitWarnMs);
    return {
      state: this.#state,
      ...inputs,
      hook_backlog: this.#lastHookFailure === undefined && !this.#o.hookSlow()
        ? 0
        : inputs.pending_inputs,
      last_hook_failure: this.#lastHookFailure ?? null,
      consecutive_failures: this.#retry.failures,
      stalled: this.#retry.stalled,
      retrying: this.#retrying ?? null,
      current_frame: this.#currentFrame === undefined ? null : {
        ...this.#currentFrame,
        running_ms: now - this.#currentFrame.startedAt,
      },
    };
  }

  /** Stops the current turn (or plan) now and takes no new frames until {@linkcode resume}. */
  async stop(reason: string): Promise<void> {
    this.#state = "stopped";
    this.#clearTimers();
    this.#turnAbort?.abort(new Error(reason));
    this.#planAbort?.abort(new Error(reason));
    await this.#loop.idle();
  }

  /** Lets the current turn finish, then takes no new frames. */
  async drain(): Promise<void> {
    this.#state = "draining";
    this.#clearTimers();
    await this.#loop.idle();
    if (this.#state === "draining") this.#state = "drained";
  }

  /** Takes frames again after a stop or drain. */
  resume(): void {
    this.#state = "running";
    this.#retry.reset();
    this.wake();
  }

  /** Queues frames a dead owner left open with effects: the loop continues them first. */
  resumeFrames(frames: FrameRecord[]): void {
    this.#continue(frames.map((frame) => ({ frame, attempt: 0 })));
    this.wake();
  }

  #continue(items: Continuation[]): void {
    const queued = new Set(this.#continuations.map((c) => c.frame.id));
    this.#continuations.push(...items.filter((c) => !queued.has(c.frame.id)));
  }

  async #takeFrames(): Promise<void> {
    const { store, session, log } = this.#o;
    if (this.#repair) {
      this.#repair = false;
      const reason = "the turn loop met a store failure";
      this.#continue(
        recoverSession(store, session, { log, reason }).map((frame) => ({ frame, attempt: 0 })),
      );
    }
    expireOld(store, session, this.#o.inputExpireMs);
    while (this.#state === "running" && this.#continuations.length > 0) {
      await this.#o.boundary();
      const next = this.#continuations.shift()!;
      if (!(await this.#runTurn(next.frame, next.attempt))) return this.#retryLater();
    }
    while (this.#state === "running") {
      const inputs = pendingInputs(store, session);
      if (inputs.length === 0) return;
      await this.#o.boundary();
      const plan = await this.#plan(inputs);
      if (plan === undefined) return this.#retryLater();
      const { chosen, ignoredIds, routing } = frameOfPlan(plan, inputs);
      // Ambient: nothing to do until the next wake, or until the oldest input expires.
      if (chosen.length === 0 && ignoredIds.length === 0) return this.#scheduleExpiry();
      if (!(await this.#runFrame(chosen, { ...plan, routing }, ignoredIds))) {
        return this.#retryLater();
      }
    }
  }

  async #plan(
    inputs: InputRecord[],
  ): Promise<(Plan & { revision: string; trace?: string }) | undefined> {
    const hooks = this.#o.hooks();
    const abort = new AbortController();
    this.#planAbort = abort;
    try {
      const plan = await callPlan(hooks, this.#o.session, inputs, {
        timeoutMs: this.#o.hookTimeoutMs,
        signal: abort.signal,
      });
      this.#lastHookFailure = undefined;
      this.#retry.planAnswered();
      return { ...plan, revision: hooks.revision, trace: hooks.lastTrace ?? undefined };
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      this.#lastHookFailure = message;
      this.#retry.planFailed();
      this.#record("hook.failed", {
        hook: "attention.plan",
        revision: hooks.revision,
        error: message,
        pending: inputs.length,
        ...(hooks.lastTrace === null ? {} : { trace_id: hooks.lastTrace }),
      });
      return undefined;
    } finally {
      this.#planAbort = undefined;
    }
  }

  /**
   * Accepts a frame for `inputs` (and the ignored ones) and runs its turn; `false` when a retry
   * is due. A frame of ignored inputs only runs no turn: it ends `done` at once. The frame
   * records the release its plan ran on; its turn is pinned to it.
   */
  async #runFrame(
    inputs: InputRecord[],
    plan: { routing: Record<string, unknown>; revision: string; trace?: string },
    ignoredIds: string[],
  ): Promise<boolean> {
    const { store, session } = this.#o;
    const sessionRow = requireSession(store, session);
    const accepted = acceptFrame(store, {
      session,
      inputIds: [...inputs.map((input) => input.id), ...ignoredIds],
      routing: plan.routing,
      contextEpoch: sessionRow.contextEpoch,
      policyRevision: plan.revision,
      attentionTrace: plan.trace,
    });
    if (inputs.length === 0) {
      finishFrame(store, accepted.frameId, "done", "every input ignored; no turn");
      return true;
    }
    return await this.#runTurn(getFrame(store, accepted.frameId)!, -1, inputs);
  }

  /**
   * Runs the turn of an open frame (`attempt` -1 for a new frame, 0 for one adopted at start,
   * 1, 2, … for a retry) and ends the frame as its result says. Returns `false` when a retry is
   * due: the frame gave its inputs back, or it stays open to be continued after the backoff.
   */
  async #runTurn(frame: FrameRecord, attempt: number, given?: InputRecord[]): Promise<boolean> {
    const { store, session } = this.#o;
    const abort = new AbortController();
    this.#turnAbort = abort;
    this.#currentFrame = { id: frame.id, number: frame.number, startedAt: store.clock() };
    try {
      const result = await this.#o.turn({
        session,
        frame: {
          id: frame.id,
          number: frame.number,
          policyRevision: frame.policyRevision,
          routing: frame.routing ?? {},
        },
        inputs: given ?? getInputs(store, answered(frame)),
        resumed: attempt >= 0,
        ...(attempt > 0 ? { attempt } : {}),
        signal: abort.signal,
      }).catch((error): TurnResult => ({
        // A runner that broke its contract may have done anything: keep the inputs with the
        // frame rather than risk repeating what it did.
        ok: false,
        reason: error instanceof Error ? error.message : String(error),
        effects: true,
      }));
      return this.#endTurn(frame, Math.max(attempt, 0), result, abort.signal.aborted);
    } finally {
      this.#turnAbort = undefined;
      this.#currentFrame = undefined;
    }
  }

  #endTurn(frame: FrameRecord, attempt: number, result: TurnResult, stopped: boolean): boolean {
    const { store, log } = this.#o;
    this.#retrying = undefined;
    this.#trouble.ended(frame, result);
    this.#retry.heard(result);
    if (result.ok) {
      finishFrame(store, frame.id, "done", result.reason.slice(0, 1000));
      this.#retry.reset();
      return true;
    }
    const { reason, effects } = result;
    if (!stopped && effects && result.retriable && this.#retry.mayContinue) {
      // The turn had effects: its frame stays open, and it is continued from the persisted
      // sequence after the same backoff a turn without effects would wait — or, when the
      // server refused the request, with the next input or operator command.
      this.#continuations.unshift({ frame, attempt: attempt + 1 });
      if (this.#retry.refused) return false;
      this.#retrying = { frame: frame.id, attempt: attempt + 1, reason: reason.slice(0, 500) };
      this.#record("turn.retrying", {
        frame_id: frame.id,
        attempt: attempt + 1,
        delay_ms: this.#retry.delay(),
        reason: reason.slice(0, 1000),
      });
      return false;
    }
    // A turn that failed before any effect gives its inputs back; one that had effects keeps
    // them, so nothing it did is repeated.
    const end = stopped || effects ? "failed" : "abandoned";
    const why = stopped || !effects || !result.retriable
      ? reason
      : `gave up after ${attempt} retries: ${reason}; its inputs were seen but not answered`;
    finishFrame(store, frame.id, end, why.slice(0, 1000));
    log.warn("frame.ended", `frame ${frame.number} ${end}: ${why}`, { frame: frame.number, end });
    return end !== "abandoned";
  }

  /** Schedules the next pass after a failed one (see `_retry_schedule.ts`), or stalls. */
  #retryLater(): void {
    this.#clearRetry();
    if (this.#state !== "running") return;
    const next = this.#retry.next();
    if (next.kind === "stall") {
      // Nothing retries by itself: the next input, `reset` or a restart does. The inputs still
      // expire at their age, so none stays pending forever.
      this.#trouble.retrying(next.attempt, next.of, null);
      this.#record("session.stalled", { failures: this.#retry.failures, message: next.message });
      return this.#scheduleExpiry();
    }
    this.#trouble.retrying(next.attempt, next.of, next.delayMs);
    this.#serverHold = next.serverWait;
    this.#retryTimer = this.#o.timers.set(() => this.#retryDue(), next.delayMs);
  }

  /** Wakes the loop when the oldest pending input is due to expire. */
  #scheduleExpiry(): void {
    if (this.#expiryTimer !== undefined || !Number.isFinite(this.#o.inputExpireMs)) return;
    const oldest = oldestPendingAt(this.#o.store, this.#o.session);
    if (oldest === null) return;
    const due = oldest + this.#o.inputExpireMs - this.#o.store.clock();
    const ms = Math.min(Math.max(due, 0) + 1, LONGEST_TIMER_MS);
    this.#expiryTimer = this.#o.timers.set(() => this.#expiryDue(), ms);
  }

  /** The retry's backoff (or the server's wait) is over: the loop runs again. */
  #retryDue(): void {
    this.#retryTimer = undefined;
    this.#serverHold = false;
    this.wake();
  }

  /** The oldest pending input is due to expire: the loop's next pass expires it. */
  #expiryDue(): void {
    this.#expiryTimer = undefined;
    this.wake();
  }

  /**
   * A pass of the loop threw (the store could not read or commit): it is logged, and the next
   * pass, after the backoff, recovers the session first so every tool call has its result.
   */
  #loopFailed(error: unknown): void {
    const message = error instanceof Error ? error.message : String(error);
    this.#o.log.error(
      "session.loop_failed",
      `session ${this.#o.session}: the turn loop failed (${message}); it recovers and retries after a backoff`,
      { session: this.#o.session },
    );
    this.#repair = true;
    this.#retryLater();
  }

  #clearRetry(): void {
    if (this.#retryTimer !== undefined) this.#o.timers.clear(this.#retryTimer);
    this.#retryTimer = undefined;
    this.#serverHold = false;
  }

  #clearTimers(): void {
    this.#clearRetry();
    if (this.#expiryTimer !== undefined) this.#o.timers.clear(this.#expiryTimer);
    this.#expiryTimer = undefined;
  }

  /** Appends a record; a store that cannot take it is logged, never thrown at the loop. */
  #record<T extends RecordType>(type: T, body: RecordInput<T>): void {
    try {
      appendEvent(this.#o.store, this.#o.session, type, body);
    } catch (error) {
      this.#o.log.error("session.record_failed", `cannot record ${type}: ${error}`, { type });
    }
  }

  /** Clears timers; call after {@linkcode stop} or {@linkcode drain}. */
  dispose(): void {
    this.#clearTimers();
  }
}
