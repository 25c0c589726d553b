/**
 * The WebSocket under one `/v2` connection, and the bounds every client lives within: a cap
 * on open lanes, a deadline to say hello, lossy animation dropped for a client that does not
 * read, and a catch-up that waits for the client page by page.
 *
 * @module
 */

import type { WSContext, WSEvents } from "hono/ws";
import { type Logger, nextMacrotask, SerialRunner, type ServerMessage } from "../core/mod.ts";
import { type LaneAuth, LaneConnection, type LaneHost } from "./_lane_connection.ts";

/** The bounds of the lane server; every default lives here. */
export interface LaneLimits {
  /** Open `/v2` connections at once; the next upgrade is refused. @default {64} */
  maxConnections: number;
  /** How long a connection may stay open without saying hello. @default {10_000} */
  helloTimeoutMs: number;
  /** Unsent bytes above which lossy animation is dropped for that client. @default {1 MiB} */
  liveHighWaterBytes: number;
}

/** The defaults of {@linkcode LaneLimits}. */
export const DEFAULT_LANE_LIMITS: LaneLimits = {
  maxConnections: 64,
  helloTimeoutMs: 10_000,
  liveHighWaterBytes: 1 << 20,
};

/** What the lane server counts, for `/health`. */
export interface LaneStats {
  /** Open `/v2` connections. */
  connections: number;
  /** Upgrades refused at the cap since start. */
  refused_connections: number;
  /** Lossy messages dropped because their client was not reading. */
  live_dropped: number;
  /** The most unsent bytes any connection held right after a send. */
  peak_buffered_bytes: number;
}

/** A place under the connection cap, held from the upgrade to the close. */
export interface Reservation {
  /** The socket opened: the place is held until `release`. */
  opened(): void;
  /** Gives the place back. */
  release(): void;
}

/** Bytes a socket may hold unsent before a catch-up waits for the client. */
const HIGH_WATER_BYTES = 1 << 20;
/** How long a catch-up waits for a client that reads nothing before closing it. */
const STALL_LIMIT_MS = 60_000;

/** The open connections, their count against the cap, and what they dropped. */
export class LaneRegistry {
  readonly stats: LaneStats = {
    connections: 0,
    refused_connections: 0,
    live_dropped: 0,
    peak_buffered_bytes: 0,
  };
  readonly #open = new Set<OpenLane>();

  /** Creates a registry bound by `limits`. */
  constructor(readonly limits: LaneLimits) {}

  /**
   * Reserves a place under the cap for an upgrade, or counts the refusal and returns
   * undefined. `release` gives the place back (twice is harmless); a reservation whose
   * socket never opens is given back after the hello timeout.
   */
  reserve(): Reservation | undefined {
    if (this.stats.connections >= this.limits.maxConnections) {
      this.stats.refused_connections++;
      return undefined;
    }
    this.stats.connections++;
    let held = true;
    const release = () => {
      if (held) this.stats.connections--;
      held = false;
      clearTimeout(timer);
    };
    const timer = setTimeout(release, this.limits.helloTimeoutMs);
    return { opened: () => clearTimeout(timer), release };
  }

