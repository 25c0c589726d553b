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

/** The last sequence number of a session (0 when it has none, or does not exist). */
export function headSeq(store: Store, session: string): number {
  const row = getSession(store, session);
  return row === undefined ? 0 : row.nextSeq - 1;
}

/** Up to `limit` durable records of a session with `seq > since`, in order. */
export function recordsAfter(
  store: Store,
  session: string,
  since: number,
  limit: number,
): LaneRecord[] {
  if (getSession(store, session) === undefined) return [];
  return readEvents(store, session, { since, limit }).map((event) => ({
    kind: "record",
    session,
    seq: event.seq,
    at: event.at,
    type: event.kind,
    data: (event.body ?? {}) as Record<string, unknown>,
  }));
}

/**
 * The records {@linkcode recordsAfter} returns, each body left as its stored JSON text, for a
 * catch-up that splices them into its messages. One query a page: a session that does not
 * exist has no events, so its pages are empty without looking it up.
 */
export function storedRecordsAfter(
  store: Store,
  session: string,
  since: number,
  limit: number,
): StoredRecord[] {
  return readEventTexts(store, session, { since, limit });
}

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

  /** The last sequence number of a session. */
  headSeq(session: string): number {
    return headSeq(this.#store, session);
  }

  /** Durable records after `since`. */
  readRecords(session: string, since: number, limit: number): LaneRecord[] {
    return recordsAfter(this.#store, session, since, limit);
  }

  /** Durable records after `since`, bodies as stored JSON text. */
  readStoredRecords(session: string, since: number, limit: number): StoredRecord[] {
    return storedRecordsAfter(this.#store, session, since, limit);
  }

  /** The spans of records one conversation's older messages need (`conversationRanges`). */
  conversationRanges(
    session: string,
    options: { conversation: string; before: number; limit: number },
  ): ConversationRanges {
    return conversationRanges(this.#store, session, options);
  }
}
