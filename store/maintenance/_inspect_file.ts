/**
 * Decides, without writing a byte, whether a file may be opened as the klbr store.
 *
 * The first 100 bytes are checked for the SQLite header before SQLite sees the file. A SQLite
 * file is then read through a read-only connection, which takes only shared locks and never
 * writes the database or its `-wal`, so tables that live only in an uncheckpointed WAL are
 * seen too. A klbr store is then checked with `PRAGMA quick_check`: a damaged one is refused
 * before anything writes to it. A large store unchanged since the owner's last clean close
 * (`_clean_close.ts`) skips the check: nothing wrote it since. A `-wal` or `-shm` that this read had to create is removed
 * again when the file is refused, so a refused file is left exactly as it was found.
 *
 * @module
 */

import { DatabaseSync } from "node:sqlite";
import { join } from "node:path";
import { KlbrError } from "../../runtime/core/mod.ts";
import { closedCleanly } from "../_clean_close.ts";
import { storeFailure } from "../_store_errors.ts";
import { ifExists } from "../tables/files.ts";
import {
  developmentStoreMessage,
  LATEST_VERSION,
  SCHEMA_LINE,
  STORE_FORMAT,
} from "../schema/migrations.ts";

/** What an inspected path holds. */
export type StoreFileState = "absent" | "empty" | "klbr";

const HEADER = new TextEncoder().encode("SQLite format 3\0");

function size(path: string): number | undefined {
  return ifExists(() => Deno.statSync(path).size);
}

function foreign(path: string, found: string): KlbrError {
  return new KlbrError(
    "foreign_store",
    `cannot open store ${path}: it is not a klbr store, found ${found}; it was left unchanged (got ${path})`,
  );
}

function damaged(path: string, found: string): KlbrError {
  return new KlbrError(
    "store_corrupt",
    `cannot open store ${path}: the file is damaged (${
      found.slice(0, 300)
    }); restore a backup (deno task klbr restore <dir>) or move the file aside; it was left unchanged (got ${path})`,
  );
}

/** The first 100 bytes of the file at `path` (fewer when it is shorter): SQLite's header. */
export function readHeader(path: string): Uint8Array {
  const file = Deno.openSync(path, { read: true });
  try {
    const buffer = new Uint8Array(100);
    let filled = 0;
    while (filled < buffer.length) {
      const n = file.readSync(buffer.subarray(filled));
      if (n === null || n === 0) break;
      filled += n;
    }
    return buffer.subarray(0, filled);
  } finally {
    file.close();
  }
}

/** Whether `header` is a whole SQLite database header. */
export function isSqliteHeader(header: Uint8Array): boolean {
  return header.length === 100 && HEADER.every((b, i) => header[i] === b);
}

interface Schema {
  tables: string[];
  userVersion: number;
  format: string | null | undefined;
  /** The `klbr_meta` `schema` row; `null` in a development build's store. */
  schemaLine: string | null;
  /** `quick_check`'s findings for a klbr store: `["ok"]` when it is intact. */
  check: string[];
}

function readSchema(path: string, check: boolean): Schema {
  const db = new DatabaseSync(path, { readOnly: true });
  try {
    const tables = (db.prepare(
      "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name",
    ).all() as { name: string }[]).map((r) => r.name);
    const userVersion = (db.prepare("PRAGMA user_version").get() as { user_version: number })
      .user_version;
    let format: string | null | undefined;
    let schemaLine: string | null = null;
    if (tables.includes("klbr_meta")) {
      const meta = (key: string) =>
        db.prepare("SELECT value FROM klbr_meta WHERE key = ?").get(key) as
          | { value: string }
          | undefined;
      const row = meta("format");
      format = row ? String(row.value) : null;
      schemaLine = meta("schema")?.value ?? null;
    }
    const findings = format === STORE_FORMAT && check
      ? (db.prepare("PRAGMA quick_check(5)").all() as { quick_check: string }[])
        .map((r) => r.quick_check)
      : ["ok"];
    return { tables, userVersion, format, schemaLine, check: findings };
  } finally {
    db.close();
  }
}

