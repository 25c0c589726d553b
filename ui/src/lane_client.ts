/**
 * The page's view of one session over the lane socket: keeps every durable record once (and
 * says `hello` with the last `seq` it holds), re-sends unacknowledged inputs, animates live
 * output, runs operator commands and says why the daemon refused the page.
 *
 * It renders nothing: components read its state and subscribe to changes.
 *
 * @module
 */

import type {
  ClientMessage,
  HealthReport,
  InputAttachment,
  ServerMessage,
  StatusResult,
} from "../../runtime/core/mod.ts";
import { isObject } from "./json_value.ts";
import { InputOutbox, type KeyValueStore, type PendingInput } from "./input_outbox.ts";
import { type ConnectionState, LaneSocket, type LaneSocketOptions } from "./lane_socket.ts";
import { LiveOutput } from "./live_output.ts";
import {
  OperatorCommandError,
  type OperatorRequest,
  OperatorRequests,
} from "./operator_requests.ts";
import { isLaneRecord, loadRecordLog, type RecordLog, saveRecordLog } from "./record_log.ts";

/** How many of the newest records a page opening a session asks for. */
export const HEAD_PAGE = 300;
/** How many records one "load earlier" asks for. */
export const EARLIER_PAGE = 300;
/** The most records the page keeps; past it the oldest are forgotten (and can be paged in). */
export const MAX_HELD = 20_000;
/**
 * A stored log further than this behind the daemon's head is dropped at `welcome`, and the
 * page opens at the head instead of catching up on every record in between.
 */
export const REOPEN_GAP = 5_000;

/** A refusal the daemon sent that no request of the page is waiting for. */
export interface Notice {
  at: number;
  code: string;
  message: string;
}

/** Whether the daemon confines the workbench, as `/health` says it. */
export interface SandboxInfo {
  /** `bwrap` (confined) or `none` (unconfined). */
  mode: string;
  /** Why it is unconfined, or null. */
  reason: string | null;
  /** Whether confined children may use the network. */
  network: boolean;
}

/** What `/health` says: the sandbox, and whether the daemon is `ok`, `degraded` or `failing`. */
export interface HealthInfo {
  sandbox: SandboxInfo | undefined;
  /** `ok`, `degraded` or `failing`; `unknown` when `/health` gave no status. */
  status: string;
  /** Why it is not `ok`, one sentence each. */
  reasons: string[];
  /** The model's state (`ok`, `failing`, `stalled`) and its error, when `/health` said. */
  model: { state: string; error: string | null; route: string | null } | undefined;
  /** The whole report, when it parses with the daemon's schema (`HealthReport`). */
  report?: HealthReport | undefined;
}

/** Options for {@linkcode LaneClient}; the socket's own options pass through. */
export interface LaneClientOptions extends LaneSocketOptions {
  /** The session to follow. @default {"default"} */
  session?: string;
  /** This browser's stable client id (the dedupe scope of its inputs). */
  clientId: string;
  /** Where records and unsent inputs survive a reload (the page passes `sessionStorage`). */
  storage?: KeyValueStore;
  /** Called after each `welcome` (the page asks `/health` about the sandbox then). */
  onWelcome?: () => void;
}

