/**
 * The page's inputs that have no durable record yet: typed, maybe sent, maybe acknowledged.
 *
 * An input keeps its `client_msg_id` and `request` for life, so re-sending it after a dropped
 * socket or a reload is safe: the daemon answers a repeated `client_msg_id` with the first
 * input's id (`duplicate: true`). An input leaves the outbox once its `input.admitted` record
 * is in the page's log (matched by the record's `client_msg_id`, or by the acknowledged input
 * id); from then on the record is what the page shows.
 *
 * @module
 */

import { type InputAttachment, readRecord } from "../../runtime/core/mod.ts";
import { isObject } from "./json_value.ts";

/** The subset of the Web Storage API the page keeps its state in. */
export interface KeyValueStore {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
  removeItem(key: string): void;
}

/** Why the daemon refused an input; `retriable`: the same input may be taken later. */
export interface InputRefusal {
  code: string;
  message: string;
  retriable?: boolean;
}

/** Where an unrecorded input stands. */
export type PendingStatus = "queued" | "sent" | "acked" | "failed";

/** One input the page sent or will send. */
export interface PendingInput {
  clientMsgId: string;
  request: string;
  text: string;
  conversation: string;
  /** Files uploaded before the input was queued, sent with it every time. */
  attachments?: InputAttachment[];
  createdAt: number;
  status: PendingStatus;
  inputId?: string;
  seq?: number;
  duplicate?: boolean;
  error?: InputRefusal;
}

/** What an `ack` tells about an input. */
export interface AckFields {
  input_id: string;
  seq: number;
  duplicate: boolean;
}

function isPending(value: unknown): value is PendingInput {
  return isObject(value) && typeof value.clientMsgId === "string" &&
    typeof value.request === "string" && typeof value.text === "string" &&
    typeof value.conversation === "string" && typeof value.status === "string" &&
    (value.attachments === undefined || Array.isArray(value.attachments));
}

/**
 * The list of unrecorded inputs, kept in `storage` under `key` so a reload re-sends them.
 *
 * @example
 * ```ts
 * const outbox = new InputOutbox(sessionStorage, "klbr:outbox:default");
 * const item = outbox.add("hello", "local:default");
 * outbox.ack(item.request, { input_id: "in_…", seq: 4, duplicate: false });
 * ```
 */
export class InputOutbox {
  #items: PendingInput[] = [];
  #storage: KeyValueStore | undefined;
  #key: string;
  #recordedMsgIds = new Set<string>();
  #recordedInputIds = new Set<string>();
  #inputIds = new Map<string, string>();

  /** Loads the outbox kept under `key`, if any. */
  constructor(storage: KeyValueStore | undefined, key: string) {
    this.#storage = storage;
    this.#key = key;
    try {
      const stored = JSON.parse(storage?.getItem(key) ?? "[]");
      if (Array.isArray(stored)) this.#items = stored.filter(isPending);
    } catch {
      // A corrupt entry is dropped; inputs it held were either acknowledged or never sent.
      this.#items = [];
    }
  }

  /** Every unrecorded input, oldest first. */
  list(): readonly PendingInput[] {
    return this.#items;
  }

  /** Adds a new input with fresh ids, queued to be sent (with the files already uploaded). */
  add(
    text: string,
    conversation: string,
    options: { attachments?: InputAttachment[] } = {},
  ): PendingInput {
    const id = crypto.randomUUID();
    const item: PendingInput = {
      clientMsgId: id,
      request: `in-${id}`,
      text,
      conversation,
      ...(options.attachments?.length ? { attachments: options.attachments } : {}),
      createdAt: Date.now(),
      status: "queued",
    };
    this.#items.push(item);
    this.#save();
    return item;
  }

