/**
 * The store's connection: opened on a klbr store file, switched to WAL with
 * `synchronous=FULL` and foreign keys, and migrated. Private to `store.ts`.
 *
 * @module
 */

import { DatabaseSync } from "node:sqlite";
import { assert } from "../runtime/core/mod.ts";
import { migrate, STORE_FORMAT } from "./schema/migrations.ts";

/**
 * Opens the store file in WAL with `synchronous=FULL` and foreign keys on, and migrates it:
 * a new file always, an existing store of an older schema only with `upgrade` (the owner, who
 * backs the state directory up before it migrates; `docs/operations.md`).
 *
 * @throws {KlbrError} what the migrations throw; the connection is then closed.
 */
export function connect(
  path: string,
  busyTimeoutMs: number,
  options: { upgrade: boolean },
): DatabaseSync {
  const db = new DatabaseSync(path, { enableForeignKeyConstraints: true });
  try {
    db.exec(`PRAGMA busy_timeout = ${busyTimeoutMs}`);
    const mode = db.prepare("PRAGMA journal_mode = WAL").get() as { journal_mode: string };
    assert(mode.journal_mode === "wal", `journal_mode is wal (got ${mode.journal_mode})`);
    // FULL: admission is acknowledged right after COMMIT returns, so COMMIT must reach the disk.
    db.exec("PRAGMA synchronous = FULL");
    db.exec("PRAGMA foreign_keys = ON");
    // Statement journals in memory: a savepoint (each deferred write runs in one) then copies
    // pages to memory, not to a temp file. Nothing durable lives there.
    db.exec("PRAGMA temp_store = MEMORY");
    const { user_version: version } = db.prepare("PRAGMA user_version").get() as {
      user_version: number;
    };
    if (version === 0 || options.upgrade) migrate(db);
    const row = db.prepare("SELECT value FROM klbr_meta WHERE key = 'format'").get() as
      | { value: string }
      | undefined;
    assert(row?.value === STORE_FORMAT, "a migrated store has the klbr format row");
    return db;
  } catch (error) {
    db.close();
    throw error;
  }
}
