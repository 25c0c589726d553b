/**
 * Runs one piece of work at a time without losing a request for it: a request while it runs
 * makes it run once more after (any number of such requests merge into one).
 *
 * Every loop of the runtime that is woken by a signal carrying no data (the session's turn
 * loop, the Discord sender, a connection's record pump, a socket's message queue) uses this,
 * so "run again if woken meanwhile" is written once.
 *
 * @module
 */

/**
 * A coalescing, one-at-a-time runner.
 *
 * @example
 * ```ts
 * const pump = new SerialRunner(async () => { while (await sendNextPage()); });
 * pump.run();          // starts
 * pump.run();          // while it runs: it runs once more after
 * await pump.idle();   // both done
 * ```
 */
export class SerialRunner {
  #work: () => Promise<void>;
  #running: Promise<void> | undefined;
  #again = false;
  #started = 0;
  #ended = 0;

  /** Creates a runner for `work`; nothing runs until {@linkcode SerialRunner.run}. */
  constructor(work: () => Promise<void>) {
    this.#work = work;
  }

  /** Whether the work is running now. */
  get running(): boolean {
    return this.#running !== undefined;
  }

  /**
   * Runs the work now, or once more after the run in progress. Resolves when no run is in
   * progress or owed; rejects with the last run's error, after which a later call runs again.
   */
  run(): Promise<void> {
    if (this.#running !== undefined) {
      this.#again = true;
      return this.#running;
    }
    const chain = this.#chain(++this.#started);
    // A chain whose work threw at once has already ended and cleared itself.
    if (this.#ended !== this.#started) this.#running = chain;
    return chain;
  }

  /** Resolves when no run is in progress or owed; never rejects. */
  async idle(): Promise<void> {
    await this.#running?.catch(() => {});
  }

  async #chain(run: number): Promise<void> {
    try {
      do {
        this.#again = false;
        await this.#work();
      } while (this.#again);
    } finally {
      // Cleared the moment the last pass ends, not a microtask later: a request arriving in
      // between would otherwise be merged into a chain that is no longer looking at it.
      this.#ended = run;
      this.#running = undefined;
    }
  }
}

/**
 * Resolves in a later task of the event loop (`setImmediate`), after every microtask queued
 * before it and every task already queued, so what they do (an ack's send, an input another
 * connection submitted) goes first. Unlike a nested `setTimeout(0)` it is not clamped to 4 ms;
 * unlike a message channel made for each call (about 20 µs here), it costs about 2 µs.
 *
 * @example
 * ```ts
 * resolveAcks();
 * await nextMacrotask(); // the acks' sends ran
 * ```
 */
export function nextMacrotask(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
