/**
 * The page's one connection to the daemon's `/v2` lane socket: says `hello` with the last
 * `seq` it holds, keeps every durable record once, re-sends unacknowledged inputs, and
 * reconnects with a capped backoff when the socket drops.
 *
 * It renders nothing: components read its state and subscribe to changes.
 *
 * @module
 */

import type { ClientMessage, ServerMessage } from "../../runtime/protocol.ts";
import { isObject, text } from "./_fields.ts";
import { InputOutbox, type KeyValueStore, type PendingInput } from "./input_outbox.ts";
import { localMessageId } from "./lane_view.ts";
import { isLaneRecord, RecordLog } from "./record_log.ts";

/** Where the connection stands. */
export type ConnectionPhase = "connecting" | "open" | "unreachable" | "gave_up" | "stopped";

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
  role: "client" | "operator" | undefined;
  head: number | undefined;
  /** Whether the catch-up of the current connection has ended. */
  replayed: boolean;
  serverVersion: string | undefined;
}

/** Whether the operator token was accepted at the last `hello`. */
export type TokenStatus = "none" | "unverified" | "accepted" | "rejected";

/** Lossy live output: model text per turn and cell output per cell. */
export interface LiveState {
  tokens: Map<string, string>;
  cells: Map<string, { stdout: string; stderr: string }>;
}

/** A refusal the daemon sent that no request of the page is waiting for. */
export interface Notice {
  at: number;
  code: string;
  message: string;
}

/** Options for {@linkcode LaneClient}. */
export interface LaneClientOptions {
  /** The socket URL, e.g. `ws://127.0.0.1:8765/v2`. */
  url: string;
  /** The session to follow. @default {"default"} */
  session?: string;
  /** This browser's stable client id (the dedupe scope of its inputs). */
  clientId: string;
  /** The operator token; the connection asks for the operator role when it is set. */
  token?: string;
  /** Where records and unsent inputs survive a reload (the page passes `sessionStorage`). */
  storage?: KeyValueStore;
  /** The WebSocket constructor. @default {globalThis.WebSocket} */
  webSocket?: new (url: string) => WebSocket;
  /** First retry delay. @default {250} */
  minDelayMs?: number;
  /** Largest retry delay. @default {2000} */
  maxDelayMs?: number;
  /** Stop retrying after this long unreachable (a button retries again). @default {1_800_000} */
  giveUpAfterMs?: number;
  /** Ping interval; a socket silent for two intervals is closed and reconnected. @default {15_000} */
  heartbeatMs?: number;
  /** Called when the daemon refused the token; the page forgets it. */
  onTokenRejected?: (message: string) => void;
}

/** An operator command that the daemon refused or that lost its connection. */
export class OperatorCommandError extends Error {
  /** The daemon's error code, or `connection_lost`. */
  readonly code: string;
  /** Creates the error. */
  constructor(code: string, message: string) {
    super(message);
    this.name = "OperatorCommandError";
    this.code = code;
  }
}

type OpMessage = Extract<ClientMessage, { kind: `op.${string}` }>;
type OpRequest = OpMessage extends infer M ? M extends OpMessage ? Omit<M, "request"> : never
  : never;

const LIVE_LIMIT = 200_000;
const STORED_LIMIT = 4_000_000;

function append(current: string | undefined, more: string): string {
  const next = (current ?? "") + more;
  return next.length > LIVE_LIMIT ? next.slice(next.length - LIVE_LIMIT) : next;
}

/**
 * The lane socket of one page.
 *
 * @example
 * ```ts
 * const client = new LaneClient({ url: "ws://127.0.0.1:8765/v2", clientId: "cl_1" });
 * client.subscribe(() => render(client));
 * client.start();
 * client.sendInput("hello");
 * ```
 */
