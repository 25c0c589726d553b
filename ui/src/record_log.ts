/**
 * The page's copy of a session's durable records, keyed by `seq`, so each record is kept (and
 * rendered) exactly once however often a replay repeats it.
 *
 * @module
 */

import { LaneRecord } from "../../runtime/core/mod.ts";
import { isObject } from "./json_value.ts";
import type { KeyValueStore } from "./input_outbox.ts";

/** The stored form of a {@linkcode RecordLog}. */
export interface RecordLogSnapshot {
  version: 1;
  session: string;
  lastSeq: number;
  records: LaneRecord[];
}

/**
 * Returns whether `value` is a durable record envelope (`kind: "record"`), by the shared
 * `LaneRecord` schema; its body is read later, by type, and kept whatever it holds.
 */
export function isLaneRecord(value: unknown): value is LaneRecord {
  return LaneRecord.safeParse(value).success;
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

  /** The lowest `seq` kept; 0 when empty. A "load earlier" asks for the records before it. */
  get firstSeq(): number {
    return this.records()[0]?.seq ?? 0;
  }

  /** Whether the session has records older than the oldest one kept. */
  get hasEarlier(): boolean {
    return this.firstSeq > 1;
  }

  /**
   * Forgets the oldest records until at most `max` are kept, so a page open for long keeps a
   * bounded log; a "load earlier" can fetch them again.
   */
  trimOldest(max: number): void {
    if (this.#bySeq.size <= max) return;
    const sorted = this.records();
    const drop = sorted.length - max;
    for (const record of sorted.slice(0, drop)) this.#bySeq.delete(record.seq);
    this.#sorted = sorted.slice(drop);
    this.#revision++;
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

/** The largest stored log, in characters of JSON; a larger one is not stored at all. */
export const STORED_LOG_LIMIT = 4_000_000;

/** The storage key of a session's log. */
export function logKey(session: string): string {
  return `klbr:log:${session}`;
}

/** Loads the log a page stored for `session`; an empty log when there is none or it is bad. */
export function loadRecordLog(storage: KeyValueStore | undefined, session: string): RecordLog {
  let stored: unknown = null;
  try {
    stored = JSON.parse(storage?.getItem(logKey(session)) ?? "null");
  } catch {
    // Corrupt: a replay from 0 refills the log.
  }
  return RecordLog.fromSnapshot(stored, session);
}

/**
 * Stores `log` whole, or removes the stored copy when it is too large or storage refuses it:
 * a reload then replays from seq 0, which the log dedupes. Never stores a part of a log.
 */
export function saveRecordLog(storage: KeyValueStore | undefined, log: RecordLog): void {
  if (storage === undefined) return;
  const key = logKey(log.session);
  try {
    const json = JSON.stringify(log.toSnapshot());
    if (json.length > STORED_LOG_LIMIT) storage.removeItem(key);
    else storage.setItem(key, json);
  } catch {
    try {
      storage.removeItem(key);
    } catch { /* storage unavailable: replay from 0 on reload */ }
  }
}
