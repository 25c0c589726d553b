/**
 * The store's schema and the mechanism that brings a store file to it.
 *
 * `PRAGMA user_version` is the number of the last migration applied; the `klbr_meta` row
 * `format = 'klbr-runtime'` marks a file as klbr's, and the row `schema = 'release-1'` marks a
 * store whose history starts at version 1, today's schema, which squashed the 13 migrations of
 * the development builds. A klbr store without that row is a development build's: it is
 * refused (see {@linkcode developmentStoreMessage}), never migrated.
 *
 * Each migration runs in its own `BEGIN IMMEDIATE` transaction together with the
 * `user_version` bump, so a crash leaves the file at one version or the next, never between.
 * Migrations are only ever appended.
 *
 * @module
 */

import type { DatabaseSync } from "node:sqlite";
import { assert } from "../../runtime/core/mod.ts";
import { SCHEMA_RULES } from "./_schema_rules.ts";
import { SCHEMA_TABLES } from "./_schema_tables.ts";

/** The value of the `klbr_meta` `format` row that marks a klbr store. */
export const STORE_FORMAT = "klbr-runtime";

/**
 * The value of the `klbr_meta` `schema` row of a store created at version 1 or later; a klbr
 * store without it was written by a development build.
 */
export const SCHEMA_LINE = "release-1";

/** One schema step: applied when `user_version` is below `version`. */
export interface Migration {
  /** 1, 2, 3, … without gaps. */
  readonly version: number;
  /** A short name for logs. */
  readonly name: string;
  /** The statements, run in one transaction. */
  readonly sql: string;
}

const V1 = `${SCHEMA_TABLES}
${SCHEMA_RULES}
INSERT INTO klbr_meta (key, value) VALUES ('format', '${STORE_FORMAT}');
INSERT INTO klbr_meta (key, value) VALUES ('schema', '${SCHEMA_LINE}');
INSERT INTO history_cursors (source, last_rowid) VALUES ('inputs', 0);
`;

/**
 * Record types a session writes seldom and looks for on every turn (a route's adaptations, the
 * last word on a failing model). They have an index of their own, so finding them reads none of
 * the other records however long the log grows; a query uses it when it repeats
 * {@linkcode RARE_KINDS_TERM} (`store/tables/events.ts` does).
 */
export const RARE_KINDS = ["route.adapted", "model.failing", "model.recovered"] as const;

/** The partial index's condition, word for word as migration 2 wrote it. */
export const RARE_KINDS_TERM = `kind IN (${RARE_KINDS.map((kind) => `'${kind}'`).join(", ")})`;

const V2 =
  `CREATE INDEX events_rare_kinds ON events (session_id, kind, seq) WHERE ${RARE_KINDS_TERM};`;

/**
 * When a release was last published. A tree published again (an agent reverting to an earlier
 * version) is the release it was, with its first row; retention keeps it for as long as a new
 * one, so the row's one changing field is this time, and it only moves forward.
 */
const V3 = `ALTER TABLE releases ADD COLUMN published_at INTEGER NOT NULL DEFAULT 0;
DROP TRIGGER releases_no_update;
UPDATE releases SET published_at = created_at;
CREATE TRIGGER releases_no_update BEFORE UPDATE ON releases
WHEN NEW.id IS NOT OLD.id OR NEW.path IS NOT OLD.path OR NEW.created_at IS NOT OLD.created_at
  OR NEW.file_count IS NOT OLD.file_count OR NEW.byte_count IS NOT OLD.byte_count
  OR NEW.published_at < OLD.published_at
BEGIN SELECT RAISE(ABORT, 'releases is append-only: a row changes only its published_at, forward'); END;`;

/** Every migration, in order. Append only; never edit a released entry. */
export const MIGRATIONS: readonly Migration[] = [
  { version: 1, name: "the schema", sql: V1 },
  { version: 2, name: "an index of the rare record types", sql: V2 },
  { version: 3, name: "when a release was last published", sql: V3 },
];

/** The `user_version` a fully migrated store has. */
export const LATEST_VERSION: number = MIGRATIONS[MIGRATIONS.length - 1].version;

/**
 * What a store of a development build is told: it is refused, and how to go on.
 *
 * @example
 * ```ts
 * throw new KlbrError("foreign_store", developmentStoreMessage(path, 13));
 * ```
 */
export function developmentStoreMessage(path: string, userVersion: number): string {
  return `cannot open store ${path}: it was written by a development build of klbr (schema ` +
    `${userVersion} of the pre-release migrations, which this build no longer carries); back up ` +
    `the state directory and start a new one (deno task init --state <new dir>), or run the ` +
    `older klbr that wrote it to read or export what you need; it was left unchanged (got ${path})`;
}

/**
 * Applies every migration above the file's `user_version`, each in its own transaction.
 *
 * When it returns, `user_version` is {@linkcode LATEST_VERSION} and `klbr_meta.format` is
 * {@linkcode STORE_FORMAT}. The caller has already refused a file newer than this build and a
 * development build's.
 *
 * @throws {Error} the SQLite error of a failing migration; that migration is rolled back.
 */
export function migrate(db: DatabaseSync): void {
  const current = (db.prepare("PRAGMA user_version").get() as { user_version: number })
    .user_version;
  assert(current <= LATEST_VERSION, `store version ${current} above ${LATEST_VERSION}`);
  for (const [index, migration] of MIGRATIONS.entries()) {
    assert(migration.version === index + 1, "migration versions are 1, 2, 3, …");
    if (migration.version <= current) continue;
    db.exec("BEGIN IMMEDIATE");
    try {
      db.exec(migration.sql);
      db.exec(`PRAGMA user_version = ${migration.version}`);
      db.exec("COMMIT");
    } catch (error) {
      if (db.isTransaction) db.exec("ROLLBACK");
      throw error;
    }
  }
}
