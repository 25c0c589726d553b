/**
 * Bounds on what refused clients cost: a rate of refused `/auth` attempts per source, and a log
 * that writes one line per kind of refusal and source a minute, with the count of the rest.
 *
 * On loopback every local process may share one address (127.0.0.1), so a source's rate must
 * never keep out the owner: only refused attempts are counted, and the token is checked before
 * the rate is, so the right token is always let in. The limit does not slow guessing — a
 * 256-bit token makes guessing moot — it bounds the work and the log an attacker can cause, and
 * tells a client in a loop to back off.
 *
 * @module
 */

import type { Logger } from "../core/mod.ts";

/** Options for {@linkcode AttemptLimiter}. */
export interface AttemptLimiterOptions {
  /** Refused attempts a source may make per second, on average. @default {2} */
  perSecond?: number;
  /** Refused attempts a source may make at once before its rate applies. @default {10} */
  burst?: number;
  /** Sources remembered at once; past it, new ones share one bucket. @default {4096} */
  maxSources?: number;
  /** The clock, in ms. @default {Date.now} */
  now?: () => number;
}

/** The key new sources share once {@linkcode AttemptLimiterOptions.maxSources} are kept. */
const OTHER_SOURCES = "(other sources)";

/**
 * A token bucket of refused attempts per source.
 *
 * @example
 * ```ts
 * const limiter = new AttemptLimiter();
 * const wait = limiter.refused("127.0.0.1"); // 0 while under the rate, else seconds to wait
 * ```
 */
export class AttemptLimiter {
  readonly #buckets = new Map<string, { tokens: number; at: number }>();
  readonly #perSecond: number;
  readonly #burst: number;
  readonly #maxSources: number;
  readonly #now: () => number;

  /** Creates a limiter where every source starts with a full burst. */
  constructor(options: AttemptLimiterOptions = {}) {
    this.#perSecond = options.perSecond ?? 2;
    this.#burst = options.burst ?? 10;
    this.#maxSources = options.maxSources ?? 4096;
    this.#now = options.now ?? Date.now;
  }

  /**
   * Counts one refused attempt from `source`. Returns 0 while the source is under its rate,
   * else the whole seconds until it may try again (an attempt past the rate is not counted, so
   * a source that stops is let in again after that wait).
   */
  refused(source: string): number {
    const now = this.#now();
    const key = this.#keyFor(source, now);
    const bucket = this.#buckets.get(key) ?? { tokens: this.#burst, at: now };
    bucket.tokens = Math.min(
      this.#burst,
      bucket.tokens + (now - bucket.at) / 1000 * this.#perSecond,
    );
    bucket.at = now;
    this.#buckets.set(key, bucket);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return 0;
    }
    return Math.max(1, Math.ceil((1 - bucket.tokens) / this.#perSecond));
  }

  /** The source's own key, or the shared one when the map is full of sources still limited. */
  #keyFor(source: string, now: number): string {
    if (this.#buckets.has(source) || this.#buckets.size < this.#maxSources) return source;
    // Sources whose bucket has refilled are forgotten: they start full anyway.
    for (const [key, bucket] of this.#buckets) {
      if (bucket.tokens + (now - bucket.at) / 1000 * this.#perSecond >= this.#burst) {
        this.#buckets.delete(key);
      }
    }
    return this.#buckets.size < this.#maxSources ? source : OTHER_SOURCES;
  }
}

/** Options for {@linkcode RefusalLog}. */
export interface RefusalLogOptions {
  /** How long one line covers a kind of refusal from a source, in ms. @default {60_000} */
  windowMs?: number;
  /** Events, kinds and sources followed at once; past it, new sources are counted together.
   * @default {1024} */
  maxSources?: number;
  /** The clock, in ms. @default {Date.now} */
  now?: () => number;
}

/** One refusal, as {@linkcode RefusalLog.warn} takes it. */
export interface Refusal {
  /** Where it came from (the client's address). */
  source: string;
  /** What was refused, e.g. the error code: each kind has its own line. @default {""} */
  kind?: string;
  /** The line written for the first one. */
  message: string;
}

/** One kind of refusal from one source within its window. */
interface Window {
  event: string;
  source: string;
  start: number;
  /** Refusals after the first, not written one by one. */
  more: number;
  last: string;
}

/**
 * A log of refusals that an attacker cannot flood: the first refusal of each event and kind
 * from a source is written at once, the rest of its window are counted and written as one line
 * when the window ends (a timer that does not keep the process alive).
 *
 * @example
 * ```ts
 * const refusals = new RefusalLog(log);
 * refusals.warn("auth.refused", { source: "127.0.0.1", kind: "token_wrong", message: "…" });
 * ```
 */
export class RefusalLog {
  readonly #log: Logger;
  readonly #windows = new Map<string, Window>();
  readonly #windowMs: number;
  readonly #maxSources: number;
  readonly #now: () => number;
  #timer: ReturnType<typeof setTimeout> | undefined;

  /** Writes through `log`. */
  constructor(log: Logger, options: RefusalLogOptions = {}) {
    this.#log = log;
    this.#windowMs = options.windowMs ?? 60_000;
    this.#maxSources = options.maxSources ?? 1024;
    this.#now = options.now ?? Date.now;
  }

  /**
   * Notes one refusal: written when it is the first of its event and kind from its source in a
   * window, else counted.
   */
  warn(event: string, refusal: Refusal): void {
    const now = this.#now();
    this.flush();
    const { kind = "", message } = refusal;
    const own = `${event}\0${kind}\0${refusal.source}`;
    const followed = this.#windows.size < this.#maxSources || this.#windows.has(own);
    const source = followed ? refusal.source : OTHER_SOURCES;
    const key = followed ? own : `${event}\0\0${OTHER_SOURCES}`;
    const open = this.#windows.get(key);
    if (open !== undefined) {
      open.more++;
      open.last = message;
      return this.#schedule();
    }
    this.#windows.set(key, { event, source, start: now, more: 0, last: message });
    this.#log.warn(
      event,
      `${message} (from ${source}; more like it in the next ${
        this.#windowMs / 1000
      } s are counted in one line)`,
      { source },
    );
  }

  /** Writes the count of every window that has ended and forgets it. */
  flush(): void {
    const now = this.#now();
    // Windows are kept in the order they opened: the first one still open ends the sweep.
    for (const [key, window] of this.#windows) {
      if (now - window.start < this.#windowMs) break;
      this.#windows.delete(key);
      if (window.more === 0) continue;
      this.#log.warn(
        window.event,
        `${window.more} more like it from ${window.source} in ${
          this.#windowMs / 1000
        } s (the last: ${window.last})`,
        { source: window.source, count: window.more },
      );
    }
  }

  /** Flushes once the oldest window with a count ends. */
  #schedule(): void {
    if (this.#timer !== undefined) return;
    let first = Infinity;
    for (const window of this.#windows.values()) {
      if (window.more > 0) first = Math.min(first, window.start + this.#windowMs);
    }
    if (first === Infinity) return;
    const timer = setTimeout(() => {
      this.#timer = undefined;
      this.flush();
      this.#schedule();
    }, Math.max(0, first - this.#now()));
    Deno.unrefTimer(timer);
    this.#timer = timer;
  }
}