  /**
   * Inputs to send on a fresh connection: queued, sent without an acknowledgement, or refused
   * as retriable (e.g. `shutting_down`: the daemon that comes back takes them).
   */
  unacknowledged(): PendingInput[] {
    return this.#items.filter((item) =>
      item.status === "queued" || item.status === "sent" ||
      (item.status === "failed" && item.error?.retriable === true)
    );
  }

  /** Inputs not yet written to any socket. */
  queued(): PendingInput[] {
    return this.#items.filter((item) => item.status === "queued");
  }

  /** Marks an input as written to a socket (a retriable refusal is then behind it). */
  markSent(request: string): void {
    this.#update(request, (item) => {
      if (item.status === "failed" && item.error?.retriable !== true) return;
      if (item.status === "queued" || item.status === "failed") item.status = "sent";
      delete item.error;
    });
  }

  /** Records the daemon's acknowledgement; returns whether `request` was one of ours. */
  ack(request: string, ack: AckFields): boolean {
    const known = this.#update(request, (item) => {
      item.status = "acked";
      item.inputId = ack.input_id;
      item.seq = ack.seq;
      item.duplicate = ack.duplicate;
      delete item.error;
      this.#inputIds.set(item.clientMsgId, ack.input_id);
    });
    if (known) this.#settle();
    return known;
  }

  /** The input id the daemon gave one of this page's inputs, from its ack or its record. */
  inputIdOf(clientMsgId: string): string | undefined {
    return this.#inputIds.get(clientMsgId);
  }

  /**
   * Records a refusal; returns whether `request` was one of ours. A `retriable` one is sent
   * again on the next connection; any other waits for {@linkcode retry} or {@linkcode discard}.
   */
  fail(request: string, error: InputRefusal): boolean {
    return this.#update(request, (item) => {
      item.status = "failed";
      item.error = {
        code: error.code,
        message: error.message,
        ...(error.retriable === true ? { retriable: true } : {}),
      };
    });
  }

  /** Queues a failed input again with the same ids. */
  retry(clientMsgId: string): void {
    const item = this.#items.find((i) => i.clientMsgId === clientMsgId);
    if (item === undefined || item.status !== "failed") return;
    item.status = "queued";
    delete item.error;
    this.#save();
  }

  /** Forgets an input the owner gave up on. */
  discard(clientMsgId: string): void {
    const before = this.#items.length;
    this.#items = this.#items.filter((i) => i.clientMsgId !== clientMsgId);
    if (this.#items.length !== before) this.#save();
  }

  /** Learns from one durable record; an `input.admitted` settles the input it records. */
  noteRecord(record: { type: string; data: unknown }): void {
    const read = readRecord(record.type, record.data);
    if (!read.ok || read.record.type !== "input.admitted") return;
    const { input_id: inputId, client_msg_id: msgId } = read.record.data;
    this.#recordedInputIds.add(inputId);
    if (msgId !== undefined) {
      this.#recordedMsgIds.add(msgId);
      this.#inputIds.set(msgId, inputId);
    }
    this.#settle();
  }

  /** Forgets which inputs were recorded, when the page's log starts over. */
  forgetRecords(): void {
    this.#recordedMsgIds.clear();
    this.#recordedInputIds.clear();
  }

  /** Drops inputs whose durable record the page now has. */
  #settle(): void {
    const before = this.#items.length;
    this.#items = this.#items.filter((item) =>
      !this.#recordedMsgIds.has(item.clientMsgId) &&
      !(item.inputId !== undefined && this.#recordedInputIds.has(item.inputId))
    );
    if (this.#items.length !== before) this.#save();
  }

  #update(request: string, change: (item: PendingInput) => void): boolean {
    const item = this.#items.find((i) => i.request === request);
    if (item === undefined) return false;
    change(item);
    this.#save();
    return true;
  }

  #save(): void {
    try {
      if (this.#items.length === 0) this.#storage?.removeItem(this.#key);
      else this.#storage?.setItem(this.#key, JSON.stringify(this.#items));
    } catch {
      // Storage full or denied: the outbox still works for this page's lifetime.
    }
  }
}
