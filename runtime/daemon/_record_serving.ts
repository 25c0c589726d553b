/**
 * Durable records as the lane protocol serves them: the session's head and the records after
 * a cursor, in sequence order.
 *
 * @module
 */

import { readEvents, readEventTexts } from "../../store/tables/events.ts";
import { getSession } from "../../store/tables/sessions.ts";
import type { Store } from "../../store/store.ts";
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
