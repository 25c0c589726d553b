/**
 * When a session's loop tries again after a failed pass: a backoff that doubles (1 s, 2 s, 4 s,
 * … at most a minute) up to a number of retries, never sooner than the model server asked
 * (`Retry-After`, at most ten minutes), and not at all after a refusal (a key, a model name, a
 * field the server refused): the same request would be refused again, so the loop waits for
 * the next input, an operator command or a restart.
 *
 * @module
 */

import type { TurnResult } from "./_turn_types.ts";

/** The longest a server's `Retry-After` holds the next attempt back. */
export const MAX_SERVER_WAIT_MS = 600_000;

/** The backoff's ceiling. */
const MAX_BACKOFF_MS = 60_000;

/** What the last failed turn said about trying again. */
interface LastFailure {
  /** The server refused the request: no retry by itself. */
  refused: boolean;
  /** The wait the server asked for, bounded. */
  serverWaitMs: number | undefined;
}

/**
 * One session's retry schedule.
 *
 * @example
 * ```ts
 * const schedule = new RetrySchedule({ maxRetries: 6, retryBaseMs: 1000 });
 * schedule.heard(result);            // a turn failed
 * const next = schedule.next();      // { kind: "retry", delayMs, serverWait } | { kind: "stall", … }
 * ```
 */
export class RetrySchedule {
  readonly #maxRetries: number;
  readonly #baseMs: number;
  #failures = 0;
  #last: LastFailure = { refused: false, serverWaitMs: undefined };
  #refusedStall = false;
  /** The failures counted are a failing plan's: no turn has ended since the first of them. */
  #planFailing = false;

  /** `maxRetries` retries, the first after `retryBaseMs`. */
  constructor(options: { maxRetries: number; retryBaseMs: number }) {
    this.#maxRetries = options.maxRetries;
    this.#baseMs = options.retryBaseMs;
  }

  /** Failed passes since the last success. */
  get failures(): number {
    return this.#failures;
  }

  /** Whether the loop stopped retrying by itself: out of retries, or refused. */
  get stalled(): boolean {
    return this.#refusedStall || this.#failures >= this.#maxRetries;
  }

  /** Whether a turn that had effects may be continued by itself after this failure. */
  get mayContinue(): boolean {
    return this.#last.refused || this.#failures < this.#maxRetries;
  }

  /** Whether the last failure was a refusal: no retry by itself. */
  get refused(): boolean {
    return this.#last.refused;
  }

  /** A turn ended: keeps what its model failure said about trying again. */
  heard(result: TurnResult): void {
    const model = result.ok ? undefined : result.model;
    const wait = model?.retryAfterMs;
    this.#last = {
      refused: model?.retriable === false,
      serverWaitMs: wait === undefined
        ? undefined
        : Math.min(Math.max(wait, 0), MAX_SERVER_WAIT_MS),
    };
    this.#refusedStall = false;
    this.#planFailing = false;
  }

  /** The attention plan failed: the pass's failure, counted by {@linkcode next}, is the plan's. */
  planFailed(): void {
    if (this.#failures === 0) this.#planFailing = true;
  }

  /**
   * The attention plan answered. When every failure counted was the plan's, they are over: a
   * turn's failures are then counted from none, so a model failure after a repaired plan is
   * retried rather than stalled at once. Failures that include a turn's keep counting.
   */
  planAnswered(): void {
    if (this.#planFailing) this.reset();
  }

  /** The wait before the next attempt: the backoff, or longer when the server asked. */
  delay(): number {
    return Math.max(this.#backoff(), this.#last.serverWaitMs ?? 0);
  }

  #backoff(): number {
    return Math.min(MAX_BACKOFF_MS, this.#baseMs * 2 ** Math.min(this.#failures, 6));
  }

  /**
   * A pass failed: what comes next. `retry` counts the failure and says when; `stall` says
   * nothing retries by itself, and why. Either way the
   * last failure is used up: a later hook or store failure is judged on its own.
   */
  next():
    | { kind: "retry"; attempt: number; of: number; delayMs: number; serverWait: boolean }
    | { kind: "stall"; attempt: number; of: number; message: string } {
    const last = this.#last;
    this.#last = { refused: false, serverWaitMs: undefined };
    if (last.refused) {
      this.#failures++;
      this.#refusedStall = true;
      const message =
        "the model server refused the request, and the same request would be refused again; the inputs stay pending until the cause is fixed";
      return { kind: "stall", attempt: this.#failures, of: this.#failures, message };
    }
    const of = this.#maxRetries + 1;
    if (this.#failures >= this.#maxRetries) {
      const message =
        `gave up retrying after ${this.#failures} failed attempts; the inputs stay pending`;
      return { kind: "stall", attempt: this.#failures + 1, of, message };
    }
    const backoff = this.#backoff();
    const serverWait = (last.serverWaitMs ?? 0) > backoff;
    const delayMs = Math.max(backoff, last.serverWaitMs ?? 0);
    this.#failures++;
    return { kind: "retry", attempt: this.#failures, of, delayMs, serverWait };
  }

  /** A turn finished, or the operator resumed: the count starts again. */
  reset(): void {
    this.#failures = 0;
    this.#refusedStall = false;
    this.#planFailing = false;
    this.#last = { refused: false, serverWaitMs: undefined };
  }
}
