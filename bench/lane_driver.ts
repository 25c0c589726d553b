/**
 * A lean client of the v2 lane protocol for measurements: it keeps counters, not messages,
 * so 100,000 records or 10,000 acknowledgements cost the client as little as possible.
 *
 * @module
 */

import { KlbrError } from "../runtime/core/mod.ts";

/** Options for {@linkcode openLane}. */
export interface OpenLaneOptions {
  /** The daemon's port on 127.0.0.1. */
  port: number;
  /** The operator token (a native client must present it). */
  token: string;
  /** The client name, part of each input's dedupe key. */
  client: string;
  /** Resume after this seq. @default 0 */
  since?: number;
  /** Open at the head with the newest `page` records (`since: "head"`); `since` is ignored. */
  page?: number;
  /** Give up on the connection and the catch-up after this long. @default 120_000 */
  timeoutMs?: number;
  /** Ask for records in `records` batches (`batch: true` at hello). @default false */
  batch?: boolean;
}

/** A durable record as the driver hands it to a listener. */
export interface SeenRecord {
  seq: number;
  type: string;
  data: Record<string, unknown>;
}

/** How the catch-up after `hello` went. */
export interface ReplayStats {
  /** The `head` the daemon announced in `welcome`. */
  head: number;
  /** Records received before `replayed`. */
  records: number;
  /** Whether they arrived as since+1, since+2, … without a gap or repeat. */
  contiguous: boolean;
  /** Milliseconds from sending `hello` to receiving `replayed`. */
  elapsedMs: number;
}

/** One acknowledged input. */
export interface Ack {
  input_id: string;
  seq: number;
  duplicate: boolean;
}

/** What {@linkcode LaneDriver.admitMany} measured. */
export interface AdmitManyResult {
  /** Milliseconds from the first send to the last acknowledgement. */
  elapsedMs: number;
  /** Acknowledgements received. */
  acks: number;
  /** Distinct input ids among them that were not duplicates. */
  admitted: number;
}

type Waiter = { resolve: (ack: Ack) => void; reject: (error: Error) => void };
type OpWaiter = {
  resolve: (result: Record<string, unknown>) => void;
  reject: (error: Error) => void;
};

/** An open lane connection; create it with {@linkcode openLane}. */
export class LaneDriver {
  readonly #ws: WebSocket;
  readonly #pending = new Map<string, Waiter>();
  readonly #ops = new Map<string, OpWaiter>();
  #listener: ((record: SeenRecord) => void) | undefined;
  #next = 0;
  #records = 0;
  #lastSeq = 0;

  /** Wraps an open socket; {@linkcode openLane} says hello. */
  constructor(ws: WebSocket) {
    this.#ws = ws;
  }

  /** Durable records received so far, catch-up and live. */
  get records(): number {
    return this.#records;
  }

  /** Calls `listener` with each durable record received from now on (one listener). */
  onRecord(listener: ((record: SeenRecord) => void) | undefined): void {
    this.#listener = listener;
  }

  /**
   * Runs one operator command and resolves with its result.
   * @throws {KlbrError} with the daemon's code when it answers `error`.
   */
  operate(
    message: { kind: `op.${string}`; [key: string]: unknown },
  ): Promise<Record<string, unknown>> {
    const request = `op${++this.#next}`;
    const result = new Promise<Record<string, unknown>>((resolve, reject) => {
      this.#ops.set(request, { resolve, reject });
    });
    this.#ws.send(JSON.stringify({ ...message, request }));
    return result;
  }

  /**
   * Sends one input and resolves with its acknowledgement.
   * @throws {KlbrError} with the daemon's code when it answers `error`.
   */
  admit(clientMsgId: string, text: string): Promise<Ack> {
    const request = `b${++this.#next}`;
    const ack = new Promise<Ack>((resolve, reject) => {
      this.#pending.set(request, { resolve, reject });
    });
    this.#ws.send(JSON.stringify({ kind: "input", request, client_msg_id: clientMsgId, text }));
    return ack;
  }

  /**
   * Sends `count` inputs keeping at most `window` unacknowledged (`Infinity`: all at once) and
   * resolves when every one is acknowledged.
   *
   * @throws {KlbrError} `worker_timeout` after `timeoutMs`; the daemon's code on an `error`.
   */
  admitMany(
    count: number,
    options: { window: number; prefix: string; timeoutMs?: number },
  ): Promise<AdmitManyResult> {
    const { window, prefix, timeoutMs = 120_000 } = options;
    const ids = new Set<string>();
    let sent = 0;
    let acked = 0;
    const started = performance.now();
    return new Promise<AdmitManyResult>((resolve, reject) => {
      const timer = setTimeout(() => {
        reject(
          new KlbrError(
            "worker_timeout",
            `cannot admit ${count} inputs: ${acked} acknowledged within ${timeoutMs} ms (got ${acked})`,
          ),
        );
      }, timeoutMs);
      const onAck = (ack: Ack) => {
        acked++;
        if (!ack.duplicate) ids.add(ack.input_id);
        if (acked === count) {
          clearTimeout(timer);
          resolve({ elapsedMs: performance.now() - started, acks: acked, admitted: ids.size });
        } else fill();
      };
      const onError = (error: Error) => {
        clearTimeout(timer);
        reject(error);
      };
      const fill = () => {
        while (sent < count && sent - acked < window) {
          const i = sent++;
          this.admit(`${prefix}-${i}`, `bench input ${i}`).then(onAck, onError);
        }
      };
      fill();
    });
  }

