/**
 * The page's copy of a session's durable records, keyed by `seq`, so each record is kept (and
 * rendered) exactly once however often a replay repeats it.
 *
 * @module
 */

import type { LaneRecord } from "../../runtime/protocol.ts";
import { isObject } from "./_fields.ts";

/** The stored form of a {@linkcode RecordLog}. */
export interface RecordLogSnapshot {
  version: 1;
  session: string;
  lastSeq: number;
  records: LaneRecord[];
}

/** Returns whether `value` has the shape of a durable record (`kind: "record"`). */
export function isLaneRecord(value: unknown): value is LaneRecord {
  if (!isObject(value)) return false;
  return value.kind === "record" && typeof value.seq === "number" &&
    Number.isSafeInteger(value.seq) && value.seq > 0 && typeof value.type === "string" &&
    typeof value.at === "number" && isObject(value.data);
}

/**
 * An ordered, duplicate-free set of durable records of one session.
 *
 * @example
 * ```ts
 * const log = new RecordLog("default");
 * log.add(record); // true
 * log.add(record); // false: already kept
 * ```
 */
export class RecordLog {
  /** The session these records belong to. */
  readonly session: string;
  #bySeq = new Map<number, LaneRecord>();
  #sorted: LaneRecord[] | undefined = [];
  #lastSeq = 0;
  #revision = 0;

  /** Creates an empty log for `session`. */
  constructor(session: string) {
    this.session = session;
  }

  /** The highest `seq` kept; 0 when empty. A resuming `hello` sends it as `since`. */
  get lastSeq(): number {
    return this.#lastSeq;
  }

  /** Grows whenever the kept set changes; views memoise on it. */
  get revision(): number {
    return this.#revision;
  }

  /** How many records are kept. */
  get size(): number {
    return this.#bySeq.size;
  }

  /** Keeps `record` unless a record with its `seq` is already kept; returns whether it was new. */
  add(record: LaneRecord): boolean {
    if (!isLaneRecord(record) || this.#bySeq.has(record.seq)) return false;
    this.#bySeq.set(record.seq, record);
    this.#revision++;
    if (record.seq > this.#lastSeq) {
      this.#sorted?.push(record);
      this.#lastSeq = record.seq;
    } else {
      this.#sorted = undefined;
    }
    return true;
  }

  /** Every kept record in `seq` order. The array is shared: do not modify it. */
  records(): readonly LaneRecord[] {
    if (this.#sorted === undefined) {
      this.#sorted = [...this.#bySeq.values()].sort((a, b) => a.seq - b.seq);
    }
    return this.#sorted;
  }

  /** Forgets every record, e.g. when the daemon's log turns out to be a different one. */
  clear(): void {
    this.#bySeq.clear();
    this.#sorted = [];
    this.#lastSeq = 0;
    this.#revision++;
  }

  /** The stored form of this log. */
  toSnapshot(): RecordLogSnapshot {
    return {
      version: 1,
      session: this.session,
      lastSeq: this.#lastSeq,
      records: [...this.records()],
    };
  }

  /**
   * Rebuilds a log from its stored form; returns an empty log when `value` is not a snapshot
   * of `session` (a corrupt or foreign entry is dropped, and a replay from 0 refills it).
   */
  static fromSnapshot(value: unknown, session: string): RecordLog {
    const log = new RecordLog(session);
    if (
      !isObject(value) || value.version !== 1 || value.session !== session ||
      !Array.isArray(value.records)
    ) {
      return log;
    }
    for (const record of value.records) {
      if (isLaneRecord(record) && record.session === session) log.add(record);
    }
    return log;
  }
}
