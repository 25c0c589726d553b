/**
 * One page of a catch-up: the durable records after a cursor, read from the host (or carried
 * by a wake) and made into the messages the client gets — encoded text for a transport that
 * sends text (each stored body spliced in as it is), message objects otherwise; `records`
 * batches for a client that said `batch: true`, one `record` message each for any other.
 *
 * @module
 */

import type { ClientMessage, LaneRecord, ServerMessage, StoredRecord } from "../core/mod.ts";
import type { LaneHost } from "./_lane_types.ts";
import {
  encodeStoredRecords,
  recordBatches,
  storedBatches,
  textBatches,
} from "./_record_batches.ts";

/** One message of a page, and the seq a client holds once it has applied it. */
export type PageMessage =
  | { lastSeq: number; text: string }
  | { lastSeq: number; message: ServerMessage };

/** A page: its messages in order, and how many records it read (0: the catch-up is done). */
export interface RecordPage {
  read: number;
  messages: PageMessage[];
}

/** How a page is read and made. */
export interface PageOptions {
  /** Records read at most. */
  limit: number;
  /** `records` batches instead of one `record` message each. */
  batch: boolean;
  /** Encoded text (for `sendText`) instead of message objects. */
  text: boolean;
}

/**
 * Reads the records of `session` after `since` and makes them into messages.
 *
 * @throws what the host's read throws (a store that cannot be read).
 * @example
 * ```ts
 * const page = readPage(host, "default", cursor, { limit: 1000, batch: true, text: true });
 * ```
 */
export function readPage(
  host: LaneHost,
  session: string,
  since: number,
  options: PageOptions,
): RecordPage {
  const stored = options.text ? host.readStoredRecords?.(session, since, options.limit) : undefined;
  if (stored !== undefined) return pageOfRecords(session, stored, options);
  const records = host.readRecords(session, since, options.limit);
  if (options.text) {
    const encoded = records.map((record) => ({ seq: record.seq, text: JSON.stringify(record) }));
    const messages = options.batch
      ? textBatches(session, encoded)
      : encoded.map(({ seq, text }) => ({ text, lastSeq: seq }));
    return { read: encoded.length, messages };
  }
  return pageOfLaneRecords(session, records, options.batch);
}

/**
 * The page {@linkcode readPage} makes of `stored`, records already in hand (a wake carried
 * them, or the store gave them with their bodies as stored text).
 *
 * @example
 * ```ts
 * const page = pageOfRecords("default", wake.records, { batch: true, text: true });
 * ```
 */
export function pageOfRecords(
  session: string,
  stored: readonly StoredRecord[],
  options: Pick<PageOptions, "batch" | "text">,
): RecordPage {
  if (!options.text) {
    const records = stored.map((record) => laneRecordOf(session, record));
    return pageOfLaneRecords(session, records, options.batch);
  }
  if (options.batch) return { read: stored.length, messages: storedBatches(session, stored) };
  const messages = encodeStoredRecords(session, stored).map(({ seq, text }) => ({
    text,
    lastSeq: seq,
  }));
  return { read: stored.length, messages };
}

/** A stored record as its `record` message carries it, for a transport that sends objects. */
function laneRecordOf(session: string, record: StoredRecord): LaneRecord {
  return {
    kind: "record",
    session,
    seq: record.seq,
    at: record.at,
    type: record.kind,
    data: (JSON.parse(record.body) ?? {}) as Record<string, unknown>,
  };
}

/** The page of records already parsed: `records` batches, or one `record` message each. */
function pageOfLaneRecords(session: string, records: LaneRecord[], batch: boolean): RecordPage {
  const messages = batch
    ? recordBatches(session, records).map((batch) => ({
      lastSeq: batch.lastSeq,
      message: { kind: "records" as const, session, records: batch.records },
    }))
    : records.map((record) => ({ lastSeq: record.seq, message: record }));
  return { read: records.length, messages };
}

/**
 * The answer to a `page` request: the newest `limit` records of `session` before `before`
 * (and at most the head), in seq order, and whether older ones exist. Seqs are dense from 1,
 * so the page is the records after `top - 1 - limit`. A request that names a conversation
 * gets what that conversation needs instead (`LaneHost.conversationRanges`), and `from`.
 *
 * @throws what the host's read throws (a store that cannot be read).
 * @example
 * ```ts
 * send(earlierPage(host, "default", { kind: "page", request: "p1", before: 901, limit: 200 }));
 * ```
 */
export function earlierPage(
  host: LaneHost,
  session: string,
  message: Extract<ClientMessage, { kind: "page" }>,
): Extract<ServerMessage, { kind: "page" }> {
  const { before, limit, request, conversation } = message;
  if (conversation !== undefined && host.conversationRanges !== undefined) {
    const found = host.conversationRanges(session, { conversation, before, limit });
    const records = found.ranges.flatMap(([first, last]) =>
      host.readRecords(session, first - 1, last - first + 1)
    );
    return {
      kind: "page",
      request,
      session,
      before,
      records,
      more: found.more,
      conversation,
      from: found.from,
    };
  }
  const top = Math.min(before, host.headSeq(session) + 1);
  const from = Math.max(0, top - 1 - limit);
  const records = top <= 1
    ? []
    : host.readRecords(session, from, limit).filter((record) => record.seq < top);
  return { kind: "page", request, session, before, records, more: from > 0 };
}
