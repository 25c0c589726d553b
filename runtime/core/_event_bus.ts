/**
 * In-process signals for sessions: "new durable records exist" and lossy token animation.
 *
 * A wake carries no data: a subscriber reads the store after its own cursor, so a missed or
 * merged wake never loses a record.
 *
 * @module
 */

import type { ServerMessage } from "./_lane_protocol.ts";

/** A live notification for a subscribed connection: a wake, or lossy animation. */
export type LaneSignal =
  | { kind: "wake" }
  | Extract<ServerMessage, { kind: "token" | "cell.output" }>;

/**
 * Fan-out of {@linkcode LaneSignal}s per session.
 *
 * @example
 * ```ts
 * const bus = new EventBus();
 * const off = bus.subscribe("default", (s) => console.log(s.kind));
 * bus.wake("default");
 * off();
 * ```
 */
export class EventBus {
  #listeners = new Map<string, Set<(signal: LaneSignal) => void>>();

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

  /** Tells a session's subscribers that durable records were committed. */
  wake(session: string): void {
    this.emit(session, { kind: "wake" });
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
