/**
 * Batched delivery of durable records: several records in one `records` message, up to a size
 * bound, for clients that asked for it at `hello` (`batch: true`). A batch holds consecutive
 * records in sequence order, each exactly as its own `record` message would carry it, so the
 * ordering and resume guarantees are those of single records: a client that has applied a
 * batch holds every record up to its last `seq`.
 *
 * @module
 */

import type { LaneRecord } from "../core/mod.ts";

/** The JSON text one `records` message holds at most (one larger record goes alone). */
export const MAX_BATCH_CHARS = 256 * 1024;

/** One `records` message, encoded once. */
export interface RecordBatch {
  /** The whole message's JSON text. */
  text: string;
  records: LaneRecord[];
  /** The `seq` of its last record. */
  lastSeq: number;
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
  const head = `{"kind":"records","session":${JSON.stringify(session)},"records":[`;
  const batches: RecordBatch[] = [];
  let texts: string[] = [];
  let members: LaneRecord[] = [];
  let chars = head.length + 2;
  const close = () => {
    if (members.length === 0) return;
    batches.push({
      text: `${head}${texts.join(",")}]}`,
      records: members,
      lastSeq: members.at(-1)!.seq,
    });
    texts = [];
    members = [];
    chars = head.length + 2;
  };
  for (const record of records) {
    const text = JSON.stringify(record);
    if (members.length > 0 && chars + text.length + 1 > maxChars) close();
    texts.push(text);
    members.push(record);
    chars += text.length + 1;
  }
  close();
  return batches;
}