function judge(path: string, schema: Schema): StoreFileState {
  if (schema.format === STORE_FORMAT) {
    if (schema.schemaLine !== SCHEMA_LINE) {
      throw new KlbrError("foreign_store", developmentStoreMessage(path, schema.userVersion));
    }
    if (schema.userVersion > LATEST_VERSION) {
      throw foreign(
        path,
        `a klbr store at schema version ${schema.userVersion}, newer than this build's ${LATEST_VERSION} (run the klbr build that wrote it, or restore a backup made by this one)`,
      );
    }
    if (schema.check.join() !== "ok") {
      throw damaged(path, `quick_check found ${schema.check.join("; ")}`);
    }
    return "klbr";
  }
  if (schema.format !== undefined) {
    throw foreign(path, `klbr_meta with format ${JSON.stringify(schema.format)}`);
  }
  if (schema.tables.length > 0) {
    const shown = schema.tables.slice(0, 8).join(", ");
    const more = schema.tables.length > 8 ? `, … (${schema.tables.length} in all)` : "";
    throw foreign(path, `a SQLite database with tables ${shown}${more} and no klbr_meta`);
  }
  if (schema.userVersion !== 0) {
    throw foreign(path, `an empty SQLite database with user_version ${schema.userVersion}`);
  }
  return "empty";
}

/**
 * Inspects `path` read-only and says whether it is absent, empty (safe to initialise) or klbr's.
 *
 * @throws {KlbrError} `foreign_store` naming the path and what was found, for anything else; the
 *   file and its side files are then exactly as they were.
 */
export function inspectStoreFile(path: string): StoreFileState {
  const mainSize = size(path);
  if (mainSize === undefined) return "absent";
  if (!Deno.statSync(path).isFile) throw foreign(path, "something that is not a regular file");
  // SQLite itself discards a -wal beside a zero-byte database, so a zero-byte file is empty.
  if (mainSize === 0) return "empty";
  const header = readHeader(path);
  if (!isSqliteHeader(header)) {
    const hex = Array.from(header.subarray(0, 16), (b) => b.toString(16).padStart(2, "0"));
    throw foreign(path, `a file that is not a SQLite database (first bytes ${hex.join(" ")})`);
  }
  // A read-only connection never writes the database or its -wal, but on a WAL-mode file it
  // may create a -wal or -shm that were not there; those are removed again unless it is ours.
  const sideFiles = ["-wal", "-shm"].map((suffix) => `${path}${suffix}`);
  const existed = sideFiles.map((side) => size(side) !== undefined);
  try {
    return judge(path, readSchema(path, !closedCleanly(path)));
  } catch (error) {
    for (const [i, side] of sideFiles.entries()) {
      if (!existed[i]) ifExists(() => Deno.removeSync(side));
    }
    if (error instanceof KlbrError) throw error;
    if (storeFailure(error) === "corrupt") throw damaged(path, (error as Error).message);
    throw foreign(path, `a SQLite file that cannot be read (${(error as Error).message})`);
  }
}

/** What the state directory holds beside the store that only a store with history points at. */
const HISTORY_DIRS = ["releases", "artifacts"];

/**
 * Refuses to start a fresh store where the state directory shows one existed: releases or
 * artifacts beside an absent or zero-byte `runtime.sqlite` mean its history was lost, and a
 * new empty store would hide that.
 */
export function refuseLostHistory(stateDir: string, path: string, state: "absent" | "empty"): void {
  const found = HISTORY_DIRS.filter((dir) => {
    try {
      for (const _ of Deno.readDirSync(join(stateDir, dir))) return true;
    } catch { /* absent */ }
    return false;
  });
  if (found.length === 0) return;
  throw new KlbrError(
    "store_corrupt",
    `cannot open store: runtime.sqlite is ${
      state === "absent" ? "missing" : "empty (zero bytes)"
    } but the state directory holds ${
      found.join(" and ")
    }, so its history is gone; restore a backup (deno task klbr restore <dir>), or move the directory aside to start afresh (got ${path})`,
  );
}

/**
 * Opening an existing file for write changes nothing; a file that refuses it (immutable,
 * read-only) is refused before SQLite sees it. An absent file is for the caller to judge.
 */
export function requireWritable(path: string): void {
  try {
    Deno.openSync(path, { read: true, write: true }).close();
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound) && !(error instanceof Deno.errors.IsADirectory)) {
      throw error;
    }
  }
}