  /** Closes every connection that holds the operator role (after a token rotation). */
  closeOperators(reason: string): void {
    for (const entry of [...this.#open]) {
      if (entry.connection.role === "operator") entry.close(4401, reason);
    }
  }

  /**
   * The Hono WebSocket events of one connection. Messages that arrive while a batch is
   * handled wait and go together next: that is what lets admission commit many at once.
   */
  events(host: LaneHost, auth: LaneAuth, log: Logger, place: Reservation): WSEvents {
    return new LaneSocket(
      { stats: this.stats, limits: this.limits, open: this.#open },
      { host, auth, log, place },
    ).events();
  }
}

/** An open connection as the registry holds it. */
interface OpenLane {
  connection: LaneConnection;
  close(code: number, why: string): void;
}

/** One `/v2` socket: its lane connection, the messages waiting for it and its hello deadline. */
class LaneSocket {
  readonly #registry: { stats: LaneStats; limits: LaneLimits; open: Set<OpenLane> };
  readonly #lane: { host: LaneHost; auth: LaneAuth; log: Logger; place: Reservation };
  #connection: LaneConnection | undefined;
  #raw: WebSocket | undefined;
  #helloTimer: ReturnType<typeof setTimeout> | undefined;
  #entry: OpenLane | undefined;
  #buffered: string[] = [];
  readonly #handler = new SerialRunner(() => this.#handleBuffered());

  constructor(
    registry: { stats: LaneStats; limits: LaneLimits; open: Set<OpenLane> },
    lane: { host: LaneHost; auth: LaneAuth; log: Logger; place: Reservation },
  ) {
    this.#registry = registry;
    this.#lane = lane;
  }

  /** The Hono events of this socket. */
  events(): WSEvents {
    const { log, place } = this.#lane;
    return {
      onOpen: (_event, ws) => this.#open(ws),
      onMessage: (event) => {
        // Messages of one connection are handled strictly in arrival order; a binary frame is
        // not JSON and is answered as such.
        this.#buffered.push(typeof event.data === "string" ? event.data : "");
        this.#handler.run().catch((error) =>
          log.error("lane.internal", `lane connection error: ${error?.stack ?? error}`)
        );
      },
      onClose: () => {
        clearTimeout(this.#helloTimer);
        this.#connection?.dispose();
        if (this.#entry !== undefined) this.#registry.open.delete(this.#entry);
        place.release();
      },
    };
  }

  /** Hands what arrived to the connection, batch by batch, until nothing waits. */
  async #handleBuffered(): Promise<void> {
    while (this.#buffered.length > 0 && this.#connection !== undefined) {
      const batch = this.#buffered;
      this.#buffered = [];
      // accept answers every message, whatever fails; it does not wait for commits:
      // admission groups whatever is queued across connections (group commit).
      await this.#connection.accept(batch);
      if (this.#connection.greeted) clearTimeout(this.#helloTimer);
    }
  }

  /** The socket opened: its connection is made, registered and given its hello deadline. */
  #open(ws: WSContext): void {
    const { host, auth, log, place } = this.#lane;
    const { stats, limits, open } = this.#registry;
    this.#raw = ws.raw as WebSocket | undefined;
    place.opened();
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
      close,
      writable: () => whenDrained(this.#raw),
      log,
    });
    this.#connection = connection;
    this.#entry = { connection, close };
    open.add(this.#entry);
    this.#helloTimer = setTimeout(() => {
      if (this.#connection?.greeted) return;
      log.warn("lane.hello_timeout", "closed a lane that did not say hello in time", {
        timeout_ms: limits.helloTimeoutMs,
      });
      ws.close(4408, `no hello within ${limits.helloTimeoutMs} ms`);
    }, limits.helloTimeoutMs);
  }

  /** Sends text while the socket is open, noting the most it ever held unsent. */
  #sendText(text: string): void {
    const raw = this.#raw;
    if (raw === undefined || raw.readyState !== WebSocket.OPEN) return;
    raw.send(text);
    const stats = this.#registry.stats;
    stats.peak_buffered_bytes = Math.max(stats.peak_buffered_bytes, raw.bufferedAmount);
  }

  #send(message: ServerMessage): void {
    this.#sendText(JSON.stringify(message));
  }
}

/**
 * Resolves once the socket's unsent bytes fall under the high-water mark, or it closes. It
 * first gives the event loop one turn: what `send` queued leaves for the kernel only then, so
 * a catch-up that never yielded would hold its pages unsent and the client idle. A turn costs
 * tens of microseconds; a timer, even `setTimeout(0)`, costs a millisecond or more here.
 */
async function whenDrained(socket: WebSocket | undefined): Promise<void> {
  if (socket === undefined) return;
  await nextMacrotask();
  const deadline = Date.now() + STALL_LIMIT_MS;
  while (socket.readyState === WebSocket.OPEN && socket.bufferedAmount > HIGH_WATER_BYTES) {
    if (Date.now() > deadline) {
      socket.close(1013, "client too slow to read its catch-up");
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
}
