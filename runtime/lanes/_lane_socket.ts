/**
 * The WebSocket under one `/v2` connection: its lane connection, the messages waiting for it,
 * its place in the registry (waiting for hello, then a lane), lossy animation dropped for a
 * client that does not read, and a catch-up that waits for the client page by page.
 *
 * Bounded input: a connection hands admission at most `maxUnackedInputs` inputs it has not
 * answered yet, and none while its client leaves more than `ackHighWaterBytes` unread. Past
 * either bound its further messages wait, in arrival order, until the answers drain; none is
 * dropped or reordered. While as many messages wait as the bound allows unanswered, the socket
 * stops reading (`ws`'s `pause`, over the listener's TCP socket): the kernel's buffers fill
 * and the client's writes wait — TCP backpressure. What a client that writes without reading
 * costs the daemon is then at most that many messages and one read's worth more.
 *
 * @module
 */

import type { Duplex } from "node:stream";
// @ts-types="npm:@types/ws@^8.18.1"
import type { WebSocket as NodeWebSocket } from "ws";
import { type Logger, nextMacrotask, SerialRunner, type ServerMessage } from "../core/mod.ts";
import { type LaneAuth, LaneConnection, type LaneHost } from "./_lane_connection.ts";
import type { LaneRegistry, Place } from "./_lane_registry.ts";

const decoder = new TextDecoder();
/** What a binary frame is held as: it is not JSON, and is answered so. */
const EMPTY = new Uint8Array(0);
/**
 * Messages of one connection handed to admission at a time. With 256 and no yield, a second
 * client's ack p99 during a 20,000-input flood was 73–95 ms here; with 32 and a yield every
 * {@linkcode SLICE_MS}, 38–59 ms over six bench runs, and a lone client's throughput (figure 1a)
 * unchanged.
 */
const MAX_BATCH = 32;
/** How long one connection's messages may hold the event loop before the others get it. */
const SLICE_MS = 4;
/** Bytes a socket may hold unsent before a catch-up waits for the client. */
const HIGH_WATER_BYTES = 1 << 20;
/** How long a catch-up waits for a client that reads nothing before closing it. */
const STALL_LIMIT_MS = 60_000;
/** How often held messages look whether their client read its answers (no event says so). */
const UNREAD_POLL_MS = 5;
/** `WebSocket.OPEN`, the same number for `ws`'s sockets. */
const OPEN = 1;

/** What one socket needs: the daemon's lanes, its credentials, the log and its place. */
export interface LaneSocketParts {
  host: LaneHost;
  auth: LaneAuth;
  log: Logger;
  place: Place;
}

/**
 * One `/v2` socket: its lane connection and the messages waiting for it. Messages that arrive
 * while a batch is handled wait and go together next: that is what lets admission commit many
 * at once.
 */
export class LaneSocket {
  readonly #registry: LaneRegistry;
  readonly #lane: LaneSocketParts;
  #connection: LaneConnection | undefined;
  #raw: NodeWebSocket | undefined;
  /** The TCP stream under `#raw`; corked while sends made together gather (`#sendText`). */
  #stream: Duplex | undefined;
  #untrack: (() => void) | undefined;
  /** Messages not handed to the connection yet, in arrival order, from `#head` on. */
  #held: Uint8Array[] = [];
  #head = 0;
  /** Whether the socket stopped reading because enough messages wait. */
  #paused = false;
  /** Whether a shutdown is settling the socket: it reads no more until it is closed. */
  #closing = false;
  /** Wakes a handler waiting for this connection's acknowledgements to drain. */
  #ackWaiter: (() => void) | undefined;
  readonly #handler = new SerialRunner(() => this.#handleBuffered());

  /** A socket of `registry` whose upgrade took `lane.place`. */
  constructor(registry: LaneRegistry, lane: LaneSocketParts) {
    this.#registry = registry;
    this.#lane = lane;
  }

