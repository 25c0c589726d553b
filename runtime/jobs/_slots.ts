/**
 * A counted pool of slots (jobs running at once, processes at once): taking one waits while the
 * pool is full, in arrival order, and an aborted wait leaves the queue.
 *
 * @module
 */

import { KlbrError } from "../core/mod.ts";

/** Gives a taken slot back; calling it twice gives it back once. */
export type Release = () => void;

/**
 * A pool of `limit` slots.
 *
 * @example
 * ```ts
 * const processes = new Slots("concurrent_processes", 8);
 * const release = await processes.take(signal);
 * try { await run(); } finally { release(); }
 * ```
 */
export class Slots {
  readonly #waiting: { grant: (release: Release) => void }[] = [];
  #inUse = 0;

  /** Creates a pool named `what` (for messages) of `limit` slots. */
  constructor(readonly what: string, readonly limit: number) {}

  /** Slots taken now. */
  get inUse(): number {
    return this.#inUse;
  }

  /** Takers waiting for a slot. */
  get waiting(): number {
    return this.#waiting.length;
  }

  /** Takes a slot now, or returns `undefined` when the pool is full (or others wait first). */
  tryTake(): Release | undefined {
    if (this.#inUse >= this.limit || this.#waiting.length > 0) return undefined;
    this.#inUse++;
    return this.#releaser();
  }

  /**
   * Takes a slot, waiting in arrival order while the pool is full.
   *
   * @throws {KlbrError} `shutting_down` when `signal` aborts while waiting.
   */
  take(signal?: AbortSignal): Promise<Release> {
    const now = this.tryTake();
    if (now !== undefined) return Promise.resolve(now);
    return new Promise((resolve, reject) => {
      const waiter = {
        grant: (release: Release) => {
          signal?.removeEventListener("abort", onAbort);
          resolve(release);
        },
      };
      const onAbort = () => {
        const at = this.#waiting.indexOf(waiter);
        if (at >= 0) this.#waiting.splice(at, 1);
        reject(
          new KlbrError(
            "shutting_down",
            `cannot take a ${this.what} slot: the wait was cancelled (got ${this.#inUse} of ${this.limit} in use)`,
          ),
        );
      };
      if (signal?.aborted) return onAbort();
      signal?.addEventListener("abort", onAbort, { once: true });
      this.#waiting.push(waiter);
    });
  }

  #releaser(): Release {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.#waiting.shift();
      if (next === undefined) this.#inUse--;
      else next.grant(this.#releaser());
    };
  }
}
