/**
 * Opening and closing the one klbr store, `<stateDir>/runtime.sqlite`.
 *
 * Opening checks, in this order and before anything is written: the SQLite version, the state
 * directory, the owner lock, and that the file is klbr's (or absent, or empty). Only then is the
 * file switched to WAL and migrated. A file named `agent.db` is never opened: the only path
 * this module ever opens is {@linkcode STORE_FILE}.
 *
 * @module
 */

import { DatabaseSync, type StatementSync } from "node:sqlite";
import { join } from "node:path";
import { z } from "zod";
import { assert, faultPoint, KlbrError, type StoredRecord } from "../runtime/core/mod.ts";
import { forgetCleanClose, markCleanClose } from "./_clean_close.ts";
import { connect } from "./_connect.ts";
import {
  inspectStoreFile,
  refuseLostHistory,
  requireWritable,
} from "./maintenance/_inspect_file.ts";
import {
  injectedSqliteFull,
  storeError,
  type StoreFailure,
  storeFailure,
  unusableState,
} from "./_store_errors.ts";
import { schemaError } from "./schema/_schema_error.ts";
import type { Commit, CommitListener, Statement, Store, StoreHealth } from "./_store_types.ts";
import { acquireOwnerLock, type OwnerLock, releaseOwnerLock } from "./owner_lock.ts";
import { ifExists } from "./tables/files.ts";
import { checkSqliteVersion, linkedSqliteVersion } from "./version_guard.ts";

export { storeFailure, unusableState } from "./_store_errors.ts";
export type { Commit, CommitListener, Statement, Store, StoreHealth } from "./_store_types.ts";

/** The store's file name inside the state directory. */
export const STORE_FILE = "runtime.sqlite";

const OpenStoreOptionsSchema = z.object({
  /** Create the state directory and the store when missing (`init`); `false` requires both. */
  create: z.boolean().default(true),
  /** Take the owner lock; a second owner of the same directory is refused. */
  owner: z.boolean().default(true),
  /** The SQLite version to check instead of the linked one; for testing the guard. */
  sqliteVersion: z.string().optional(),
  /** How long a statement waits for another connection's lock, in ms. */
  busyTimeoutMs: z.number().int().min(0).max(600_000).default(5_000),
  /** The clock for every timestamp the store writes, in ms since the epoch. */
  clock: z.custom<() => number>((v) => typeof v === "function", "expected a function")
    .default(() => Date.now),
  /** Told each time the store's health changes state (`ok` → `failing` → `ok`, → `corrupt`). */
  onHealthChange: z.custom<(health: StoreHealth) => void>((v) => typeof v === "function")
    .optional(),
});

/** Options for {@linkcode openStore}; every field has a default. */
export type OpenStoreOptions = z.input<typeof OpenStoreOptionsSchema>;

interface Deferred {
  write: () => void;
  failed?: (error: unknown) => void;
}

/** Adds `records` of `session`, in order, to what one transaction depth wrote. */
function noteRecords(
  written: Map<string, StoredRecord[]>,
  session: string,
  records: StoredRecord[],
): void {
  const held = written.get(session);
  if (held === undefined) written.set(session, records);
  else held.push(...records);
}

