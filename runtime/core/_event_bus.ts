/**
 * In-process signals for sessions: "new durable records exist" and lossy token animation.
 *
 * A wake carries no data: a subscriber reads the store after its own cursor, so a missed or
 * merged wake never loses a record. Nothing wakes by hand: the bus follows the store's commits
 * ({@linkcode EventBus.follow}) and wakes each session whose log a commit grew, one event-loop
 * turn after that commit, so the acks a commit allows leave before the records it holds.
 *
 * @module
 */

import type { ServerMessage } from "./_lane_protocol.ts";
import { nextMacrotask } from "./_serial.ts";

/** A live notification for a subscribed connection: a wake, or lossy animation. */
export type LaneSignal =
  | { kind: "wake" }
  | Extract<ServerMessage, { kind: "token" | "cell.output" }>;

/** What the bus needs of a store: its commits, each with the sessions given records. */
export interface CommitSource {
  /** Adds a commit listener; returns the function that removes it. */
  onCommit(listener: (commit: { readonly sessions: ReadonlySet<string> }) => void): () => void;
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
  /** Sessions committed to since the last wake, waiting for their turn of the event loop. */
  #owed = new Set<string>();

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

  #committed(commit: { readonly sessions: ReadonlySet<string> }): void {
    if (commit.sessions.size === 0) return;
    const scheduled = this.#owed.size > 0;
    for (const session of commit.sessions) this.#owed.add(session);
    if (!scheduled) nextMacrotask().then(this.#wakeOwed.bind(this));
  }

  #wakeOwed(): void {
    const owed = this.#owed;
    this.#owed = new Set();
    for (const session of owed) this.emit(session, { kind: "wake" });
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
