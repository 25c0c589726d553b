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
    if (this.#running) this.#arm(undefined);
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
    this.#arm(blocked > 0 ? RETRY_MS : undefined);
  }

  #arm(atMost: number | undefined): void {
    this.#disarm();
    if (!this.#running) return;
    const next = nextDueAt(this.#o.store);
    if (next === undefined && atMost === undefined) return;
    const untilNext = next === undefined ? MAX_SLEEP_MS : Math.max(0, next - this.#o.store.clock());
    // A timer that could not be admitted is still due: retry after a pause, not at once.
    const delay = atMost ?? Math.min(untilNext, MAX_SLEEP_MS);
    this.#handle = this.#timers.set(() => this.#tick(), delay);
  }

  #disarm(): void {
    if (this.#handle !== undefined) this.#timers.clear(this.#handle);
    this.#handle = undefined;
  }
}
