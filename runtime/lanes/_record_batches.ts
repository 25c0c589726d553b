/**
 * Durable records encoded for the wire, and batched delivery: several records in one `records`
 * message, up to a size bound, for clients that asked for it at `hello` (`batch: true`). A
 * batch holds consecutive records in sequence order, each exactly as its own `record` message
 * would carry it, so the ordering and resume guarantees are those of single records: a client
 * that has applied a batch holds every record up to its last `seq`.
 *
 * A record read from the store keeps its body as the JSON text the log holds: its message is
 * spliced around that text, never parsed and encoded again.
 *
 * @module
 */

import type { LaneRecord, StoredRecord } from "../core/mod.ts";

export type { StoredRecord };

/** The JSON text one `records` message holds at most (one larger record goes alone). */
export const MAX_BATCH_CHARS = 256 * 1024;

/** One record's `record` message, already encoded as JSON. */
export interface EncodedRecord {
  seq: number;
  text: string;
}

/** One `records` message, encoded once. */
export interface RecordBatch {
  /** The whole message's JSON text. */
  text: string;
  records: LaneRecord[];
  /** The `seq` of its last record. */
  lastSeq: number;
}

/** One `records` message of encoded records. */
export interface TextBatch {
  /** The whole message's JSON text. */
  text: string;
  /** How many records it holds. */
  count: number;
  /** The `seq` of its last record. */
  lastSeq: number;
}

/**
 * Encodes stored records as their `record` messages by splicing each stored body into the
 * message text: the same text `JSON.stringify` gives the parsed record (same keys, same order),
 * without parsing the body.
 *
 * @example
 * ```ts
 * encodeStoredRecords("default", [{ seq: 1, kind: "test", at: 0, body: '{"a":1}' }]);
 * // [{ seq: 1, text: '{"kind":"record","session":"default","seq":1,"at":0,"type":"test","data":{"a":1}}' }]
 * ```
 */
export function encodeStoredRecords(
  session: string,
  rows: readonly StoredRecord[],
): EncodedRecord[] {
  const head = `{"kind":"record","session":${JSON.stringify(session)},"seq":`;
  const encoded: EncodedRecord[] = new Array(rows.length);
  for (let i = 0; i < rows.length; i++) {
    const { seq, kind, at, body } = rows[i];
    const data = body === "null" ? "{}" : body;
    encoded[i] = {
      seq,
      text: `${head}${seq},"at":${at},"type":${JSON.stringify(kind)},"data":${data}}`,
    };
  }
  return encoded;
}

/**
 * Splits encoded records (consecutive, in order) into `records` messages of at most `maxChars`
 * of JSON text each; a record larger than that goes alone.
 *
 * @example
 * ```ts
 * for (const batch of textBatches("default", encoded)) ws.send(batch.text);
 * ```
 */
export function textBatches(
  session: string,
  records: readonly EncodedRecord[],
  maxChars = MAX_BATCH_CHARS,
): TextBatch[] {
  const head = `{"kind":"records","session":${JSON.stringify(session)},"records":[`;
  const batches: TextBatch[] = [];
  let texts: string[] = [];
  let chars = head.length + 2;
  const close = (lastSeq: number) => {
    if (texts.length === 0) return;
    batches.push({ text: `${head}${texts.join(",")}]}`, count: texts.length, lastSeq });
    texts = [];
    chars = head.length + 2;
  };
  for (let i = 0; i < records.length; i++) {
    const { text } = records[i];
    if (texts.length > 0 && chars + text.length + 1 > maxChars) close(records[i - 1].seq);
    texts.push(text);
    chars += text.length + 1;
  }
  close(records.at(-1)?.seq ?? 0);
  return batches;
}

/**
 * Encodes stored records (consecutive, in order) straight into `records` messages of at most
 * `maxChars` of JSON text each, a record larger than that alone: the messages
 * `textBatches(session, encodeStoredRecords(session, rows))` gives. It makes no object per
 * record: a catch-up's page holds a thousand records at once, and V8 would move objects that
 * live that long into its old generation as they are made, to be collected by full GCs.
 *
 * @example
 * ```ts
 * for (const batch of storedBatches("default", readEventTexts(store, "default"))) ws.send(batch.text);
 * ```
 */
export function storedBatches(
  session: string,
  rows: readonly StoredRecord[],
  maxChars = MAX_BATCH_CHARS,
): TextBatch[] {
  const quoted = JSON.stringify(session);
  const head = `{"kind":"records","session":${quoted},"records":[`;
  const recordHead = `{"kind":"record","session":${quoted},"seq":`;
  const batches: TextBatch[] = [];
  let texts: string[] = [];
  let chars = head.length + 2;
  let lastSeq = 0;
  for (let i = 0; i < rows.length; i++) {
    const { seq, kind, at, body } = rows[i];
    const data = body === "null" ? "{}" : body;
    const text = `${recordHead}${seq},"at":${at},"type":${JSON.stringify(kind)},"data":${data}}`;
    if (texts.length > 0 && chars + text.length + 1 > maxChars) {
      batches.push({ text: `${head}${texts.join(",")}]}`, count: texts.length, lastSeq });
      texts = [];
      chars = head.length + 2;
    }
    texts.push(text);
    chars += text.length + 1;
    lastSeq = seq;
  }
  if (texts.length > 0) {
    batches.push({ text: `${head}${texts.join(",")}]}`, count: texts.length, lastSeq });
  }
  return batches;
}

/**
 * Splits `records` (consecutive, in order) into `records` messages of at most `maxChars` of
 * JSON text each, encoding every record once.
 *
 * @example
 * ```ts
 * for (const batch of recordBatches("default", page)) ws.send(batch.text);
 * ```
 */
export function recordBatches(
  session: string,
  records: readonly LaneRecord[],
  maxChars = MAX_BATCH_CHARS,
): RecordBatch[] {
  const encoded = records.map((record) => ({ seq: record.seq, text: JSON.stringify(record) }));
  let start = 0;
  return textBatches(session, encoded, maxChars).map((batch) => {
    const members = records.slice(start, start + batch.count);
    start += batch.count;
    return { text: batch.text, records: members, lastSeq: batch.lastSeq };
  });
}
