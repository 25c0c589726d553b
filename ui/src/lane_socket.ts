/**
 * The WebSocket under the page's lane client: opens it, says `hello`, waits for `welcome`,
 * pings while it is open, and after a drop reconnects with a capped backoff — bounded in
 * time, after which only an explicit retry starts again.
 *
 * It knows nothing of records or inputs; {@linkcode LaneClient} does.
 *
 * @module
 */

import type { ServerMessage } from "../../runtime/core/mod.ts";
import { isObject } from "./json_value.ts";

/**
 * Where the connection stands. `unauthorised`: the daemon refused the lane (no token or
 * session cookie); nothing is retried until {@linkcode LaneSocket.reconnect}.
 */
export type ConnectionPhase =
  | "connecting"
  | "open"
  | "unreachable"
  | "gave_up"
  | "unauthorised"
  | "stopped";

/** What the page shows about the connection. */
export interface ConnectionState {
  phase: ConnectionPhase;
  /** When the daemon was first found unreachable in the current outage. */
  downSince: number | undefined;
  /** When the connection came back after an outage; cleared by the next outage. */
  recoveredAt: number | undefined;
  /** Failed attempts in the current outage. */
  failures: number;
  /** When the next attempt starts, while unreachable. */
  retryAt: number | undefined;
  role: "viewer" | "operator" | undefined;
  head: number | undefined;
  /** Whether the catch-up of the current connection has ended. */
  replayed: boolean;
  serverVersion: string | undefined;
}

/** Timing and transport of a {@linkcode LaneSocket}. */
export interface LaneSocketOptions {
  /** The socket URL, e.g. `ws://127.0.0.1:8765/v2`. */
  url: string;
  /** The WebSocket constructor. @default {globalThis.WebSocket} */
  webSocket?: new (url: string) => WebSocket;
  /** First retry delay. @default {250} */
  minDelayMs?: number;
  /** Largest retry delay. @default {2000} */
  maxDelayMs?: number;
  /** Stop retrying after this long unreachable (a button retries again). @default {1_800_000} */
  giveUpAfterMs?: number;
  /**
   * Ping interval; a socket silent for two intervals, or without a welcome after one, is
   * dropped and reconnected. @default {15_000}
   */
  heartbeatMs?: number;
}

/** What the socket asks of its owner. */
export interface LaneSocketHandlers {
  /** The `hello` to send on each new socket. */
  hello(): Record<string, unknown>;
  /** A `welcome`; returning `false` drops this socket and starts over at once. */
  welcome(message: Extract<ServerMessage, { kind: "welcome" }>): boolean;
  /** Any other message from the daemon. */
  message(message: ServerMessage): void;
  /** The socket closed (also when it was dropped for silence). */
  closed(): void;
  /** The connection state changed. */
  changed(): void;
}

/**
 * One reconnecting lane socket.
 *
 * @example
 * ```ts
 * const socket = new LaneSocket({ url }, handlers);
 * socket.start();
 * socket.send({ kind: "ping" });
 * ```
 */
