/**
 * Runs one piece of work at a time without losing a request for it: a request while it runs
 * makes it run once more after (any number of such requests merge into one). Beside it, the
 * runtime's two ways of waiting: for one turn of the event loop, and for a promise at most so
 * long.
 *
 * Every loop of the runtime that is woken by a signal carrying no data (the session's turn
 * loop, the Discord sender, a connection's record pump, a socket's message queue) uses this,
 * so "run again if woken meanwhile" is written once.
 *
 * @module
 */

import type {
  MessageChannel as NodeMessageChannel,
  MessagePort as NodeMessagePort,
} from "node:worker_threads";

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
 * nested `setTimeout(0)`, is not clamped to 4 ms; `setImmediate` resolves without the loop
 * polling the sockets, which made acks slower under a flood (`docs/performance.md` has the
 * runs). One channel serves every call, and holds the process open only while a call waits.
 *
 * @example
 * ```ts
 * resolveAcks();
 * await nextMacrotask(); // the acks' sends ran; messages that arrived meanwhile were delivered
 * ```
 */
export function nextMacrotask(): Promise<void> {
  return new Promise((resolve) => loopTurns.wait(resolve));
}

/**
 * Resolves `true` when `promise` settles within `ms`, else `false`; never rejects.
 *
 * @example
 * ```ts
 * if (!(await settlesWithin(child.status, 5_000))) child.kill("SIGKILL");
 * ```
 */
export function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<boolean>((done) => {
    timer = setTimeout(() => done(false), ms);
  });
  return Promise.race([promise.then(() => true, () => true), timeout]).finally(() =>
    clearTimeout(timer)
  );
}

/** The one channel of {@linkcode nextMacrotask}: each message it carries is one waiter's turn. */
class LoopTurns {
  #channel: NodeMessageChannel | undefined;
  readonly #waiting: (() => void)[] = [];

  wait(resolve: () => void): void {
    const { port1, port2 } = this.#channel ??= this.#open();
    if (this.#waiting.length === 0) port1.ref();
    this.#waiting.push(resolve);
    port2.postMessage(undefined);
  }

  /**
   * Node's channel, not the web's: its port lets go of the event loop when unreferenced even
   * while it listens (a web port's receive is referenced again after every message). Taken from
   * `process.getBuiltinModule`, so that this folder, which the page's bundle imports, imports
   * no `node:` module.
   */
  #open(): NodeMessageChannel {
    const node = globalThis as unknown as { process: { getBuiltinModule(id: string): unknown } };
    const { MessageChannel } = node.process.getBuiltinModule("node:worker_threads") as {
      MessageChannel: new () => NodeMessageChannel;
    };
    const channel = new MessageChannel();
    channel.port1.on("message", this.#turn.bind(this, channel.port1));
    channel.port1.unref();
    return channel;
  }

  #turn(port: NodeMessagePort): void {
    this.#waiting.shift()?.();
    if (this.#waiting.length === 0) port.unref();
  }
}

const loopTurns = new LoopTurns();
