/**
 * The version guard: the store refuses a SQLite older than 3.51.3, naming the linked version,
 * before it touches the state directory.
 *
 * Every test runs against real SQLite files in a fresh temporary directory.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { openStore } from "../../store/store.ts";
import {
  checkSqliteVersion,
  linkedSqliteVersion,
  MIN_SQLITE_VERSION,
} from "../../store/version_guard.ts";
import { listDir, throwsKlbr, withDir } from "./_store_support.ts";

Deno.test("`checkSqliteVersion()` refuses 3.40.1 naming it and the minimum", () => {
  throwsKlbr(
    () => checkSqliteVersion("3.40.1"),
    "sqlite_too_old",
    "cannot open store: SQLite 3.40.1 is older than the minimum 3.51.3 (WAL-reset fix)",
  );
});

Deno.test("`checkSqliteVersion()` refuses 3.51.2, one patch below the minimum", () => {
  throwsKlbr(
    () => checkSqliteVersion("3.51.2"),
    "sqlite_too_old",
    "cannot open store: SQLite 3.51.2 is older than the minimum 3.51.3 (WAL-reset fix)",
  );
  throwsKlbr(() => checkSqliteVersion("2.99.99"), "sqlite_too_old", /SQLite 2\.99\.99 is older/);
});

Deno.test("`checkSqliteVersion()` refuses a version it cannot read", () => {
  for (const version of ["", "3.53", "three", "3.53.x"]) {
    throwsKlbr(
      () => checkSqliteVersion(version),
      "sqlite_too_old",
      `cannot open store: SQLite version is unreadable, the minimum is 3.51.3 (WAL-reset fix) (got ${
        JSON.stringify(version)
      })`,
    );
  }
});

Deno.test("`checkSqliteVersion()` accepts the minimum and anything newer", () => {
  assert.equal(MIN_SQLITE_VERSION, "3.51.3");
  for (const version of ["3.51.3", "3.51.10", "3.52.0", "3.53.2", "4.0.0"]) {
    checkSqliteVersion(version);
  }
});

Deno.test("`linkedSqliteVersion()` reports the linked library, which passes the guard", () => {
  const version = linkedSqliteVersion();
  assert.match(version, /^\d+\.\d+\.\d+$/);
  checkSqliteVersion(version);
});

Deno.test("`openStore()` refuses an old SQLite before touching the state directory", async () => {
  await withDir((dir) => {
    const stateDir = join(dir, "state");
    throwsKlbr(
      () => openStore(stateDir, { sqliteVersion: "3.40.1" }),
      "sqlite_too_old",
      "cannot open store: SQLite 3.40.1 is older than the minimum 3.51.3 (WAL-reset fix)",
    );
    assert.deepEqual(listDir(dir), [], "nothing was created");
  });
});
