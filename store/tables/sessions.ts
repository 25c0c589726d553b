/**
 * The `sessions` table: one row per session, holding its epochs, its releases and the next
 * event sequence number. This module is the table's only writer.
 *
 * @module
 */

import { assert, KlbrError } from "../../runtime/core/mod.ts";
import { fromRow } from "./_rows.ts";
import type { Store } from "../store.ts";

/** The session a single-owner runtime uses unless told otherwise. */
export const DEFAULT_SESSION = "default";

const SESSION_ID = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

/** A session row. */
export interface Session {
  id: string;
  createdAt: number;
  state: string;
  contextEpoch: number;
  behaviorEpoch: number;
  activeRelease: string | null;
  lastGoodRelease: string | null;
  /** The sequence number the next event of this session gets. */
  nextSeq: number;
}

/**
 * Refuses a session id that is not 1–64 characters of letters, digits, `_`, `.` and `-`.
 *
 * @throws {KlbrError} `invalid_input`.
 */
export function checkSessionId(id: string): void {
  if (typeof id !== "string" || !SESSION_ID.test(id)) {
    throw new KlbrError(
      "invalid_input",
      `cannot use session id: expected 1-64 letters, digits, "_", "." or "-" (got ${
        JSON.stringify(id)
      })`,
    );
  }
}

/** Returns the session `id`, or `undefined` when it does not exist. */
export function getSession(store: Store, id: string): Session | undefined {
  const row = store.statement("SELECT * FROM sessions WHERE id = ?").get(id);
  return row && fromRow<Session>(row);
}

/**
 * Returns the session `id`, creating it (epochs 0, next sequence 1) when it does not exist.
 *
 * When it returns the session row is committed. Proven by "`ensureSession()` creates the
 * default session once".
 *
 * @throws {KlbrError} `invalid_input` for a malformed id.
 */
export function ensureSession(store: Store, id: string = DEFAULT_SESSION): Session {
  checkSessionId(id);
  return store.transaction(() => {
    store.statement("INSERT OR IGNORE INTO sessions (id, created_at) VALUES (?, ?)").run(
      id,
      store.clock(),
    );
    return getSession(store, id)!;
  });
}

/**
 * Returns the session `id` or refuses.
 *
 * @throws {KlbrError} `not_found` when the session does not exist.
 */
export function requireSession(store: Store, id: string): Session {
  const session = getSession(store, id);
  if (session === undefined) {
    throw new KlbrError(
      "not_found",
      `cannot use session: it does not exist; call ensureSession first (got ${JSON.stringify(id)})`,
    );
  }
  return session;
}

/**
 * Takes the next event sequence number of `session`; for writer modules, inside a transaction.
 *
 * The number is used by exactly one record, because the bump and the record commit together.
 *
 * @throws {KlbrError} `not_found` when the session does not exist.
 */
export function allocateSeq(store: Store, session: string): number {
  return allocateSeqs(store, session, 1);
}

/**
 * Takes the next `count` event sequence numbers of `session` with one bump and returns the
 * first; for writer modules numbering a batch, inside a transaction. Each number must get its
 * record in that transaction (a rollback gives them all back).
 *
 * @throws {KlbrError} `not_found` when the session does not exist.
 * @example
 * ```ts
 * const first = allocateSeqs(store, "default", 3); // first, first + 1, first + 2 are taken
 * ```
 */
export function allocateSeqs(store: Store, session: string, count: number): number {
  assert(store.inTransaction, "a sequence number is allocated inside a transaction");
  assert(Number.isSafeInteger(count) && count >= 1, "at least one sequence number is taken");
  const row = store.statement(
    "UPDATE sessions SET next_seq = next_seq + ?1 WHERE id = ?2 RETURNING next_seq - ?1 AS seq",
  ).get(count, session) as { seq: number } | undefined;
  if (row === undefined) requireSession(store, session);
  return row!.seq;
}

/**
 * Sets `behavior_epoch` and `active_release` if the epoch is still `expectedEpoch`; for the
 * releases writer, inside its activation transaction. Returns whether the swap happened.
 */
export function swapBehaviorEpoch(
  store: Store,
  session: string,
  swap: { expectedEpoch: number; releaseId: string },
): boolean {
  assert(store.inTransaction, "an epoch swap runs inside a transaction");
  const result = store.statement(
    "UPDATE sessions SET behavior_epoch = behavior_epoch + 1, active_release = ? WHERE id = ? AND behavior_epoch = ?",
  ).run(swap.releaseId, session, swap.expectedEpoch);
  return result.changes === 1;
}

/** Records `releaseId` as the session's last good release; for the releases writer. */
export function setLastGoodRelease(store: Store, session: string, releaseId: string): void {
  assert(store.inTransaction, "last_good_release is set inside a transaction");
  store.statement("UPDATE sessions SET last_good_release = ? WHERE id = ?").run(
    releaseId,
    session,
  );
}

/**
 * Moves `context_epoch` from `expectedEpoch` to the next; for the context-summaries writer,
 * inside its transaction. Returns whether it moved.
 */
export function bumpContextEpoch(store: Store, session: string, expectedEpoch: number): boolean {
  assert(store.inTransaction, "a context epoch moves inside a transaction");
  return store.statement(
    "UPDATE sessions SET context_epoch = context_epoch + 1 WHERE id = ? AND context_epoch = ?",
  ).run(session, expectedEpoch).changes === 1;
}