export class LaneClient {
  /** The session followed. */
  readonly session: string;
  /** Every durable record received, once each. */
  readonly log: RecordLog;
  /** Inputs without a durable record yet. */
  readonly outbox: InputOutbox;
  /** Lossy live output. */
  readonly live: LiveState = { tokens: new Map(), cells: new Map() };
  /** Refusals nobody waited for, newest last (at most 20). */
  readonly notices: Notice[] = [];
  #o:
    & Required<Omit<LaneClientOptions, "token" | "storage" | "onTokenRejected">>
    & LaneClientOptions;
  #token: string | undefined;
  #tokenStatus: TokenStatus;
  #tokenError: string | undefined;
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
  #reconnectAtOnce = false;
  #retryTimer: ReturnType<typeof setTimeout> | undefined;
  #heartbeat: ReturnType<typeof setInterval> | undefined;
  #lastHeard = 0;
  #ops = new Map<
    string,
    { resolve: (r: Record<string, unknown>) => void; reject: (e: Error) => void }
  >();
  #listeners = new Set<() => void>();
  #notifyTimer: ReturnType<typeof setTimeout> | undefined;
  #persistTimer: ReturnType<typeof setTimeout> | undefined;
  #recordedMsgIds = new Set<string>();
  #recordedInputIds = new Set<string>();
  #acked = new Map<string, string>();
  #version = 0;

  /** Loads what `storage` kept for the session; connects only on {@linkcode start}. */
  constructor(options: LaneClientOptions) {
    this.#o = {
      session: "default",
      webSocket: globalThis.WebSocket,
      minDelayMs: 250,
      maxDelayMs: 2000,
      giveUpAfterMs: 1_800_000,
      heartbeatMs: 15_000,
      ...options,
    };
    this.session = this.#o.session;
    this.#token = options.token;
    this.#tokenStatus = options.token === undefined ? "none" : "unverified";
    let stored: unknown;
    try {
      stored = JSON.parse(options.storage?.getItem(this.#logKey) ?? "null");
    } catch {
      stored = null;
    }
    this.log = RecordLog.fromSnapshot(stored, this.session);
    this.outbox = new InputOutbox(options.storage, `klbr:outbox:${this.session}`);
    for (const record of this.log.records()) this.#index(record);
  }

  get #logKey(): string {
    return `klbr:log:${this.#o.session}`;
  }

  /** The connection's state. */
  get connection(): Readonly<ConnectionState> {
    return this.#state;
  }

  /** Whether the daemon accepted the token at the last `hello`. */
  get tokenStatus(): TokenStatus {
    return this.#tokenStatus;
  }

  /** The daemon's message for a refused token. */
  get tokenError(): string | undefined {
    return this.#tokenError;
  }

  /** Whether a token is set. */
  get hasToken(): boolean {
    return this.#token !== undefined;
  }

  /** Grows on every change; lets a view tell whether to render again. */
  get version(): number {
    return this.#version;
  }

  /** The input id the daemon acknowledged for one of this page's inputs. */
  inputIdOf(clientMsgId: string): string | undefined {
    return this.#acked.get(clientMsgId);
  }