  /**
   * Takes over the upgraded socket and the TCP stream under it: its connection opens, its
   * messages and close are this'. Returns how it settles before a shutdown closes it.
   */
  attach(ws: NodeWebSocket, stream: Duplex): () => Promise<void> {
    this.#stream = stream;
    this.#open(ws);
    ws.on("message", (data: Uint8Array, isBinary: boolean) => {
      this.#received(isBinary ? EMPTY : data);
    });
    ws.on("error", () => ws.terminate());
    ws.on("close", () => {
      this.#connection?.dispose();
      // A handler waiting for room sees the socket closed; what it held was never accepted.
      this.#acked();
      this.#untrack?.();
      this.#lane.place.release();
    });
    return () => this.#settle();
  }

  /**
   * Before a shutdown closes the socket: it stops reading, and resolves once every message it
   * read has been handed to the connection and answered (an input refused `shutting_down` or
   * acknowledged, a command answered). It reads again only so the close handshake completes.
   */
  async #settle(): Promise<void> {
    this.#closing = true;
    this.#raw?.pause();
    while (this.#head < this.#held.length && this.#raw?.readyState === OPEN) {
      await this.#handler.run();
    }
    await this.#handler.idle();
    await this.#connection?.settled();
    this.#raw?.resume();
  }

  /**
   * One message arrived: it is buffered, and handled strictly in arrival order with the rest of
   * the connection's messages; a binary frame is not JSON and is answered as such. Once as many
   * wait as the connection may leave unanswered, the socket stops reading.
   */
  #received(message: Uint8Array): void {
    this.#held.push(message);
    const waiting = this.#held.length - this.#head;
    const stats = this.#registry.stats;
    stats.peak_held_messages = Math.max(stats.peak_held_messages, waiting);
    if (!this.#paused && !this.#closing && waiting >= this.#registry.limits.maxUnackedInputs) {
      this.#paused = true;
      this.#raw?.pause();
    }
    // A run in progress takes this message too; its error is logged where it started, so a
    // flood of messages does not hang one more reaction each on the same promise.
    if (this.#handler.running) void this.#handler.run();
    else this.#handler.run().catch(this.#logFailure.bind(this));
  }

  #logFailure(error: unknown): void {
    const why = error instanceof Error ? error.stack ?? error.message : String(error);
    this.#lane.log.error("lane.internal", `lane connection error: ${why}`);
  }

  /**
   * Hands what arrived to the connection, batch by batch, until nothing waits; each batch at
   * most {@linkcode MAX_BATCH} messages and what keeps the connection's unanswered inputs within
   * their bound. A connection with more waiting gives the event loop to the rest of the daemon
   * once it has held it {@linkcode SLICE_MS}: a client that writes faster than it is answered
   * gets its share, and the others keep their latency (figures 1l and 1m of `bench/flood.ts`).
   */
  async #handleBuffered(): Promise<void> {
    let sliceStart = performance.now();
    while (this.#head < this.#held.length && this.#connection !== undefined) {
      const room = await this.#room(this.#connection);
      if (room === 0) return;
      const end = Math.min(this.#head + Math.min(room, MAX_BATCH), this.#held.length);
      const batch = this.#held.slice(this.#head, end).map((bytes) => decoder.decode(bytes));
      this.#head = end;
      // What was handed over is let go once it is the larger part (each message moves once).
      if (this.#head * 2 >= this.#held.length) {
        this.#held = this.#held.slice(this.#head);
        this.#head = 0;
      }
      this.#readAgainIfRoom();
      // accept answers every message, whatever fails; it does not wait for commits:
      // admission groups whatever is queued across connections (group commit).
      await this.#connection.accept(batch);
      if (this.#head < this.#held.length && performance.now() - sliceStart > SLICE_MS) {
        await yieldToSockets();
        sliceStart = performance.now();
      }
    }
  }

  /**
   * Resolves with how many more messages the connection may take now: it waits while its
   * unanswered inputs are at their bound or its client leaves too much unread. Resolves 0
   * once the socket is no longer open (what waits is never answered; nothing was accepted).
   */
  async #room(connection: LaneConnection): Promise<number> {
    const { limits, stats } = this.#registry;
    let paused = false;
    for (;;) {
      const raw = this.#raw;
      if (raw !== undefined && raw.readyState !== OPEN) return 0;
      const room = limits.maxUnackedInputs - connection.unacked;
      const unread = raw?.bufferedAmount ?? 0;
      if (room > 0 && unread <= limits.ackHighWaterBytes) return room;
      if (!paused) stats.input_paused++;
      paused = true;
      if (room > 0) await new Promise((resolve) => setTimeout(resolve, UNREAD_POLL_MS));
      else await new Promise<void>((resolve) => this.#ackWaiter = resolve);
    }
  }

  /** The socket reads again once fewer messages wait than the bound. */
  #readAgainIfRoom(): void {
    const waiting = this.#held.length - this.#head;
    if (!this.#paused || this.#closing) return;
    if (waiting >= this.#registry.limits.maxUnackedInputs) return;
    this.#paused = false;
    this.#raw?.resume();
  }

  /** Inputs of this connection were answered: a handler waiting for room looks again. */
  #acked(): void {
    const wake = this.#ackWaiter;
    this.#ackWaiter = undefined;
    wake?.();
  }

  /** The socket opened: its connection is made and registered; its place holds its deadline. */
  #open(ws: NodeWebSocket): void {
    const { host, auth, log, place } = this.#lane;
    const { stats, limits } = this.#registry;
    this.#raw = ws;
    const close = (code: number, why: string) => ws.close(code, why);
    const connection = new LaneConnection(host, {
      auth,
      send: (message) => this.#send(message),
      // A records batch is encoded once, as its records were read.
      sendText: (text) => this.#sendText(text),
      // Animation is lossy by contract: a client that does not read loses it, and the
      // daemon keeps no queue for it.
      sendLossy: (message) => {
        if ((this.#raw?.bufferedAmount ?? 0) > limits.liveHighWaterBytes) {
          stats.live_dropped++;
        } else this.#send(message);
      },
      admit: (role) => place.admit(role),
      close,
      writable: () => whenDrained(this.#raw),
      acked: () => this.#acked(),
      log,
    });
    this.#connection = connection;
    this.#untrack = this.#registry.track({ connection, close });
    place.opened(close);
  }

  /**
   * Sends text while the socket is open, noting the most it ever held unsent. Sends made
   * together leave in one write: the first corks the TCP stream and queues a microtask that
   * uncorks it, so the acks of a committed group cost one system call, not one each (figures 1a
   * and 1b of `bench/peers/admission_rows.ts`). No send waits for a later task.
   */
  #sendText(text: string): void {
    const raw = this.#raw;
    if (raw === undefined || raw.readyState !== OPEN) return;
    const stream = this.#stream;
    if (stream !== undefined && stream.writableCorked === 0) {
      stream.cork();
      queueMicrotask(() => stream.uncork());
    }
    raw.send(text);
    const stats = this.#registry.stats;
    stats.peak_buffered_bytes = Math.max(stats.peak_buffered_bytes, raw.bufferedAmount);
  }

  #send(message: ServerMessage): void {
    this.#sendText(JSON.stringify(message));
  }
}

/**
 * Resolves after a timer, which lets the event loop read the daemon's other sockets first (a
 * message port's turn did not, measured with figure 1l).
 */
function yieldToSockets(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 0));
}

/**
 * Resolves once the socket's unsent bytes fall under the high-water mark, or it closes. It
 * first gives the event loop one turn: what `send` queued leaves for the kernel only then, so
 * a catch-up that never yielded would hold its pages unsent and the client idle. A turn costs
 * tens of microseconds; a timer, even `setTimeout(0)`, costs a millisecond or more here.
 */
async function whenDrained(socket: NodeWebSocket | undefined): Promise<void> {
  if (socket === undefined) return;
  await nextMacrotask();
  const deadline = Date.now() + STALL_LIMIT_MS;
  while (socket.readyState === OPEN && socket.bufferedAmount > HIGH_WATER_BYTES) {
    if (Date.now() > deadline) {
      socket.close(1013, "client too slow to read its catch-up");
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
}
