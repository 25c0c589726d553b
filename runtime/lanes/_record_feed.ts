/**
 * The records one `/v2` connection is sent after its hello: from a cursor (the last sequence
 * number delivered), each record exactly once and in order. A catch-up reads the store page by
 * page, waiting for the transport between pages; a wake sends the records it carried (what the
 * commits since the last wake wrote) as they are when they follow the cursor, and reads the
 * store otherwise. One pass runs at a time: a wake during a pass makes one more pass after it.
 *
 * @module
 */

import { SerialRunner, type StoredRecord } from "../core/mod.ts";
import type { LaneConnectionOptions, LaneHost } from "./_lane_types.ts";
import { pageOfRecords, type PageOptions, readPage, type RecordPage } from "./_record_pages.ts";

/** Records read per store query while catching up, unless the options say otherwise. */
const DEFAULT_PAGE_SIZE = 1000;

/** What a feed needs of its connection's options: how to send, and how fast. */
export type FeedOptions = Pick<
  LaneConnectionOptions,
  "send" | "sendText" | "pageSize" | "writable"
>;

/** Where a feed starts: its session, the cursor the client holds, and how it takes records. */
export interface FeedStart {
  session: string;
  cursor: number;
  /** Whether the client asked at hello for records in `records` batches. */
  batch: boolean;
}

/**
 * The record delivery of one connection.
 *
 * @example
 * ```ts
 * const feed = new RecordFeed(host, options, { session: "default", cursor: 0, batch: true });
 * await feed.catchUp(); // then `replayed` at feed.cursor
 * host.subscribe("default", (s) => s.kind === "wake" && feed.wake(s.records));
 * ```
 */
export class RecordFeed {
  readonly #host: LaneHost;
  readonly #options: FeedOptions;
  readonly #session: string;
  readonly #page: PageOptions;
  #cursor: number;
  #stopped = false;
  readonly #pump = new SerialRunner(() => this.#sendNewRecords());

  /** A feed at `start`; nothing is sent until {@linkcode RecordFeed.catchUp} or a wake. */
  constructor(host: LaneHost, options: FeedOptions, start: FeedStart) {
    this.#host = host;
    this.#options = options;
    this.#session = start.session;
    this.#cursor = start.cursor;
    const { sendText, pageSize = DEFAULT_PAGE_SIZE } = options;
    this.#page = { limit: pageSize, batch: start.batch, text: sendText !== undefined };
  }

  /** The last sequence number delivered. */
  get cursor(): number {
    return this.#cursor;
  }

  /**
   * Sends every durable record after the cursor, page by page.
   *
   * @throws what the host's read throws (a store that cannot be read).
   */
  catchUp(): Promise<void> {
    return this.#pump.run();
  }

  /**
   * The session's log grew: sends `records` (a wake's) when those after the cursor follow it
   * without a gap and no pass is running, else reads the store after the cursor.
   *
   * @throws what the host's read throws (a store that cannot be read).
   */
  wake(records?: readonly StoredRecord[]): Promise<void> {
    if (this.#stopped) return Promise.resolve();
    if (records !== undefined && !this.#pump.running && this.#sendCarried(records)) {
      return Promise.resolve();
    }
    return this.#pump.run();
  }

  /** Sends nothing more. */
  stop(): void {
    this.#stopped = true;
  }

  /**
   * Sends the records a wake carried when those after the cursor follow it without a gap (the
   * store need not be read for them); `false` when they do not, and the store must be read.
   */
  #sendCarried(records: readonly StoredRecord[]): boolean {
    const cursor = this.#cursor;
    const first = records.findIndex((record) => record.seq > cursor);
    if (first === -1) return true;
    const fresh = first === 0 ? records : records.slice(first);
    const contiguous = fresh[0].seq === cursor + 1 &&
      fresh[fresh.length - 1].seq === cursor + fresh.length;
    if (!contiguous) return false;
    this.#sendPage(pageOfRecords(this.#session, fresh, this.#page));
    return true;
  }

  /** Sends a page's messages in order, moving the cursor past each. */
  #sendPage(page: RecordPage): void {
    for (const message of page.messages) {
      if (this.#stopped) return;
      if ("text" in message) this.#options.sendText!(message.text);
      else this.#options.send(message.message);
      this.#cursor = message.lastSeq;
    }
  }

  /** Sends every durable record after the cursor, page by page; one pass at a time. */
  async #sendNewRecords(): Promise<void> {
    for (;;) {
      const page = readPage(this.#host, this.#session, this.#cursor, this.#page);
      this.#sendPage(page);
      if (this.#stopped || page.read === 0) return;
      // A long catch-up goes out page by page as the client reads it, so the daemon never
      // holds the whole log in a socket buffer.
      await this.#options.writable?.();
    }
  }
}