class SqliteStore implements Store {
  readonly #statements = new Map<string, Statement>();
  readonly #clock: () => number;
  #depth = 0;
  #lock: OwnerLock | undefined;
  #deferred: Deferred[] = [];
  /** The records written at each open depth, by session: index 0 the outermost transaction. */
  #written: Map<string, StoredRecord[]>[] = [];
  readonly #commitListeners = new Set<CommitListener>();
  #health: StoreHealth = {
    state: "ok",
    error: null,
    since: null,
    lastCommitAt: null,
    commits: 0,
    commitMs: 0,
  };

  readonly #db: DatabaseSync;

  readonly #onHealthChange: ((health: StoreHealth) => void) | undefined;

  constructor(
    db: DatabaseSync,
    readonly stateDir: string,
    readonly path: string,
    clock: () => number,
    lock: OwnerLock | undefined,
    onHealthChange?: (health: StoreHealth) => void,
  ) {
    this.#db = db;
    this.#clock = clock;
    this.#lock = lock;
    this.owner = lock !== undefined;
    this.#onHealthChange = onHealthChange;
  }

  #setHealth(health: StoreHealth): void {
    const changed = health.state !== this.#health.state;
    this.#health = health;
    if (changed) {
      try {
        this.#onHealthChange?.({ ...health });
      } catch {
        // A listener's failure must not become the store's.
      }
    }
  }

  readonly owner: boolean;

  get inTransaction(): boolean {
    return this.#db.isTransaction;
  }

  get schemaVersion(): number {
    return (this.statement("PRAGMA user_version").get() as { user_version: number })
      .user_version;
  }

  clock = (): number => {
    const now = Math.trunc(this.#clock());
    assert(Number.isSafeInteger(now), "the store clock returns finite ms");
    return now;
  };

  health(): StoreHealth {
    return { ...this.#health };
  }

  statement(sql: string): Statement {
    let statement = this.#statements.get(sql);
    if (statement === undefined) {
      const prepared: StatementSync = this.#guard(() => this.#db.prepare(sql));
      statement = {
        run: (...params) => this.#guard(() => prepared.run(...params)),
        get: (...params) => this.#guard(() => prepared.get(...params)),
        all: (...params) => this.#guard(() => prepared.all(...params)),
      };
      this.#statements.set(sql, statement);
    }
    return statement;
  }

  /** Runs one SQLite call; a store failure is recorded and thrown as a `KlbrError`. */
  #guard<T>(call: () => T): T {
    try {
      return call();
    } catch (error) {
      const failure = storeFailure(error);
      if (failure === undefined || error instanceof KlbrError) throw error;
      this.#failed(failure, error);
      throw storeError("use the store", error, failure);
    }
  }

  #failed(failure: StoreFailure, error: unknown): void {
    if (this.#health.state === "corrupt") return;
    const now = Math.trunc(this.#clock());
    const ongoing = this.#health.state === "failing" && failure !== "corrupt";
    this.#setHealth({
      ...this.#health,
      state: failure === "corrupt" ? "corrupt" : "failing",
      error: storeError("use the store", error, failure).message,
      since: ongoing ? this.#health.since : now,
    });
  }

  transaction<T>(fn: () => T): T {
    const depth = this.#depth;
    const savepoint = `klbr_${depth}`;
    this.statement(depth === 0 ? "BEGIN IMMEDIATE" : `SAVEPOINT ${savepoint}`).run();
    this.#depth++;
    this.#written[depth] = new Map();
    let announced: Commit | undefined;
    try {
      const ran = depth === 0 ? this.#runDeferred() : [];
      try {
        const result = fn();
        assert(!(result instanceof Promise), "a store transaction body is synchronous");
        if (depth === 0) faultPoint("store-commit", injectedSqliteFull);
        const committing = performance.now();
        this.statement(depth === 0 ? "COMMIT" : `RELEASE ${savepoint}`).run();
        if (depth === 0) this.#committed(performance.now() - committing);
        announced = this.#release(depth);
        return result;
      } catch (error) {
        this.#written.length = depth;
        throw this.#rollBack(error, { depth, ran });
      }
    } finally {
      this.#depth--;
      // After the depth is back: a listener that writes opens an outermost transaction.
      if (announced !== undefined) this.#announce(announced);
    }
  }

  /**
   * Hands what a released savepoint wrote to its outer transaction; returns what an outermost
   * commit wrote, to announce.
   */
  #release(depth: number): Commit | undefined {
    const written = this.#written[depth];
    this.#written.length = depth;
    if (depth > 0) {
      for (const [session, records] of written) {
        noteRecords(this.#written[depth - 1], session, records);
      }
      return undefined;
    }
    return { records: written };
  }

  /** Rolls back what `transaction` began at `depth`; returns the error its caller hears. */
  #rollBack(error: unknown, at: { depth: number; ran: Deferred[] }): unknown {
    const { depth, ran } = at;
    const savepoint = `klbr_${depth}`;
    const failure = storeFailure(error);
    if (failure !== undefined && !(error instanceof KlbrError)) this.#failed(failure, error);
    // A full disk or an I/O error may have rolled the whole transaction back already: then
    // no savepoint is left to roll back to, and the failure itself is what the caller hears.
    if (this.#db.isTransaction) {
      if (depth === 0) this.statement("ROLLBACK").run();
      else {
        this.statement(`ROLLBACK TO ${savepoint}`).run();
        this.statement(`RELEASE ${savepoint}`).run();
      }
    }
    // Queued writes that rode in a transaction rolled back wait for the next one.
    this.#deferred.unshift(...ran);
    return failure === undefined || error instanceof KlbrError
      ? error
      : storeError("commit to the store", error, failure);
  }

  #announce(commit: Commit): void {
    for (const listener of [...this.#commitListeners]) {
      try {
        listener(commit);
      } catch {
        // A listener's failure must not become the commit's: the data is durable.
      }
    }
  }

  onCommit(listener: CommitListener): () => void {
    this.#commitListeners.add(listener);
    return () => {
      this.#commitListeners.delete(listener);
    };
  }

  recordWritten(session: string, record: StoredRecord): void {
    assert(this.#depth > 0, "a record is noted inside the transaction that writes it");
    noteRecords(this.#written[this.#depth - 1], session, [record]);
  }

  #committed(elapsedMs: number): void {
    const at = Math.trunc(this.#clock());
    const commits = this.#health.commits + 1;
    const commitMs = this.#health.commitMs + elapsedMs;
    this.#setHealth(
      this.#health.state === "corrupt"
        ? { ...this.#health, lastCommitAt: at, commits, commitMs }
        : { state: "ok", error: null, since: null, lastCommitAt: at, commits, commitMs },
    );
  }

  defer(write: () => void, failed?: (error: unknown) => void): void {
    this.#deferred.push({ write, failed });
  }

  flush(): void {
    if (this.#deferred.length > 0 && this.#depth === 0) this.transaction(() => {});
  }

  /** Runs the queued writes inside the transaction just begun, each in its own savepoint. */
  #runDeferred(): Deferred[] {
    const queued = this.#deferred;
    if (queued.length === 0) return queued;
    this.#deferred = [];
    for (const { write, failed } of queued) {
      try {
        this.transaction(write);
      } catch (error) {
        failed?.(error);
      }
    }
    return queued;
  }

  close(): void {
    if (this.#db.isOpen) {
      try {
        this.flush();
      } catch {
        // Closing goes on: what was queued is lost with a store that cannot commit.
      }
      this.#statements.clear();
      this.#db.close();
      // The owner's clean close lets the next open of a large store skip its whole-file check.
      if (this.owner && this.#health.state !== "corrupt") {
        try {
          markCleanClose(this.path);
        } catch {
          // Without the mark the next start checks the whole file: slower, never wrong.
        }
      }
    }
    if (this.#lock !== undefined) {
      releaseOwnerLock(this.#lock);
      this.#lock = undefined;
    }
  }
}

/**
 * Opens (and with `create`, creates) the store of `stateDir`.
 *
 * When it returns: SQLite is at least 3.51.3, this process holds the owner lock (unless
 * `owner: false`), `runtime.sqlite` is in WAL mode with `synchronous=FULL` and foreign keys on,
 * and it is migrated to the latest version (with `owner: false`, only a new store is: an
 * existing one keeps its schema for its owner to migrate). A file that is not klbr's was not
 * modified.
 * Proven by "`openStore()` creates and migrates a missing store: WAL, FULL, foreign keys",
 * "`openStore()` refuses an old agent schema and leaves it unchanged" and "`openStore()` never
 * opens or changes an agent.db beside the store".
 *
 * @throws {KlbrError} `sqlite_too_old` before anything is touched; `state_missing` when
 *   `create` is `false` and the directory or the store is missing; `owner_locked` when another
 *   live process owns the directory; `foreign_store` when `runtime.sqlite` is not a klbr store;
 *   `invalid_input` when the options fail their schema.
 * @example
 * ```ts
 * const store = openStore("./.klbr", { create: false });
 * try { admitInput(store, input); } finally { store.close(); }
 * ```
 */
export function openStore(stateDir: string, options: OpenStoreOptions = {}): Store {
  const parsed = OpenStoreOptionsSchema.safeParse(options);
  if (!parsed.success) throw schemaError("open store", parsed.error, options);
  const { create, owner, sqliteVersion, busyTimeoutMs, clock, onHealthChange } = parsed.data;
  checkSqliteVersion(sqliteVersion ?? linkedSqliteVersion());
  const isDir = ifExists(() => Deno.statSync(stateDir).isDirectory);
  if (isDir === false) {
    throw new KlbrError(
      "state_missing",
      `cannot open store: the state directory is not a directory (got ${stateDir})`,
    );
  }
  if (isDir === undefined) {
    if (!create) {
      throw new KlbrError(
        "state_missing",
        `cannot open store: the state directory does not exist; deno task init --state ${stateDir} makes it (got ${stateDir})`,
      );
    }
    Deno.mkdirSync(stateDir, { recursive: true });
  }
  const path = join(stateDir, STORE_FILE);
  let lock: OwnerLock | undefined;
  try {
    lock = owner ? acquireOwnerLock(stateDir, clock()) : undefined;
    // Before the inspection's read-only connection, which may leave side files beside it.
    if (owner) requireWritable(path);
    const state = inspectStoreFile(path);
    if (state === "absent" && !create) {
      throw new KlbrError(
        "state_missing",
        `cannot open store: ${STORE_FILE} does not exist; deno task init --state ${stateDir} makes it (got ${path})`,
      );
    }
    if (state !== "klbr") refuseLostHistory(stateDir, path, state);
    // About to write: a crash from here on must leave no clean-close mark.
    if (owner) forgetCleanClose(path);
    const db = connect(path, busyTimeoutMs, { upgrade: owner });
    return new SqliteStore(db, stateDir, path, clock, lock, onHealthChange);
  } catch (error) {
    if (lock !== undefined) releaseOwnerLock(lock);
    throw unusableState("open store", stateDir, error) ?? error;
  }
}
