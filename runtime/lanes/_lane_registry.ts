/**
 * Where each `/v2` socket stands, from its upgrade to its close, and the bounds on them: a
 * socket first waits for hello (a place among at most `maxPendingHello`, closed at the hello
 * deadline), then holds a lane. Waiting sockets never count against the lanes' cap, so sockets
 * that never send a byte cannot keep the owner out; when every waiting place is taken, the
 * oldest waiting socket is closed to make room, so an upgrade is never refused for them either.
 * The lanes' cap (`maxConnections`) refuses only viewers: the operator's hello always gets a
 * lane, past the cap if need be, since only the token's holder can open one.
 *
 * @module
 */

import { type ClientRole, KlbrError } from "../core/mod.ts";
import type { LaneConnection } from "./_lane_connection.ts";
import type { RefusalLog } from "./_refusals.ts";

/** The bounds of the lane server; every default lives here. */
export interface LaneLimits {
  /** Lanes (sockets that said hello) at once; past it a viewer's hello is refused. @default {64} */
  maxConnections: number;
  /** Sockets waiting for hello at once; past it the oldest is closed. @default {256} */
  maxPendingHello: number;
  /** How long a socket may stay open without saying hello. @default {3_000} */
  helloTimeoutMs: number;
  /** Unsent bytes above which lossy animation is dropped for that client. @default {1 MiB} */
  liveHighWaterBytes: number;
  /**
   * Inputs one connection may have received and not yet acknowledged; past it, or while the
   * client leaves more than {@linkcode LaneLimits.ackHighWaterBytes} unread, that
   * connection's messages wait, in order, until its acknowledgements drain. @default {256}
   */
  maxUnackedInputs: number;
  /** Unsent bytes above which a connection's messages wait for its client to read. @default {1 MiB} */
  ackHighWaterBytes: number;
}

/** The defaults of {@linkcode LaneLimits}. */
export const DEFAULT_LANE_LIMITS: LaneLimits = {
  maxConnections: 64,
  maxPendingHello: 256,
  helloTimeoutMs: 3_000,
  liveHighWaterBytes: 1 << 20,
  maxUnackedInputs: 256,
  ackHighWaterBytes: 1 << 20,
};

/** What the lane server counts, for `/health`. */
export interface LaneStats {
  /** Open lanes: sockets that said hello and were let in. */
  connections: number;
  /** Upgraded sockets that have not said hello yet. */
  pending: number;
  /** Viewers' hellos refused at the cap since start. */
  refused_connections: number;
  /** Waiting sockets closed to make room for newer ones since start. */
  evicted_pending: number;
  /** Refused `POST /auth` attempts since start. */
  auth_refused: number;
  /** Of those, the ones answered 429 because their source was past its rate. */
  auth_limited: number;
  /** Lossy messages dropped because their client was not reading. */
  live_dropped: number;
  /** The most unsent bytes any connection held right after a send. */
  peak_buffered_bytes: number;
  /** Times a connection's messages waited for its acknowledgements to drain. */
  input_paused: number;
  /** The most messages any connection held received and not yet handled. */
  peak_held_messages: number;
}

/** An open lane as the registry holds it, for closing on a token rotation. */
export interface OpenLane {
  connection: LaneConnection;
  close(code: number, why: string): void;
}

/** What every place of one registry shares. */
interface Shared {
  stats: LaneStats;
  limits: LaneLimits;
  waiting: Set<Place>;
  refusals: RefusalLog;
}

/**
 * One socket's place from its upgrade to its close: waiting for hello, then a lane, then gone.
 */
export class Place {
  readonly #shared: Shared;
  /** Where the upgrade came from, for the log. */
  readonly source: string;
  #state: "waiting" | "lane" | "gone" = "waiting";
  #close: ((code: number, why: string) => void) | undefined;
  /** Why the place ended before its socket opened: the socket is closed so once it does. */
  #endedWith: [number, string] | undefined;
  readonly #deadline: ReturnType<typeof setTimeout>;

  /** Takes a waiting place; the caller made room for it. */
  constructor(shared: Shared, source: string) {
    this.#shared = shared;
    this.source = source;
    shared.waiting.add(this);
    shared.stats.pending++;
    this.#deadline = setTimeout(() => this.#expire(), shared.limits.helloTimeoutMs);
  }

