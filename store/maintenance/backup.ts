/**
 * The store's side of a backup: a consistent copy of a live store, and what a copy refers to.
 *
 * The copy is taken with SQLite's online backup API on a read-only connection, every page in
 * one step: one read transaction, so it holds exactly what was committed when it began, while
 * the owner goes on writing (WAL). (`VACUUM INTO` needs ATTACH, which Deno's SQLite does not
 * allow under its permissions.) The owner lock is not taken and the live file is never written.
 *
 * @module
 */

import { backup, DatabaseSync } from "node:sqlite";
import { KlbrError } from "../../runtime/core/mod.ts";
import { STORE_FORMAT } from "../schema/migrations.ts";
import { ifExists } from "../tables/files.ts";
import { isSqliteHeader, readHeader } from "./_inspect_file.ts";

/** What a store copy holds and refers to. */
export interface StoreCopy {
  /** `PRAGMA integrity_check`'s findings: `["ok"]` when the copy is intact. */
  integrity: string[];
  schemaVersion: number;
  /** Every recorded release id. */
  releases: string[];
  /** Every artifact id a cell's result names. */
  artifacts: string[];
  /** Each session's last sequence number. */
  sessions: { id: string; headSeq: number }[];
  /** How many inputs were admitted. */
  inputs: number;
}

/**
 * Copies the store at `source` into `target` (which must not exist) as one consistent snapshot.
 *
 * When it returns, `target` is a complete SQLite file, alone (rollback-journal mode: no `-wal`
 * or `-shm` beside it, then or after it is read), holding every transaction committed before
 * the copy began. Proven by "window backup: a backup taken during a burst restores every
 * input acknowledged before it began" in `tests/crash/backup_restore.test.ts`.
 *
 * @throws {KlbrError} `invalid_input` when `target` exists; SQLite's error when `source` cannot
 *   be read.
 */
export async function copyStore(source: string, target: string): Promise<void> {
  try {
    Deno.lstatSync(target);
    throw new KlbrError("invalid_input", `cannot copy the store: ${target} exists (got ${target})`);
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
  const db = new DatabaseSync(source, { readOnly: true });
  try {
    db.exec("PRAGMA busy_timeout = 10000");
    // A negative rate copies every page in one step, inside one read transaction.
    await backup(db, target, { rate: -1 });
  } finally {
    db.close();
  }
  // The copy takes the live store's WAL mode; as a rollback-journal file it is one file, and
  // reading it (verifying, restoring) leaves no -wal or -shm beside it.
  const copy = new DatabaseSync(target);
  try {
    copy.exec("PRAGMA journal_mode = DELETE");
  } finally {
    copy.close();
  }
}

/**
 * Reads a store copy: its integrity, schema version, and the releases and artifacts it
 * refers to.
 *
 * @throws {KlbrError} `foreign_store` when the file is not a klbr store.
 */
export function describeStoreCopy(path: string): StoreCopy {
  const db = new DatabaseSync(path, { readOnly: true });
  try {
    const integrity = (db.prepare("PRAGMA integrity_check").all() as { integrity_check: string }[])
      .map((r) => r.integrity_check);
    const format = db.prepare("SELECT value FROM klbr_meta WHERE key = 'format'").get() as
      | { value: string }
      | undefined;
    if (format?.value !== STORE_FORMAT) {
      throw new KlbrError(
        "foreign_store",
        `cannot read the store copy: it is not a klbr store (got ${path})`,
      );
    }
    const ids = (sql: string) =>
      (db.prepare(sql).all() as { id: string | null }[])
        .flatMap((r) => (typeof r.id === "string" ? [r.id] : []));
    return {
      integrity,
      schemaVersion: (db.prepare("PRAGMA user_version").get() as { user_version: number })
        .user_version,
      releases: ids("SELECT id FROM releases ORDER BY id"),
      artifacts: ids(
        `SELECT result ->> '$.stdout_artifact.id' AS id FROM cells
         UNION SELECT result ->> '$.stderr_artifact.id' FROM cells ORDER BY 1`,
      ),
      sessions: (db.prepare("SELECT id, next_seq - 1 AS head FROM sessions ORDER BY id").all() as {
        id: string;
        head: number;
      }[]).map((r) => ({ id: r.id, headSeq: r.head })),
      inputs: (db.prepare("SELECT count(*) AS n FROM inputs").get() as { n: number }).n,
    };
  } finally {
    db.close();
  }
}

/** Where `user_version` is in SQLite's file header (big-endian u32). */
const USER_VERSION_OFFSET = 60;

/**
 * The schema version (`user_version`) of the store file at `path`, read from its header
 * without opening it: nothing is created beside it. `undefined` when there is no file or it
 * is not a SQLite file; the store's own checks say why when it is opened.
 *
 * A version committed but not yet checkpointed into the file reads as the one before: the
 * caller may take a backup it did not need, never miss one it did.
 *
 * @example
 * ```ts
 * schemaVersionOnDisk(".klbr/runtime.sqlite"); // 12
 * ```
 */
export function schemaVersionOnDisk(path: string): number | undefined {
  const header = ifExists(() => readHeader(path));
  if (header === undefined || !isSqliteHeader(header)) return undefined;
  return new DataView(header.buffer).getUint32(USER_VERSION_OFFSET);
}