  /** Calls `listener` (batched) after changes; returns the function that removes it. */
  subscribe(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Opens the socket. */
  start(): void {
    if (this.#state.phase === "stopped") this.#state.phase = "connecting";
    if (this.#ws === undefined && this.#retryTimer === undefined) this.#connect();
  }

  /** Closes the socket for good and saves the log. */
  stop(): void {
    this.#state.phase = "stopped";
    this.#clearTimers();
    const ws = this.#ws;
    this.#ws = undefined;
    ws?.close(1000, "page closed");
    this.persistNow();
    this.#rejectOps("connection_lost", "cannot finish the command: the page closed its socket");
  }

  /** Queues one input and sends it when the socket is open. */
  sendInput(text: string, conversation = "local:default"): PendingInput {
    const item = this.outbox.add(text, conversation);
    this.#sendPending();
    this.#changed();
    return item;
  }

  /** Queues a refused input again. */
  retryInput(clientMsgId: string): void {
    this.outbox.retry(clientMsgId);
    this.#sendPending();
    this.#changed();
  }

  /** Forgets a refused input. */
  discardInput(clientMsgId: string): void {
    this.outbox.discard(clientMsgId);
    this.#changed();
  }

  /**
   * Runs one operator command; resolves with the daemon's `result`.
   *
   * @throws {OperatorCommandError} with the daemon's code when it refuses, `not_connected`
   *   when the socket is not open, `connection_lost` when it drops before the answer (the
   *   command may or may not have run).
   */
  operate(message: OpRequest): Promise<Record<string, unknown>> {
    const ws = this.#ws;
    if (ws === undefined || this.#state.phase !== "open" || ws.readyState !== 1) {
      return Promise.reject(
        new OperatorCommandError("not_connected", "cannot send the command: not connected"),
      );
    }
    const request = `op-${crypto.randomUUID()}`;
    return new Promise((resolve, reject) => {
      this.#ops.set(request, { resolve, reject });
      ws.send(JSON.stringify({ ...message, request }));
    });
  }

  /** Sets or clears the operator token and reconnects with it. */
  setToken(token: string | undefined): void {
    this.#token = token === "" ? undefined : token;
    this.#tokenStatus = this.#token === undefined ? "none" : "unverified";
    this.#tokenError = undefined;
    this.#reconnect();
  }

  /** Retries now, also after giving up. */
  retryNow(): void {
    if (this.#state.phase === "open" || this.#state.phase === "stopped") return;
    this.#clearTimers();
    this.#state.failures = 0;
    if (this.#state.phase === "gave_up") this.#state.downSince = Date.now();
    this.#connect();
  }

  /** Writes the log to storage now (the page calls it on `pagehide`). */
  persistNow(): void {
    if (this.#persistTimer !== undefined) clearTimeout(this.#persistTimer);
    this.#persistTimer = undefined;
    const storage = this.#o.storage;
    if (storage === undefined) return;
    try {
      const json = JSON.stringify(this.log.toSnapshot());
      // Too large to keep: a reload then replays from 0, which the log dedupes by seq.
      if (json.length > STORED_LIMIT) storage.removeItem(this.#logKey);
      else storage.setItem(this.#logKey, json);
    } catch {
      try {
        storage.removeItem(this.#logKey);
      } catch { /* storage unavailable: replay from 0 on reload */ }
    }
  }

  #connect(): void {
    this.#retryTimer = undefined;
    if (this.#state.phase === "stopped") return;
    const ws = new this.#o.webSocket(this.#o.url);
    this.#ws = ws;
    this.#state.replayed = false;
    ws.onopen = () => {
      if (ws !== this.#ws) return;
      const hello: Record<string, unknown> = {
        kind: "hello",
        session: this.session,
        since: this.log.lastSeq,
        client: this.#o.clientId,
      };
      if (this.#token !== undefined) hello.token = this.#token;
      ws.send(JSON.stringify(hello));
    };
    ws.onmessage = (event) => {
      if (ws !== this.#ws) return;
      this.#lastHeard = Date.now();
      let message: unknown;
      try {
        message = JSON.parse(String(event.data));
      } catch {
        return;
      }
      if (isObject(message)) this.#receive(ws, message as ServerMessage);
    };
    ws.onclose = (event) => {
      if (ws === this.#ws) this.#closed(event.code);
    };
    ws.onerror = () => {/* a close event follows */};
  }

  #receive(ws: WebSocket, message: ServerMessage): void {
    switch (message.kind) {
      case "welcome":
        return this.#welcome(ws, message);
      case "record":
        if (!isLaneRecord(message) || message.session !== this.session) return;
        if (this.log.add(message)) {
          this.#index(message);
          this.#schedulePersist();
          this.#changed();
        }
        return;
      case "replayed":
        this.#state.replayed = true;
        return this.#changed();
      case "ack":
        if (this.outbox.ack(message.request, message)) {
          const item = this.outbox.list().find((i) => i.request === message.request);
          if (item !== undefined) this.#acked.set(item.clientMsgId, message.input_id);
          this.outbox.settle({
            clientMsgIds: this.#recordedMsgIds,
            inputIds: this.#recordedInputIds,
          });
          this.#changed();
        }
        return;
      case "op.result": {
        const op = this.#ops.get(message.request);
        this.#ops.delete(message.request);
        op?.resolve(isObject(message.result) ? message.result : {});
        return;
      }
      case "error":
        return this.#error(message);
      case "token":
        this.live.tokens.set(
          message.turn,
          append(this.live.tokens.get(message.turn), message.text),
        );
        return this.#changed();
      case "cell.output": {
        const cell = this.live.cells.get(message.cell) ?? { stdout: "", stderr: "" };
        cell[message.name === "stderr" ? "stderr" : "stdout"] = append(
          cell[message.name === "stderr" ? "stderr" : "stdout"],
          message.text,
        );
        this.live.cells.set(message.cell, cell);
        return this.#changed();
      }
    }
  }

  #welcome(ws: WebSocket, message: Extract<ServerMessage, { kind: "welcome" }>): void {
    if (message.head < this.log.lastSeq) {
      // The daemon's log is shorter than ours: it is a different (re-created) store. Start over.
      this.log.clear();
      this.#recordedMsgIds.clear();
      this.#recordedInputIds.clear();
      this.persistNow();
      this.#reconnectAtOnce = true;
      ws.close(1000, "log reset");
      return;
    }
    const now = Date.now();
    if (this.#state.downSince !== undefined) this.#state.recoveredAt = now;
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
    if (message.role === "operator") this.#tokenStatus = "accepted";
    this.#startHeartbeat(ws);
    this.#sendPending();
    this.#changed();
  }

  #error(message: Extract<ServerMessage, { kind: "error" }>): void {
    const request = message.request;
    if (request !== undefined && this.outbox.fail(request, message)) return this.#changed();
    const op = request === undefined ? undefined : this.#ops.get(request);
    if (op !== undefined && request !== undefined) {
      this.#ops.delete(request);
      op.reject(new OperatorCommandError(message.code, message.message));
      return;
    }
    if (message.code.startsWith("token_")) {
      // The daemon closes the socket (4401) next; reconnect as a plain client at once.
      this.#token = undefined;
      this.#tokenStatus = "rejected";
      this.#tokenError = message.message;
      this.#reconnectAtOnce = true;
      this.#o.onTokenRejected?.(message.message);
      return this.#changed();
    }
    this.notices.push({ at: Date.now(), code: message.code, message: message.message });
    if (this.notices.length > 20) this.notices.shift();
    this.#changed();
  }

  #closed(code: number): void {
    this.#ws = undefined;
    this.#stopHeartbeat();
    this.live.tokens.clear();
    this.live.cells.clear();
    this.#rejectOps(
      "connection_lost",
      "cannot confirm the command: the connection dropped before the answer (it may have run)",
    );
    if (this.#state.phase === "stopped") return;
    this.#state.role = undefined;
    this.#state.replayed = false;
    if (code === 4401 && this.#token !== undefined) {
      // Refused without an error message we saw: never retry the same token in a loop.
      this.#token = undefined;
      this.#tokenStatus = "rejected";
      this.#o.onTokenRejected?.("the daemon closed the socket (4401)");
    }
    if (this.#reconnectAtOnce || code === 4401) {
      this.#reconnectAtOnce = false;
      if (this.#state.phase === "open") this.#state.phase = "connecting";
      this.#connect();
      return this.#changed();
    }
    const now = Date.now();
    this.#state.downSince ??= now;
    this.#state.recoveredAt = undefined;
    this.#state.failures++;
    if (now - this.#state.downSince >= this.#o.giveUpAfterMs) {
      this.#state.phase = "gave_up";
      this.#state.retryAt = undefined;
      return this.#changed();
    }
    const delay = Math.min(
      this.#o.maxDelayMs,
      this.#o.minDelayMs * 2 ** Math.min(this.#state.failures - 1, 10),
    );
    this.#state.phase = "unreachable";
    this.#state.retryAt = now + delay;
    this.#retryTimer = setTimeout(() => this.#connect(), delay);
    this.#changed();
  }

  #reconnect(): void {
    const ws = this.#ws;
    if (ws === undefined) {
      this.retryNow();
      return this.#changed();
    }
    this.#reconnectAtOnce = true;
    ws.close(1000, "reconnecting");
    this.#changed();
  }

  #sendPending(): void {
    const ws = this.#ws;
    if (ws === undefined || this.#state.phase !== "open" || ws.readyState !== 1) return;
    for (const item of this.outbox.unacknowledged()) {
      const message: Extract<ClientMessage, { kind: "input" }> = {
        kind: "input",
        request: item.request,
        client_msg_id: item.clientMsgId,
        text: item.text,
        conversation: item.conversation,
        author: "owner",
      };
      ws.send(JSON.stringify(message));
      this.outbox.markSent(item.request);
    }
  }

  #index(record: { type: string; data: Record<string, unknown> }): void {
    const d = record.data;
    if (record.type === "input.admitted") {
      const inputId = text(d, "input_id");
      if (inputId !== undefined) this.#recordedInputIds.add(inputId);
      const msgId = text(d, "client_msg_id") ?? localMessageId(text(d, "dedupe_key"));
      if (msgId !== undefined) {
        this.#recordedMsgIds.add(msgId);
        if (inputId !== undefined) this.#acked.set(msgId, inputId);
      }
      this.outbox.settle({ clientMsgIds: this.#recordedMsgIds, inputIds: this.#recordedInputIds });
    } else if (record.type === "scratchpad" || record.type === "turn.ended") {
      // The durable text replaces the animation that led to it.
      const turn = text(d, "turn_id", "turn", "frame_id");
      if (turn === undefined) this.live.tokens.clear();
      else this.live.tokens.delete(turn);
    } else if (record.type === "cell.finished") {
      const cell = text(d, "cell_id", "cell");
      if (cell !== undefined) this.live.cells.delete(cell);
    }
  }

  #startHeartbeat(ws: WebSocket): void {
    this.#stopHeartbeat();
    this.#lastHeard = Date.now();
    this.#heartbeat = setInterval(() => {
      if (ws !== this.#ws) return;
      if (Date.now() - this.#lastHeard > 2 * this.#o.heartbeatMs) {
        ws.close(4000, "no answer to ping");
        return;
      }
      if (ws.readyState === 1) ws.send(JSON.stringify({ kind: "ping" }));
    }, this.#o.heartbeatMs);
  }

  #stopHeartbeat(): void {
    if (this.#heartbeat !== undefined) clearInterval(this.#heartbeat);
    this.#heartbeat = undefined;
  }

  #clearTimers(): void {
    this.#stopHeartbeat();
    if (this.#retryTimer !== undefined) clearTimeout(this.#retryTimer);
    this.#retryTimer = undefined;
    if (this.#notifyTimer !== undefined) clearTimeout(this.#notifyTimer);
    this.#notifyTimer = undefined;
  }

  #rejectOps(code: string, message: string): void {
    for (const op of this.#ops.values()) op.reject(new OperatorCommandError(code, message));
    this.#ops.clear();
  }

  #schedulePersist(): void {
    if (this.#persistTimer !== undefined || this.#o.storage === undefined) return;
    this.#persistTimer = setTimeout(() => this.persistNow(), 300);
  }

  #changed(): void {
    this.#version++;
    if (this.#notifyTimer !== undefined) return;
    this.#notifyTimer = setTimeout(() => {
      this.#notifyTimer = undefined;
      for (const listener of [...this.#listeners]) listener();
    }, 16);
  }
}
