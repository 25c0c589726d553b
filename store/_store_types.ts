/**
 * What an open store is to its users: the `Store` writer modules take, its prepared statements
 * and its health. Private to `store/`; `store.ts`, which opens the store, exports them.
 *
 * @module
 */

import type { SQLInputValue, SQLOutputValue, StatementResultingChanges } from "node:sqlite";
import type { CommittedRecords, StoredRecord } from "../runtime/core/mod.ts";

/** A prepared statement as writer modules use it; a store failure it meets is recorded. */
export interface Statement {
  run(...params: SQLInputValue[]): StatementResultingChanges;
  get(...params: SQLInputValue[]): Record<string, SQLOutputValue> | undefined;
  all(...params: SQLInputValue[]): Record<string, SQLOutputValue>[];
}

/**
 * Whether the store can be used, judged by what really happened to it: `failing` from the
 * first statement or commit that met a full disk, an I/O error or a read-only file until the
 * next commit succeeds; `corrupt` (for good) once SQLite reported a damaged file.
 */
export interface StoreHealth {
  state: "ok" | "failing" | "corrupt";
  /** What the failure was, with its advice; null when `ok`. */
  error: string | null;
  /** When the failure began, in ms; null when `ok`. */
  since: number | null;
  /** When the last transaction committed, in ms; null before the first. */
  lastCommitAt: number | null;
  /** Transactions committed on this connection since it opened. */
  commits: number;
  /**
   * Wall time those commits spent in `COMMIT` itself, in ms (the WAL write and its fsync):
   * what durability costs, apart from the statements before it.
   */
  commitMs: number;
}

/**
 * What one outermost commit wrote, as its commit listeners hear it (`Store.onCommit`): each
 * session whose log of records (the `events` table) grew, with its new records in seq order.
 *
 * A record is announced by the commit that holds it and by no other: one written in a savepoint
 * or transaction that was rolled back is not in it.
 */
export type Commit = CommittedRecords;

/** Told after each outermost commit what it wrote; see {@linkcode Store.onCommit}. */
export type CommitListener = (commit: Commit) => void;

/**
 * An open store: the connection, where it lives, its clock and a transaction helper.
 *
 * Writer modules (`inputs.ts`, `events.ts`, …) take a `Store` as their first argument.
 */
export interface Store {
  /** The state directory. */
  readonly stateDir: string;
  /** The store file, `<stateDir>/runtime.sqlite`. */
  readonly path: string;
  /** Returns the current time in integer ms; every stored timestamp comes from here. */
  readonly clock: () => number;
  /** Whether this store holds the owner lock. */
  readonly owner: boolean;
  /** The schema version the file is at (`PRAGMA user_version`). */
  readonly schemaVersion: number;
  /** Whether a transaction is open: writers that must run inside one assert it. */
  readonly inTransaction: boolean;
  /**
   * Returns a prepared statement for `sql`, prepared once per store and cached. Only the
   * writer modules of `store/` call it, each for its own tables (`tests/architecture.test.ts`
   * checks that nothing outside `store/` does).
   */
  statement(sql: string): Statement;
  /**
   * Runs `fn` in a `BEGIN IMMEDIATE` transaction: committed when it returns, rolled back when
   * it throws. A nested call runs in a savepoint of the outer transaction. `fn` must be
   * synchronous.
   *
   * @throws {KlbrError} `store_unavailable` (disk full, I/O error, read-only) or
   * `store_corrupt` when SQLite failed; the transaction is then rolled back.
   */
  transaction<T>(fn: () => T): T;
  /**
   * Adds a listener told once per outermost commit, after `COMMIT` returned and before
   * {@linkcode Store.transaction} returns to its caller, what that commit wrote. A nested
   * transaction announces nothing of its own: what it wrote rides in its outer commit. A
   * transaction rolled back announces nothing. A listener that throws is ignored: its failure
   * never becomes the commit's. Returns the function that removes the listener.
   *
   * @example
   * ```ts
   * const off = store.onCommit((commit) => commit.sessions.forEach((s) => bus.wake(s)));
   * off();
   * ```
   */
  onCommit(listener: CommitListener): () => void;
  /**
   * Notes, inside the open transaction, that `record` of `session` was written: the commit
   * that holds it announces it. Only the `events` table's writer (`events.ts`) calls it
   * (`tests/architecture.test.ts` checks that nothing outside `store/` does).
   */
  recordWritten(session: string, record: StoredRecord): void;
  /** Whether the store can be used now, from the outcome of its real statements and commits. */
  health(): StoreHealth;
  /**
   * Queues a write that needs no commit of its own (a hook trace, a record of progress): it
   * runs first inside the next outermost transaction, in a savepoint of its own, and commits
   * with it; {@linkcode Store.flush} (and `close`) runs what is queued in one transaction now.
   * A queued write that throws is rolled back alone and handed to `failed`; it never fails
   * the transaction it rides in.
   */
  defer(write: () => void, failed?: (error: unknown) => void): void;
  /** Commits the queued writes now, if there are any. */
  flush(): void;
  /** Closes the connection and releases the owner lock. Closing twice is a no-op. */
  close(): void;
}
