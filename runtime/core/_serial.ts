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
 * Resolves after one turn of the event loop, so I/O events that are ready (socket messages)
 * are delivered first, and every microtask queued before it has run. A message port, unlike a
 * nested `setTimeout(0)`, is not clamped to 4 ms; it is not a timer. `setImmediate` costs a
 * tenth of it but resolves without the loop polling the sockets: the admission writer looping
 * on it doubled 1a and 1b and made a second client's ack p99 under a flood (1l) worse and less
 * steady, in interleaved runs (`docs/performance.md`).
 *
 * @example
 * ```ts
 * resolveAcks();
 * await nextMacrotask(); // the acks' sends ran; messages that arrived meanwhile were delivered
 * ```
 */
export function nextMacrotask(): Promise<void> {
  const { port1, port2 } = new MessageChannel();
  return new Promise((resolve) => {
    port1.onmessage = () => {
      port1.close();
      port2.close();
      resolve();
    };
    port2.postMessage(undefined);
  });
}