  /** Closes the socket and resolves when it has closed. */
  close(): Promise<void> {
    if (this.#ws.readyState === WebSocket.CLOSED) return Promise.resolve();
    const closed = new Promise<void>((resolve) =>
      this.#ws.addEventListener("close", () => resolve())
    );
    this.#ws.close();
    return closed;
  }

  /** Handles one server message; returns it parsed for the catch-up bookkeeping. */
  receive(text: string): { kind: string; [key: string]: unknown } {
    const message = JSON.parse(text) as { kind: string; [key: string]: unknown };
    if (message.kind === "record") this.#record(message as unknown as SeenRecord);
    else if (message.kind === "records") {
      for (const record of message.records as SeenRecord[]) this.#record(record);
    } else if (message.kind === "op.result" || message.kind === "error") {
      const op = this.#ops.get(message.request as string);
      if (op !== undefined) {
        this.#ops.delete(message.request as string);
        if (message.kind === "op.result") op.resolve(message.result as Record<string, unknown>);
        else op.reject(new KlbrError("invalid_input", `cannot run op: ${String(message.code)}`));
        return message;
      }
    }
    if (message.kind === "ack" || message.kind === "error") {
      const request = message.request as string | undefined;
      const waiter = request === undefined ? undefined : this.#pending.get(request);
      if (waiter !== undefined) {
        this.#pending.delete(request!);
        if (message.kind === "ack") waiter.resolve(message as unknown as Ack);
        else {
          waiter.reject(
            new KlbrError(
              "invalid_input",
              `cannot admit input: ${String(message.code)}: ${String(message.message)}`,
            ),
          );
        }
      }
    }
    return message;
  }

  #record(record: SeenRecord): void {
    this.#records++;
    this.#lastSeq = record.seq;
    this.#listener?.(record);
  }

  /** The seq of the last record received. */
  get lastSeq(): number {
    return this.#lastSeq;
  }
}

/**
 * Connects to `/v2`, says hello with the token and `since`, and waits for `replayed`,
 * counting the records of the catch-up and checking they are contiguous.
 *
 * @throws {KlbrError} `worker_failed` when the socket cannot connect or closes early;
 *   the daemon's code when it refuses the hello; `worker_timeout` after `timeoutMs`.
 * @example
 * ```ts
 * const { lane, replay } = await openLane({ port, token, client: "bench" });
 * console.log(replay.records, replay.elapsedMs);
 * ```
 */
export function openLane(
  options: OpenLaneOptions,
): Promise<{ lane: LaneDriver; replay: ReplayStats }> {
  const since = options.since ?? 0;
  const timeoutMs = options.timeoutMs ?? 120_000;
  const url = `ws://127.0.0.1:${options.port}/v2`;
  const ws = new WebSocket(url);
  const lane = new LaneDriver(ws);
  return new Promise((resolve, reject) => {
    let head = 0;
    let helloAt = 0;
    let expected = since + 1;
    let contiguous = true;
    let done = false;
    const fail = (error: Error) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      ws.close();
      reject(error);
    };
    const timer = setTimeout(
      () =>
        fail(
          new KlbrError(
            "worker_timeout",
            `cannot open lane: no replayed within ${timeoutMs} ms (got ${lane.records} records)`,
          ),
        ),
      timeoutMs,
    );
    ws.onerror = () => fail(new KlbrError("worker_failed", `cannot open lane: ${url} failed`));
    ws.onclose = (event) =>
      fail(
        new KlbrError(
          "worker_failed",
          `cannot open lane: the socket closed before replayed (got code ${event.code})`,
        ),
      );
    ws.onopen = () => {
      helloAt = performance.now();
      ws.send(JSON.stringify({
        kind: "hello",
        session: "default",
        ...(options.page === undefined ? { since } : { since: "head", page: options.page }),
        client: options.client,
        token: options.token,
        ...(options.batch ? { batch: true } : {}),
      }));
    };
    ws.onmessage = (event) => {
      const message = lane.receive(String(event.data));
      if (done) return;
      if (message.kind === "welcome") {
        head = message.head as number;
        if (options.page !== undefined) expected = Math.max(0, head - options.page) + 1;
      } else if (message.kind === "record" || message.kind === "records") {
        const seqs = message.kind === "record"
          ? [message.seq as number]
          : (message.records as SeenRecord[]).map((r) => r.seq);
        for (const seq of seqs) {
          if (seq !== expected) contiguous = false;
          expected = seq + 1;
        }
      } else if (message.kind === "error") {
        fail(
          new KlbrError(
            "worker_failed",
            `cannot open lane: the daemon refused hello (got ${String(message.code)})`,
          ),
        );
      } else if (message.kind === "replayed") {
        done = true;
        clearTimeout(timer);
        ws.onclose = null;
        resolve({
          lane,
          replay: {
            head,
            records: lane.records,
            contiguous,
            elapsedMs: performance.now() - helloAt,
          },
        });
      }
    };
  });
}
