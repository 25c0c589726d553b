/**
 * Host timers a test drives by hand, beside a clock it sets: `advance(ms)` moves the clock and
 * runs every timer that has fallen due, in due order. No test waits for real time.
 *
 * @module
 */

import type { HostTimers } from "../../runtime/jobs/mod.ts";

/** Manual host timers over `clock`. */
export class ManualTimers implements HostTimers {
  #next = 1;
  readonly #due = new Map<number, { at: number; fn: () => void }>();

  /** Creates timers reading and moving `clock.now`. */
  constructor(readonly clock: { now: number }) {}

  /** Timers armed and not yet run. */
  get armed(): number {
    return this.#due.size;
  }

  /** When the earliest armed timer is due, if any. */
  get nextAt(): number | undefined {
    const ats = [...this.#due.values()].map((t) => t.at);
    return ats.length ? Math.min(...ats) : undefined;
  }

  set(fn: () => void, ms: number): unknown {
    const id = this.#next++;
    this.#due.set(id, { at: this.clock.now + ms, fn });
    return id;
  }

  clear(handle: unknown): void {
    this.#due.delete(handle as number);
  }

  /** Moves the clock by `ms`, running each timer due on the way at its own time. */
  advance(ms: number): void {
    const end = this.clock.now + ms;
    for (let guard = 0; guard < 10_000; guard++) {
      const due = [...this.#due.entries()].filter(([, t]) =>
        t.at <= end
      ).sort((a, b) => a[1].at - b[1].at || a[0] - b[0])[0];
      if (due === undefined) {
        break;
      }
      this.#due.delete(due[0]);
      this.clock.now = Math.max(this.clock.now, due[1].at);
      due[1].fn();
    }
    this.clock.now = end;
  }
}