export class LaneSocket {
  #o: Required<LaneSocketOptions>;
  #h: LaneSocketHandlers;
  #state: ConnectionState = {
    phase: "connecting",
    downSince: undefined,
    recoveredAt: undefined,
    failures: 0,
    retryAt: undefined,
    role: undefined,
    head: undefined,
    replayed: false,
    serverVersion: undefined,
  };
  #ws: WebSocket | undefined;
  #atOnce = false;
  /** A socket being closed to start over: what it still delivers is ignored. */
  #startingOver: WebSocket | undefined;
  #retryTimer: ReturnType<typeof setTimeout> | undefined;
  #heartbeat: ReturnType<typeof setInterval> | undefined;
  #welcomeTimer: ReturnType<typeof setTimeout> | undefined;
  #lastHeard = 0;

  /** Creates a socket that connects on {@linkcode start}. */
  constructor(options: LaneSocketOptions, handlers: LaneSocketHandlers) {
    this.#o = {
      webSocket: globalThis.WebSocket,
      minDelayMs: 250,
      maxDelayMs: 2000,
      giveUpAfterMs: 1_800_000,
      heartbeatMs: 15_000,
      ...options,
    };
    this.#h = handlers;
  }

  /** The connection's state. */
  get state(): Readonly<ConnectionState> {
    return this.#state;
  }

  /** Whether a message can be sent now (welcomed and open). */
  get open(): boolean {
    return this.#state.phase === "open" && this.#ws?.readyState === 1;
  }

  /** Opens the socket. */
  start(): void {
    if (this.#state.phase === "stopped") this.#state.phase = "connecting";
    if (this.#ws === undefined && this.#retryTimer === undefined) this.#connect();
  }

  /** Closes the socket for good. */
  stop(): void {
    this.#state.phase = "stopped";
    this.#clearTimers();
    const ws = this.#ws;
    this.#ws = undefined;
    ws?.close(1000, "page closed");
  }

  /** Sends one message; returns `false` when the socket is not open. */
  send(message: Record<string, unknown>): boolean {
    if (!this.open) return false;
    this.#ws!.send(JSON.stringify(message));
    return true;
  }

  /** Closes the current socket and opens a new one at once (e.g. with a new session cookie). */
  reconnect(): void {
    const ws = this.#ws;
    if (ws === undefined) return this.retryNow();
    this.#atOnce = true;
    ws.close(1000, "reconnecting");
  }

  /** Retries now, also after giving up; nothing when an attempt is under way. */
  retryNow(): void {
    if (this.#state.phase === "open" || this.#state.phase === "stopped") return;
    if (this.#ws !== undefined) return;
    this.#clearTimers();
    this.#state.failures = 0;
    if (this.#state.phase === "gave_up") this.#state.downSince = Date.now();
    if (this.#state.phase === "unauthorised") this.#state.phase = "connecting";
    this.#connect();
    this.#h.changed();
  }

  #connect(): void {
    this.#retryTimer = undefined;
    if (this.#state.phase === "stopped") return;
    const ws = new this.#o.webSocket(this.#o.url);
    this.#ws = ws;
    this.#state.replayed = false;
    ws.onopen = () => {
      if (ws !== this.#ws) return;
      // A mark the bench reads: how soon after this the newest messages are on screen.
      globalThis.performance?.mark?.("klbr:socket-open");
      ws.send(JSON.stringify(this.#h.hello()));
    };
    ws.onmessage = (event) => {
      if (ws !== this.#ws || ws === this.#startingOver) return;
      this.#lastHeard = Date.now();
      let message: unknown;
      try {
        message = JSON.parse(String(event.data));
      } catch {
        return;
      }
      if (!isObject(message)) return;
      const typed = message as ServerMessage;
      if (typed.kind === "welcome") this.#welcome(ws, typed);
      else if (typed.kind === "replayed") {
        this.#state.replayed = true;
        this.#h.changed();
      } else this.#h.message(typed);
    };
    ws.onclose = (event) => {
      if (ws === this.#ws) this.#closed(event.code);
    };
    ws.onerror = () => {/* a close event follows */};
    // A socket that opens but never says welcome (a hung daemon) counts as a failed attempt.
    this.#welcomeTimer = setTimeout(() => this.#abandon(ws), this.#o.heartbeatMs);
  }

  /** Gives up on a socket that stopped answering, without waiting for its close handshake. */
  #abandon(ws: WebSocket): void {
    ws.onopen =
      ws.onmessage =
      ws.onclose =
      ws.onerror =
        null;
    try {
      ws.close(4000, "no answer");
    } catch { /* already closed */ }
    if (ws === this.#ws) this.#closed(4000);
  }

  #welcome(ws: WebSocket, message: Extract<ServerMessage, { kind: "welcome" }>): void {
    if (!this.#h.welcome(message)) {
      this.#atOnce = true;
      this.#startingOver = ws;
      ws.close(1000, "starting over");
      return;
    }
    if (this.#state.downSince !== undefined) this.#state.recoveredAt = Date.now();
    this.#state = {
      ...this.#state,
      phase: "open",
      downSince: undefined,
      failures: 0,
      retryAt: undefined,
      role: message.role,
      head: message.head,
      serverVersion: message.server?.version,
    };
    this.#startHeartbeat(ws);
    this.#h.changed();
  }

  #closed(code: number): void {
    this.#ws = undefined;
    this.#stopHeartbeat();
    this.#state.role = undefined;
    this.#state.replayed = false;
    this.#h.closed();
    if (this.#state.phase === "stopped") return;
    // The owner asked for a new socket at once (e.g. the page got a session cookie, so the
    // next upgrade differs).
    if (this.#atOnce) {
      this.#atOnce = false;
      if (this.#state.phase === "open") this.#state.phase = "connecting";
      this.#connect();
      return this.#h.changed();
    }
    // 4401 with nothing to change: the same hello would be refused again. Wait for the owner.
    if (code === 4401) {
      this.#state.phase = "unauthorised";
      this.#state.retryAt = undefined;
      return this.#h.changed();
    }
    const now = Date.now();
    this.#state.downSince ??= now;
    this.#state.recoveredAt = undefined;
    this.#state.failures++;
    if (now - this.#state.downSince >= this.#o.giveUpAfterMs) {
      this.#state.phase = "gave_up";
      this.#state.retryAt = undefined;
      return this.#h.changed();
    }
    const delay = Math.min(
      this.#o.maxDelayMs,
      this.#o.minDelayMs * 2 ** Math.min(this.#state.failures - 1, 10),
    );
    this.#state.phase = "unreachable";
    this.#state.retryAt = now + delay;
    this.#retryTimer = setTimeout(() => this.#connect(), delay);
    this.#h.changed();
  }

  #startHeartbeat(ws: WebSocket): void {
    this.#stopHeartbeat();
    this.#lastHeard = Date.now();
    this.#heartbeat = setInterval(() => {
      if (ws !== this.#ws) return;
      if (Date.now() - this.#lastHeard > 2 * this.#o.heartbeatMs) return this.#abandon(ws);
      if (ws.readyState === 1) ws.send(JSON.stringify({ kind: "ping" }));
    }, this.#o.heartbeatMs);
  }

  #stopHeartbeat(): void {
    if (this.#heartbeat !== undefined) clearInterval(this.#heartbeat);
    this.#heartbeat = undefined;
    if (this.#welcomeTimer !== undefined) clearTimeout(this.#welcomeTimer);
    this.#welcomeTimer = undefined;
  }

  #clearTimers(): void {
    this.#stopHeartbeat();
    if (this.#retryTimer !== undefined) clearTimeout(this.#retryTimer);
    this.#retryTimer = undefined;
  }
}
