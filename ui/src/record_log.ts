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
  /** Where the records held stop being every record; absent: at the first one held. */
  completeFrom?: number;
  /** Per conversation, where its records held stop being all of its records, when lower. */
  reach?: Record<string, number>;
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
 * What it holds is every record from {@linkcode RecordLog.completeFrom} on, and for a
 * conversation paged on its own (a `page` that named it), every record of that conversation
 * from its own, lower, `completeFrom(conversation)`: records held below a conversation's reach
 * are ones that came along with another conversation, not the whole story of theirs.
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
  /** Where the log stops holding every record; unset while it holds a contiguous run. */
  #completeFrom: number | undefined;
  #reach = new Map<string, number>();

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

  /**
   * The lowest seq from which every record (of `conversation`, when given) is held; 0 for an
   * empty log. A "load earlier" asks for the records before it.
   */
  completeFrom(conversation?: string): number {
    const all = this.#completeFrom ?? this.firstSeq;
    if (conversation === undefined) return all;
    return Math.min(all, this.#reach.get(conversation) ?? all);
  }

  /** Whether `conversation` has records older than those held of it. */
  hasEarlierIn(conversation: string): boolean {
    return this.completeFrom(conversation) > 1;
  }

  /**
   * Fixes where the log stops holding every record, before a page of one conversation adds
   * records below it (which do not make the log whole there).
   */
  holdCompleteFrom(): void {
    this.#completeFrom ??= this.firstSeq || this.#lastSeq + 1;
  }

  /**
   * Notes that every record of `conversation` from `from` on is held (a page that named it
   * was added; 1: from its start). Call {@linkcode holdCompleteFrom} before adding the page.
   */
  noteConversationFrom(conversation: string, from: number): void {
    this.#reach.set(conversation, Math.min(from, this.completeFrom(conversation)));
    this.#revision++;
  }

  /** Notes that a session page made the log whole down to `from`. */
  noteCompleteFrom(from: number): void {
    if (this.#completeFrom !== undefined) this.#completeFrom = Math.min(this.#completeFrom, from);
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
    // Nothing below the oldest record kept is held whole any more.
    const first = this.#sorted[0]?.seq ?? this.#lastSeq + 1;
    if (this.#completeFrom !== undefined) {
      this.#completeFrom = Math.max(this.#completeFrom, first);
    }
    for (const [conversation, from] of this.#reach) {
      this.#reach.set(conversation, Math.max(from, first));
    }
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
    this.#completeFrom = undefined;
    this.#reach.clear();
    this.#revision++;
  }

  /** The stored form of this log. */
  toSnapshot(): RecordLogSnapshot {
    return {
      version: 1,
      session: this.session,
      lastSeq: this.#lastSeq,
      records: [...this.records()],
      ...(this.#completeFrom === undefined ? {} : { completeFrom: this.#completeFrom }),
      ...(this.#reach.size === 0 ? {} : { reach: Object.fromEntries(this.#reach) }),
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
    if (typeof value.completeFrom === "number") log.#completeFrom = value.completeFrom;
    if (isObject(value.reach)) {
      for (const [conversation, from] of Object.entries(value.reach)) {
        if (typeof from === "number") log.#reach.set(conversation, from);
      }
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
