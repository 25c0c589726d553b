/**
 * The timer scheduler: one host timer armed for the earliest pending durable timer; when it is
 * due, every due timer is fired through the coordinator's admission path.
 *
 * Firing commits the `timer` input and the timer's `fired` state together (see
 * `store/tables/timers.ts`), so a timer fires exactly once whatever the daemon does around it: one that
 * fell due while the daemon was down fires at the next start (`runDue` runs first thing), one
 * that was cancelled never fires. The scheduler holds no state of its own that matters: the
 * store's pending timers are the schedule. The clock and the host timer are injected, so tests
 * drive time without sleeping.
 *
 * What could not be admitted is retried after a pause ({@linkcode RETRY_MS}): a due timer, and
 * the other unattended inputs given as `retry` (finished jobs not announced yet), so one loop
 * serves both.
 *
 * @module
 */

import { dueTimers, nextDueAt, type TimerRecord } from "../../store/tables/timers.ts";
import type { Store } from "../../store/store.ts";
import type { Logger } from "../core/mod.ts";
import { HOST_TIMERS, type SessionTimers } from "../session/mod.ts";

/** The longest the scheduler sleeps before it looks at the store again, in ms. */
const MAX_SLEEP_MS = 60_000;
/** How long a timer that could not be admitted waits before the next try, in ms. */
const RETRY_MS = 5_000;

/** A host timer: start one, and clear it. Defaults to `setTimeout`/`clearTimeout`. */
export type HostTimers = SessionTimers;

/** Options for {@linkcode TimerScheduler}. */
export interface TimerSchedulerOptions {
  store: Store;
  log: Logger;
  /**
   * Admits a due timer's input and marks it fired, in one transaction; `false` when it cannot
   * be admitted now (the session is not running, admission is closed). It stays pending then.
   */
  fire: (timer: TimerRecord) => boolean;
  /**
   * Admits the other inputs that wait to be admitted (finished jobs not announced yet); returns
   * how many still cannot be. Run at each look at the store; while any is left, the scheduler
   * looks again after the retry pause. @default nothing else waits
   */
  retry?: () => number;
  /** The host timer; `setTimeout` unless a test injects its own. */
  timers?: HostTimers;
}

/**
 * Fires durable timers at their due time.
 *
 * @example
 * ```ts
 * const scheduler = new TimerScheduler({ store, log, fire: (t) => admitTimer(t) });
 * scheduler.start();   // fires what fell due while down, then arms for the next
 * scheduler.poke();    // after a timer was set or cancelled
 * ```
 */
export class TimerScheduler {
  readonly #o: TimerSchedulerOptions;
  readonly #timers: HostTimers;
  #handle: unknown = undefined;
  #running = false;
  /** When something that could not be admitted is tried again (store clock), if anything. */
  #retryAt: number | undefined = undefined;

  /** Creates a stopped scheduler. */
  constructor(options: TimerSchedulerOptions) {
    this.#o = options;
    this.#timers = options.timers ?? HOST_TIMERS;
  }

  /** Fires every timer already due, then arms the host timer for the next one. */
  start(): void {
    this.#running = true;
    this.#tick();
  }

  /** Re-arms for the earliest pending timer; call after a timer was set or cancelled. */
  poke(): void {
    if (this.#running) this.#arm();
  }

  /**
   * Looks again after the retry pause; call when an input the `retry` option admits could not
   * be admitted now (a job's announcement). A retry already armed is left as it is.
   */
  retryLater(): void {
    if (!this.#running || this.#retryAt !== undefined) return;
    this.#retryAt = this.#o.store.clock() + RETRY_MS;
    this.#arm();
  }

  /** Stops the host timer; pending timers stay pending in the store. */
  stop(): void {
    this.#running = false;
    this.#disarm();
  }

  /**
   * Fires every pending timer due at the store's clock, oldest due first; returns how many
   * fired. A timer whose input cannot be admitted now stays pending.
   */
  runDue(): { fired: number; blocked: number } {
    let fired = 0;
    let blocked = 0;
    for (const timer of dueTimers(this.#o.store, this.#o.store.clock())) {
      let ok = false;
      try {
        ok = this.#o.fire(timer);
      } catch (error) {
        this.#o.log.error("timer.fire_failed", `cannot fire timer ${timer.id}: ${error}`, {
          timer_id: timer.id,
        });
      }
      if (ok) fired++;
      else blocked++;
    }
    return { fired, blocked };
  }

  #tick(): void {
    this.#handle = undefined;
    if (!this.#running) return;
    const { blocked } = this.runDue();
    const left = blocked + this.#retryOthers();
    this.#retryAt = left > 0 ? this.#o.store.clock() + RETRY_MS : undefined;
    this.#arm();
  }

  /** Admits the other waiting inputs; how many are left (one when `retry` itself failed). */
  #retryOthers(): number {
    try {
      return this.#o.retry?.() ?? 0;
    } catch (error) {
      this.#o.log.error("timer.retry_failed", `cannot admit waiting inputs: ${error}`);
      return 1;
    }
  }

  #arm(): void {
    this.#disarm();
    if (!this.#running) return;
    const next = nextDueAt(this.#o.store);
    const retryAt = this.#retryAt;
    if (next === undefined && retryAt === undefined) return;
    const now = this.#o.store.clock();
    // What could not be admitted is still due: it waits for the retry after a pause, not a busy
    // loop (and a poke does not put the retry off). A timer not due yet still fires on time.
    const untilNext = next === undefined || (retryAt !== undefined && next <= now)
      ? MAX_SLEEP_MS
      : Math.max(0, next - now);
    const untilRetry = retryAt === undefined ? MAX_SLEEP_MS : Math.max(0, retryAt - now);
    const delay = Math.min(untilNext, untilRetry, MAX_SLEEP_MS);
    this.#handle = this.#timers.set(() => this.#tick(), delay);
  }

  #disarm(): void {
    if (this.#handle !== undefined) this.#timers.clear(this.#handle);
    this.#handle = undefined;
  }
}
