/**
 * The SQLite version guard: the store refuses to run on a SQLite older than the WAL-reset fix.
 *
 * SQLite 3.51.3 fixed a WAL-reset race that can corrupt a database written by more than one
 * connection. The guard compares the linked library's version and is never weakened: tests
 * inject a version string through `openStore(dir, { sqliteVersion })` instead.
 *
 * @module
 */

import { DatabaseSync } from "node:sqlite";
import { KlbrError } from "../runtime/core/mod.ts";

/** The oldest SQLite the store accepts: the release with the WAL-reset corruption fix. */
export const MIN_SQLITE_VERSION = "3.51.3";

const VERSION = /^(\d+)\.(\d+)\.(\d+)(?:\.\d+)?$/;

function parts(version: string): [number, number, number] | undefined {
  const match = VERSION.exec(version);
  return match ? [Number(match[1]), Number(match[2]), Number(match[3])] : undefined;
}

/**
 * Returns the version of the SQLite library `node:sqlite` is linked against, e.g. `"3.53.2"`.
 *
 * @example
 * ```ts
 * checkSqliteVersion(linkedSqliteVersion());
 * ```
 */
export function linkedSqliteVersion(): string {
  const db = new DatabaseSync(":memory:");
  try {
    const row = db.prepare("SELECT sqlite_version() AS v").get() as { v: string };
    return row.v;
  } finally {
    db.close();
  }
}

/**
 * Refuses a SQLite version older than {@linkcode MIN_SQLITE_VERSION}.
 *
 * @throws {KlbrError} `sqlite_too_old` naming the version and the minimum, also when the
 *   version string cannot be read (an unreadable version is not proven to be new enough).
 * @example
 * ```ts
 * checkSqliteVersion("3.53.2"); // returns
 * checkSqliteVersion("3.40.1"); // throws sqlite_too_old
 * ```
 */
export function checkSqliteVersion(version: string): void {
  const have = parts(version);
  const min = parts(MIN_SQLITE_VERSION)!;
  if (have === undefined) {
    throw new KlbrError(
      "sqlite_too_old",
      `cannot open store: SQLite version is unreadable, the minimum is ${MIN_SQLITE_VERSION} (WAL-reset fix) (got ${
        JSON.stringify(version)
      })`,
    );
  }
  for (let i = 0; i < 3; i++) {
    if (have[i] > min[i]) return;
    if (have[i] < min[i]) {
      throw new KlbrError(
        "sqlite_too_old",
        `cannot open store: SQLite ${version} is older than the minimum ${MIN_SQLITE_VERSION} (WAL-reset fix)`,
      );
    }
  }
}