/**
 * The lane client of one page.
 *
 * @example
 * ```ts
 * const client = new LaneClient({ url: "ws://127.0.0.1:8765/v2", clientId: "web-1" });
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
  readonly live: LiveOutput = new LiveOutput();
  /** Refusals nobody waited for, newest last (at most 20). */
  readonly notices: Notice[] = [];
  #o: LaneClientOptions;
  #socket: LaneSocket;
  #tokenError: string | undefined;
  #authError: { code: string; message: string } | undefined;
  #sandbox: SandboxInfo | undefined;
  #health: HealthInfo | undefined;
  #status: StatusResult | undefined;
  #ops = new OperatorRequests();
  #listeners = new Set<() => void>();
  #notifyTimer: ReturnType<typeof setTimeout> | undefined;
  #persistTimer: ReturnType<typeof setTimeout> | undefined;
  #version = 0;
  /** The request id of the `page` the page waits for, if any. */
  #earlierRequest: string | undefined;
  /** Why the daemon refused the last "load earlier", until the next one is sent. */
  #earlierRefusal: Notice | undefined;

  /** Loads what `storage` kept for the session; connects only on {@linkcode start}. */
  constructor(options: LaneClientOptions) {
    this.#o = options;
    this.session = options.session ?? "default";
    this.log = loadRecordLog(options.storage, this.session);
    this.outbox = new InputOutbox(options.storage, `klbr:outbox:${this.session}`);
    for (const record of this.log.records()) this.outbox.noteRecord(record);
    this.#socket = new LaneSocket(options, {
      hello: () => ({
        kind: "hello",
        session: this.session,
        // An empty log opens at the head with the newest page; a kept one resumes after it.
        ...(this.log.size === 0
          ? { since: "head" as const, page: HEAD_PAGE }
          : { since: this.log.lastSeq }),
        client: options.clientId,
        // Records come in batches (`records`), several to a message: a long catch-up is fast.
        batch: true,
      }),
      welcome: (message) => this.#welcome(message),
      message: (message) => this.#receive(message),
      closed: () => this.#closed(),
      changed: () => this.#changed(),
    });
  }

  /** The connection's state. */
  get connection(): Readonly<ConnectionState> {
    return this.#socket.state;
  }

  /** The daemon's message for a token it refused at `POST /auth`, until the next reconnect. */
  get tokenError(): string | undefined {
    return this.#tokenError;
  }

  /** Why the daemon refused this page's lane (no token or cookie), until it is let in. */
  get authError(): { code: string; message: string } | undefined {
    return this.#authError;
  }

  /** Whether the daemon confines the workbench, once the page has asked. */
  get sandbox(): SandboxInfo | undefined {
    return this.#sandbox;
  }

  /** What `/health` said last, once the page has asked. */
  get health(): HealthInfo | undefined {
    return this.#health;
  }

  /** Records what `/health` says (its sandbox too, when it names one). */
  setHealth(info: HealthInfo | undefined): void {
    this.#health = info;
    if (info?.sandbox !== undefined) this.#sandbox = info.sandbox;
    this.#changed();
  }

  /** What `op.status` said last, once the page (as the operator) has asked. */
  get status(): StatusResult | undefined {
    return this.#status;
  }

  /** Records what `op.status` says (undefined: the page can no longer ask). */
  setStatus(status: StatusResult | undefined): void {
    this.#status = status;
    this.#changed();
  }

  /** Records a token the daemon refused at `POST /auth`. */
  noteTokenRefused(message: string): void {
    this.#tokenError = message;
    this.#changed();
  }

  /** Opens a new socket at once (after the page got a session cookie). */
  reconnect(): void {
    this.#tokenError = undefined;
    this.#socket.reconnect();
    this.#changed();
  }

  /** Grows on every change; lets a view tell whether to render again. */
  get version(): number {
    return this.#version;
  }

  /** Calls `listener` (batched) after changes; returns the function that removes it. */
  subscribe(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Whether a "load earlier" is on its way. */
  get loadingEarlier(): boolean {
    return this.#earlierRequest !== undefined;
  }

  /**
   * Why the daemon refused the last "load earlier" (e.g. `store_unavailable`), until the next
   * one is sent; the page then asks again only when the person does.
   */
  get earlierRefusal(): Notice | undefined {
    return this.#earlierRefusal;
  }

  /** Whether the page holds as many records as it keeps, so it asks for no earlier ones. */
  get earlierCapped(): boolean {
    return this.log.size + EARLIER_PAGE > MAX_HELD;
  }

  /**
   * Asks for the page of `conversation`'s records before the oldest one held of it (its
   * inputs and the turns that took them up, however busy other conversations were); a no-op
   * while one is on its way, when there is none, when the page holds {@linkcode MAX_HELD}
   * records, or when offline.
   */
  loadEarlier(conversation: string): void {
    if (
      this.#earlierRequest !== undefined || !this.log.hasEarlierIn(conversation) ||
      this.earlierCapped
    ) return;
    const request = `pg-${crypto.randomUUID()}`;
    const sent = this.#socket.open && this.#socket.send({
      kind: "page",
      request,
      before: this.log.completeFrom(conversation),
      limit: EARLIER_PAGE,
      conversation,
    });
    if (!sent) return;
    this.#earlierRequest = request;
    this.#earlierRefusal = undefined;
    this.#changed();
  }

  /** Opens the socket. */
  start(): void {
    this.#socket.start();
  }

  /** Closes the socket for good and saves the log. */
  stop(): void {
    this.#socket.stop();
    if (this.#notifyTimer !== undefined) clearTimeout(this.#notifyTimer);
    this.#notifyTimer = undefined;
    this.persistNow();
    this.#ops.rejectAll("connection_lost", "cannot finish the command: the page closed its socket");
  }

  /** Queues one input and sends it when the socket is open. */
  sendInput(
    text: string,
    conversation = "local:default",
    options: { attachments?: InputAttachment[] } = {},
  ): PendingInput {
    const item = this.outbox.add(text, conversation, options);
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
  operate(message: OperatorRequest): Promise<Record<string, unknown>> {
    const request = `op-${crypto.randomUUID()}`;
    if (!this.#socket.open) {
      return Promise.reject(
        new OperatorCommandError("not_connected", "cannot send the command: not connected"),
      );
    }
    const answer = this.#ops.add(request);
    this.#socket.send({ ...message, request });
    return answer;
  }

  /** Retries now, also after giving up. */
  retryNow(): void {
    this.#socket.retryNow();
  }

  /** Writes the log to storage now (the page calls it on `pagehide`). */
  persistNow(): void {
    if (this.#persistTimer !== undefined) clearTimeout(this.#persistTimer);
    this.#persistTimer = undefined;
    saveRecordLog(this.#o.storage, this.log);
  }

  #welcome(message: Extract<ServerMessage, { kind: "welcome" }>): boolean {
    if (message.head < this.log.lastSeq) {
      this.#startOver();
      return false;
    }
    if (this.log.size > 0 && message.head - this.log.lastSeq > REOPEN_GAP) {
      // Far behind: open at the head rather than catch up on every record in between.
      this.log.clear();
      this.persistNow();
      return false;
    }
    this.#authError = undefined;
    this.#o.onWelcome?.();
    // The socket is open once this returns; send what waits on the next tick, including what
    // an earlier socket took but never acknowledged.
    queueMicrotask(() => this.#sendPending(true));
    return true;
  }

  #receive(message: ServerMessage): void {
    switch (message.kind) {
      case "record":
        if (this.#apply(message)) this.#recordsChanged();
        return;
      case "records": {
        // A batch is consecutive records in order, each as a `record` message carries it.
        if (message.session !== this.session || !Array.isArray(message.records)) return;
        let added = false;
        for (const record of message.records) added = this.#apply(record) || added;
        if (added) this.#recordsChanged();
        return;
      }
      case "page": {
        if (message.request !== this.#earlierRequest) return;
        this.#earlierRequest = undefined;
        if (message.session !== this.session || !Array.isArray(message.records)) {
          return this.#changed();
        }
        if (message.conversation !== undefined) this.log.holdCompleteFrom();
        for (const record of message.records) this.#apply(record);
        if (message.conversation !== undefined) {
          // Nothing of it before `from` when the daemon says there is no more.
          const from = message.more ? message.from ?? message.before : 1;
          this.log.noteConversationFrom(message.conversation, from);
        } else {
          this.log.noteCompleteFrom(message.more ? message.records[0]?.seq ?? 1 : 1);
        }
        return this.#recordsChanged();
      }
      case "ack":
        if (this.outbox.ack(message.request, message)) this.#changed();
        return;
      case "op.result":
        this.#ops.resolve(message.request, isObject(message.result) ? message.result : {});
        return;
      case "error":
        return this.#error(message);
      case "token":
        if (message.reasoning) this.live.addReasoning(message.turn, message.text);
        else this.live.addToken(message.turn, message.text);
        return this.#changed();
      case "cell.output":
        this.live.addCellOutput(
          message.cell,
          message.name === "stderr" ? "stderr" : "stdout",
          message.text,
        );
        return this.#changed();
    }
  }

  /** Keeps one record (once); `true` when it was new. */
  #apply(record: unknown): boolean {
    if (!isLaneRecord(record) || record.session !== this.session) return false;
    if (!this.log.add(record)) return false;
    this.outbox.noteRecord(record);
    this.live.settle(record);
    return true;
  }

  #recordsChanged(): void {
    this.log.trimOldest(MAX_HELD);
    this.#schedulePersist();
    this.#changed();
  }

  #error(message: Extract<ServerMessage, { kind: "error" }>): void {
    const request = message.request;
    if (request !== undefined && this.outbox.fail(request, message)) return this.#changed();
    if (request !== undefined && this.#ops.reject(request, message.code, message.message)) return;
    if (request !== undefined && request === this.#earlierRequest) {
      // No `page` answer follows: the "load earlier" is over, and says why.
      this.#earlierRequest = undefined;
      this.#earlierRefusal = { at: Date.now(), code: message.code, message: message.message };
      return this.#changed();
    }
    if (message.code.startsWith("token_")) {
      // The daemon closes the socket (4401) next; the page waits to be let in.
      this.#authError = { code: message.code, message: message.message };
      return this.#changed();
    }
    if (message.code === "since_beyond_head") {
      this.#startOver();
      this.#socket.reconnect();
      return this.#changed();
    }
    this.notices.push({ at: Date.now(), code: message.code, message: message.message });
    if (this.notices.length > 20) this.notices.shift();
    this.#changed();
  }

  /** The daemon's log is shorter than ours: a different (re-created) store. Start over. */
  #startOver(): void {
    this.log.clear();
    this.outbox.forgetRecords();
    this.persistNow();
  }

  #closed(): void {
    this.live.clear();
    this.#earlierRequest = undefined;
    this.#ops.rejectAll(
      "connection_lost",
      "cannot confirm the command: the connection dropped before the answer (it may have run)",
    );
  }

  /**
   * Writes queued inputs to the open socket. Each is written once per socket: an input already
   * written to this socket waits for its `ack`; only a fresh socket (`fresh`, after `welcome`)
   * writes again those an earlier socket took without acknowledging them.
   */
  #sendPending(fresh = false): void {
    if (!this.#socket.open) return;
    const due = fresh ? this.outbox.unacknowledged() : this.outbox.queued();
    for (const item of due) {
      const message: Extract<ClientMessage, { kind: "input" }> = {
        kind: "input",
        request: item.request,
        client_msg_id: item.clientMsgId,
        text: item.text,
        conversation: item.conversation,
        author: "owner",
        ...(item.attachments ? { attachments: item.attachments } : {}),
      };
      if (!this.#socket.send(message)) return;
      this.outbox.markSent(item.request);
    }
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