  /** The socket opened; `close` ends it (at once when the place already ended). */
  opened(close: (code: number, why: string) => void): void {
    this.#close = close;
    if (this.#endedWith !== undefined) close(...this.#endedWith);
  }

  /**
   * Turns the waiting place into a lane for a client granted `role` at hello.
   *
   * @throws {KlbrError} `too_many_connections` for a viewer when the lanes are at the cap, or
   * when the socket was already closed for waiting too long or to make room.
   */
  admit(role: ClientRole): void {
    const { stats, limits } = this.#shared;
    if (this.#state !== "waiting") {
      throw new KlbrError(
        "too_many_connections",
        "cannot say hello: this socket was closed before its hello was read (got a hello after)",
        { status: 503 },
      );
    }
    if (role === "viewer" && stats.connections >= limits.maxConnections) {
      stats.refused_connections++;
      throw new KlbrError(
        "too_many_connections",
        `cannot open a lane: the daemon holds its limit of ${limits.maxConnections} lanes, past which only the operator is let in (got a viewer's hello)`,
        { status: 503 },
      );
    }
    this.#leaveWaiting();
    this.#state = "lane";
    stats.connections++;
  }

  /** The socket closed (or never opened): the place is given back. Twice is harmless. */
  release(): void {
    if (this.#state === "waiting") this.#leaveWaiting();
    else if (this.#state === "lane") this.#shared.stats.connections--;
    this.#state = "gone";
  }

  /** Closes a waiting socket to make room for a newer upgrade. */
  evict(): void {
    this.#shared.stats.evicted_pending++;
    this.#shared.refusals.warn("lane.evicted", {
      source: this.source,
      message:
        `closed a socket that had not said hello, to make room: ${this.#shared.limits.maxPendingHello} were waiting`,
    });
    this.#end(1013, "too many sockets waiting for hello");
  }

  #expire(): void {
    if (this.#state !== "waiting") return;
    const ms = this.#shared.limits.helloTimeoutMs;
    this.#shared.refusals.warn("lane.hello_timeout", {
      source: this.source,
      message: `closed a lane that did not say hello in time (${ms} ms)`,
    });
    this.#end(4408, `no hello within ${ms} ms`);
  }

  #end(code: number, why: string): void {
    this.#leaveWaiting();
    this.#state = "gone";
    if (this.#close !== undefined) this.#close(code, why);
    else this.#endedWith = [code, why];
  }

  #leaveWaiting(): void {
    clearTimeout(this.#deadline);
    if (this.#shared.waiting.delete(this)) this.#shared.stats.pending--;
  }
}

/** The sockets waiting for hello, the open lanes, and what they cost. */
export class LaneRegistry {
  readonly stats: LaneStats = {
    connections: 0,
    pending: 0,
    refused_connections: 0,
    evicted_pending: 0,
    auth_refused: 0,
    auth_limited: 0,
    live_dropped: 0,
    peak_buffered_bytes: 0,
    input_paused: 0,
    peak_held_messages: 0,
  };
  readonly #open = new Set<OpenLane>();
  readonly #shared: Shared;

  /** Creates a registry bound by `limits`, noting its refusals in `refusals`. */
  constructor(readonly limits: LaneLimits, refusals: RefusalLog) {
    this.#shared = { stats: this.stats, limits, waiting: new Set(), refusals };
  }

  /**
   * A waiting place for an upgrade from `source`. Never refuses: when every waiting place is
   * taken, the oldest waiting socket is closed to make room.
   */
  reserve(source: string): Place {
    const waiting = this.#shared.waiting;
    // A Set keeps insertion order: the first waiting place is the oldest.
    if (waiting.size >= this.limits.maxPendingHello) waiting.values().next().value?.evict();
    return new Place(this.#shared, source);
  }

  /** Holds an open lane until the returned function is called. */
  track(lane: OpenLane): () => void {
    this.#open.add(lane);
    return () => this.#open.delete(lane);
  }

  /** Closes every connection that holds the operator role (after a token rotation). */
  closeOperators(reason: string): void {
    for (const entry of [...this.#open]) {
      if (entry.connection.role === "operator") entry.close(4401, reason);
    }
  }
}
