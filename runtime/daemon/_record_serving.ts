/**
 * Durable records as the lane protocol serves them: the session's head, the records after a
 * cursor in sequence order, and the spans one conversation's older messages need.
 *
 * @module
 */

import { readEvents, readEventTexts } from "../../store/tables/events.ts";
import { getSession } from "../../store/tables/sessions.ts";
import type { Store } from "../../store/store.ts";
import {
  type ConversationRanges,
  conversationRanges,
} from "../../store/tables/conversation_pages.ts";
import type { LaneRecord } from "../core/mod.ts";
import type { StoredRecord } from "../lanes/mod.ts";

/**
 * The record-reading half of the lane host, over one store: the coordinator extends it and
 * adds admission, operator commands and signals.
 */
export class RecordServer {
  #store: Store;

  /** Serves the records of `store`. */
  constructor(store: Store) {
    this.#store = store;
  }

  /** The last sequence number of a session (0 when it has none, or does not exist). */
  headSeq(session: string): number {
    const row = getSession(this.#store, session);
    return row === undefined ? 0 : row.nextSeq - 1;
  }

  /** Up to `limit` durable records of a session with `seq > since`, in order. */
  readRecords(session: string, since: number, limit: number): LaneRecord[] {
    if (getSession(this.#store, session) === undefined) return [];
    return readEvents(this.#store, session, { since, limit }).map((event) => ({
      kind: "record",
      session,
      seq: event.seq,
      at: event.at,
      type: event.kind,
      data: (event.body ?? {}) as Record<string, unknown>,
    }));
  }

  /**
   * The records {@linkcode readRecords} returns, each body left as its stored JSON text, for a
   * catch-up that splices them into its messages. One query a page: a session that does not
   * exist has no events, so its pages are empty without looking it up.
   */
  readStoredRecords(session: string, since: number, limit: number): StoredRecord[] {
    return readEventTexts(this.#store, session, { since, limit });
  }

  /** The spans of records one conversation's older messages need (`conversationRanges`). */
  conversationRanges(
    session: string,
    options: { conversation: string; before: number; limit: number },
  ): ConversationRanges {
    return conversationRanges(this.#store, session, options);
  }
}
