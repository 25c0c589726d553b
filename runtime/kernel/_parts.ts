/**
 * Small private pieces of the workbench handle: the stderr ring, bounded text accumulation
 * and the shapes of cell results the host builds itself.
 *
 * @module
 */

import type { CellReply } from "../core/mod.ts";

/** A cell's outcome: the worker's three, plus the two the host decides. */
export type CellOutcome = CellReply["outcome"] | "timed_out" | "killed";

/** What a cell ended with; `timed_out` and `killed` results are built by the host. */
export type CellResult = Omit<CellReply, "outcome"> & { outcome: CellOutcome };

/** Keeps the last `capacity` bytes written to it. */
export class ByteRing {
  #chunks: Uint8Array[] = [];
  #size = 0;
  readonly #capacity: number;

  /** Creates a ring holding at most `capacity` bytes. */
  constructor(capacity: number) {
    this.#capacity = capacity;
  }

  /** Appends bytes, dropping the oldest beyond the capacity. */
  push(chunk: Uint8Array): void {
    if (this.#capacity === 0) return;
    const kept = chunk.length > this.#capacity
      ? chunk.subarray(chunk.length - this.#capacity)
      : chunk;
    this.#chunks.push(kept.slice());
    this.#size += kept.length;
    while (this.#size - this.#chunks[0].length >= this.#capacity) {
      this.#size -= this.#chunks.shift()!.length;
    }
  }

  /** The kept bytes as text (the first character may be cut). */
  text(): string {
    const all = new Uint8Array(this.#size);
    let at = 0;
    for (const chunk of this.#chunks) {
      all.set(chunk, at);
      at += chunk.length;
    }
    const start = Math.max(0, this.#size - this.#capacity);
    return new TextDecoder().decode(all.subarray(start));
  }
}

/** Accumulates live stream text of one cell up to a cap, for results the host builds. */
export class StreamText {
  #parts: string[] = [];
  #length = 0;
  #dropped = 0;
  readonly #cap: number;

  /** Keeps at most `cap` UTF-16 code units. */
  constructor(cap: number) {
    this.#cap = cap;
  }

  /** Adds text, counting what does not fit. */
  add(text: string): void {
    const room = this.#cap - this.#length;
    const kept = text.length <= room ? text : text.slice(0, Math.max(room, 0));
    this.#dropped += text.length - kept.length;
    this.#length += kept.length;
    if (kept) this.#parts.push(kept);
  }

  /** The kept text, with a marker when some was dropped. */
  text(): string {
    const out = this.#parts.join("");
    return this.#dropped ? `${out}\n[klbr: ${this.#dropped} more characters not kept]\n` : out;
  }
}

/** Builds the result of a cell the host ended itself (`timed_out` or `killed`). */
export function hostEndedResult(
  outcome: "timed_out" | "killed",
  message: string,
  stdout: string,
  stderr: string,
  durationMs: number,
): CellResult {
  return {
    outcome,
    value: null,
    stdout,
    stderr,
    error: { type: outcome, message, traceback: "" },
    wait: null,
    duration_ms: Math.max(0, Math.round(durationMs)),
  };
}

/** A settled-once promise with its resolvers, for waiting on events. */
export function deferred<T>(): {
  promise: Promise<T>;
  resolve: (value: T) => void;
  reject: (error: unknown) => void;
} {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}
