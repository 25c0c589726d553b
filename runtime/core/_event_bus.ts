/**
 * In-process signals for sessions: "new durable records exist" and lossy token animation.
 *
 * Nothing wakes by hand: the bus follows the store's commits ({@linkcode EventBus.follow}) and
 * wakes each session whose log a commit grew, one event-loop turn after that commit, so the
 * acks a commit allows leave before the records it holds. A wake carries the records committed
 * since the session's last wake, in order (up to {@linkcode MAX_CARRIED_RECORDS}; past that it
 * carries none): a subscriber whose cursor they follow sends them as they are, and any other
 * reads the store after its own cursor, so a missed or merged wake never loses a record.
 *
 * @module
 */

import type { ServerMessage } from "./_lane_protocol.ts";
import { nextMacrotask } from "./_serial.ts";

/** A durable record as the log holds it: its body still the stored JSON text. */
export interface StoredRecord {
  seq: number;
  /** The record type (`LaneRecord.type`). */
  kind: string;
  /** When it was committed, in ms. */
  at: number;
  /** The body's JSON text (`LaneRecord.data`), exactly as stored; JSON `null` is sent as `{}`. */
  body: string;
}

/** The records one wake carries at most; a wake for more carries none (read them). */
export const MAX_CARRIED_RECORDS = 1000;

/**
 * A live notification for a subscribed connection: a wake, or lossy animation. A wake's
 * `records` are every record of the session committed since its previous wake, in seq order,
 * when there were at most {@linkcode MAX_CARRIED_RECORDS}.
 */
export type LaneSignal =
  | { kind: "wake"; records?: readonly StoredRecord[] }
  | Extract<ServerMessage, { kind: "token" | "cell.output" }>;

/** What one outermost commit wrote: each session's new records, in seq order. */
export interface CommittedRecords {
  readonly records: ReadonlyMap<string, readonly StoredRecord[]>;
}

/** What the bus needs of a store: its commits, each with the records it wrote. */
export interface CommitSource {
  /** Adds a commit listener; returns the function that removes it. */
  onCommit(listener: (commit: CommittedRecords) => void): () => void;
}

/**
 * Fan-out of {@linkcode LaneSignal}s per session.
 *
 * @example
 * ```ts
 * const bus = new EventBus();
 * const stop = bus.follow(store);
 * const off = bus.subscribe("default", (s) => console.log(s.kind));
 * appendEvent(store, "default", "operator", { op: "note" }); // "wake", a turn later
 * off();
 * stop();
 * ```
 */
export class EventBus {
  #listeners = new Map<string, Set<(signal: LaneSignal) => void>>();
  /**
   * Sessions committed to since the last wake, waiting for their turn of the event loop, with
   * the records to carry (`undefined` once there are too many to carry).
   */
  #owed = new Map<string, StoredRecord[] | undefined>();

  /** Adds a listener for one session; returns the function that removes it. */
  subscribe(session: string, listener: (signal: LaneSignal) => void): () => void {
    let set = this.#listeners.get(session);
    if (set === undefined) {
      set = new Set();
      this.#listeners.set(session, set);
    }
    set.add(listener);
    return () => {
      set.delete(listener);
    };
  }

  /**
   * Wakes each session an outermost commit of `store` gave records, one event-loop turn after
   * the commit (commits in the same turn share one wake). Returns the function that stops it.
   */
  follow(store: CommitSource): () => void {
    return store.onCommit(this.#committed.bind(this));
  }

  #committed(commit: CommittedRecords): void {
    if (commit.records.size === 0) return;
    const scheduled = this.#owed.size > 0;
    for (const [session, records] of commit.records) {
      const owed = this.#owed.has(session) ? this.#owed.get(session) : [];
      const carried = owed !== undefined && owed.length + records.length <= MAX_CARRIED_RECORDS;
      this.#owed.set(session, carried ? owed.concat(records) : undefined);
    }
    if (!scheduled) nextMacrotask().then(this.#wakeOwed.bind(this));
  }

  #wakeOwed(): void {
    const owed = this.#owed;
    this.#owed = new Map();
    for (const [session, records] of owed) {
      this.emit(session, records === undefined ? { kind: "wake" } : { kind: "wake", records });
    }
  }

  /** Delivers one signal to a session's subscribers; a throwing listener is dropped. */
  emit(session: string, signal: LaneSignal): void {
    const set = this.#listeners.get(session);
    if (set === undefined) return;
    for (const listener of [...set]) {
      try {
        listener(signal);
      } catch {
        set.delete(listener);
      }
    }
  }
}
