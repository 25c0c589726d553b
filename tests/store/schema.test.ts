/**
 * Schema version 1 squashed the 13 migrations of the development builds: a fresh store's
 * schema is what that chain left (its `sqlite_master` and seeded rows were dumped into
 * `fixtures/schema_dev13.json` before the squash), the index migration 2 adds and the release
 * column migration 3 adds; a store at version 1 migrates to 2 keeping its records, one at 2
 * migrates to 3 keeping its releases; a store a development build wrote is refused with what to
 * do, left byte for byte as it was.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { KlbrError } from "../../runtime/core/mod.ts";
import {
  developmentStoreMessage,
  LATEST_VERSION,
  MIGRATIONS,
  SCHEMA_LINE,
  STORE_FORMAT,
} from "../../store/schema/migrations.ts";
import { readEventsOfKind } from "../../store/tables/events.ts";
import { openStore } from "../../store/store.ts";
import { sha256, withDir } from "./_store_support.ts";

interface SchemaDump {
  user_version: number;
  sqlite_master: [string, string, string, string | null][];
  rows: Record<string, Record<string, unknown>[]>;
}

const DEV_CHAIN: SchemaDump = JSON.parse(
  Deno.readTextFileSync(new URL("./fixtures/schema_dev13.json", import.meta.url)),
);

/** `sqlite_master` of `db` (type, name, tbl_name, sql), sorted by type and name. */
function master(db: DatabaseSync): SchemaDump["sqlite_master"] {
  return (db.prepare(
    "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name",
  ).all() as { type: string; name: string; tbl_name: string; sql: string | null }[])
    .map((r) => [r.type, r.name, r.tbl_name, r.sql]);
}

/** The rows `sql` reads, as plain objects. */
function rows(db: DatabaseSync, sql: string): Record<string, unknown>[] {
  return db.prepare(sql).all().map((row) => ({ ...row }));
}

/** Migration 2's one object. */
const RARE_KINDS_INDEX = [
  "index",
  "events_rare_kinds",
  "events",
  "CREATE INDEX events_rare_kinds ON events (session_id, kind, seq) WHERE kind IN " +
  "('route.adapted', 'model.failing', 'model.recovered')",
];

/** Migration 3's two objects: the releases table with `published_at`, and its update rule. */
const PUBLISHED_AT = [
  [
    "table",
    "releases",
    "releases",
    "CREATE TABLE releases (\n  id TEXT PRIMARY KEY CHECK (length(id) = 64 AND id NOT GLOB " +
    "'*[^0-9a-f]*'),\n  path TEXT NOT NULL,\n  created_at INTEGER NOT NULL,\n  file_count " +
    "INTEGER NOT NULL,\n  byte_count INTEGER NOT NULL\n, published_at INTEGER NOT NULL DEFAULT 0) " +
    "STRICT",
  ],
  [
    "trigger",
    "releases_no_update",
    "releases",
    "CREATE TRIGGER releases_no_update BEFORE UPDATE ON releases\nWHEN NEW.id IS NOT OLD.id OR " +
    "NEW.path IS NOT OLD.path OR NEW.created_at IS NOT OLD.created_at\n  OR NEW.file_count IS NOT " +
    "OLD.file_count OR NEW.byte_count IS NOT OLD.byte_count\n  OR NEW.published_at < " +
    "OLD.published_at\nBEGIN SELECT RAISE(ABORT, 'releases is append-only: a row changes only " +
    "its published_at, forward'); END",
  ],
];
const CHANGED = new Set([RARE_KINDS_INDEX[1], ...PUBLISHED_AT.map((row) => row[1])]);

Deno.test("a fresh store's schema is the development chain's final schema with migrations 2 and 3, exactly", async () => {
  await withDir((dir) => {
    openStore(dir).close();
    const db = new DatabaseSync(join(dir, "runtime.sqlite"), { readOnly: true });
    try {
      assert.equal(LATEST_VERSION, 3);
      assert.equal(
        (db.prepare("PRAGMA user_version").get() as { user_version: number }).user_version,
        3,
      );
      const objects = master(db);
      assert.deepEqual(
        objects.filter((row) => !CHANGED.has(row[1])),
        DEV_CHAIN.sqlite_master.filter((row) => !CHANGED.has(row[1])),
      );
      assert.deepEqual(objects.filter((row) => row[1] === RARE_KINDS_INDEX[1]), [RARE_KINDS_INDEX]);
      assert.deepEqual(
        objects.filter((row) => PUBLISHED_AT.some((changed) => changed[1] === row[1])),
        PUBLISHED_AT,
      );
      // The seeded rows too; the one row added marks the store as version 1's line.
      assert.deepEqual(rows(db, "SELECT key, value FROM klbr_meta ORDER BY key"), [
        { key: "format", value: STORE_FORMAT },
        { key: "schema", value: SCHEMA_LINE },
      ]);
      assert.deepEqual(DEV_CHAIN.rows.klbr_meta, [{ key: "format", value: STORE_FORMAT }]);
      assert.deepEqual(rows(db, "SELECT * FROM history_cursors"), DEV_CHAIN.rows.history_cursors);
    } finally {
      db.close();
    }
  });
});

Deno.test("a store at schema version 1 migrates to 2 with its records, and its rare records are found through the new index", async () => {
  await withDir((dir) => {
    const path = join(dir, "runtime.sqlite");
    const v1 = new DatabaseSync(path);
    v1.exec("PRAGMA journal_mode = WAL");
    v1.exec(MIGRATIONS[0].sql);
    v1.exec(`INSERT INTO sessions (id, created_at) VALUES ('default', 1);
             INSERT INTO events (session_id, seq, kind, at, body) VALUES
               ('default', 1, 'operator', 1, '{"op":"note"}'),
               ('default', 2, 'route.adapted', 2, '{"route":"main","setting":"role_order","to":"strict","reason":"r"}');
             UPDATE sessions SET next_seq = 3;
             PRAGMA user_version = 1;`);
    v1.close();
    const store = openStore(dir);
    try {
      const found = readEventsOfKind(store, "default", "route.adapted");
      assert.deepEqual(found.map((event) => event.seq), [2]);
      const db = new DatabaseSync(path, { readOnly: true });
      try {
        assert.equal(
          (db.prepare("PRAGMA user_version").get() as { user_version: number }).user_version,
          LATEST_VERSION,
        );
        assert.equal((db.prepare("SELECT count(*) AS n FROM events").get() as { n: number }).n, 2);
        assert.deepEqual(master(db).filter((row) => row[1] === RARE_KINDS_INDEX[1]), [
          RARE_KINDS_INDEX,
        ]);
      } finally {
        db.close();
      }
    } finally {
      store.close();
    }
  });
});

Deno.test("a store at schema version 2 migrates to 3: each release was last published when it was first, and only that time moves, forward", async () => {
  await withDir((dir) => {
    const path = join(dir, "runtime.sqlite");
    const v2 = new DatabaseSync(path);
    v2.exec("PRAGMA journal_mode = WAL");
    v2.exec(MIGRATIONS[0].sql);
    v2.exec(MIGRATIONS[1].sql);
    v2.exec(`INSERT INTO releases (id, path, created_at, file_count, byte_count)
               VALUES ('${"a".repeat(64)}', 'releases/a', 5, 1, 1);
             PRAGMA user_version = 2;`);
    v2.close();
    openStore(dir).close();
    const db = new DatabaseSync(path);
    try {
      assert.deepEqual(rows(db, "SELECT id, created_at, published_at FROM releases"), [
        { id: "a".repeat(64), created_at: 5, published_at: 5 },
      ]);
      db.exec("UPDATE releases SET published_at = 9");
      const refused = /releases is append-only: a row changes only its published_at, forward/;
      assert.throws(() => db.exec("UPDATE releases SET published_at = 8"), refused);
      assert.throws(() => db.exec("UPDATE releases SET created_at = 9"), refused);
      assert.throws(() => db.exec("UPDATE releases SET path = 'elsewhere'"), refused);
    } finally {
      db.close();
    }
  });
});

/** A klbr store as a development build left it: the format row, no schema row. */
function writeDevelopmentStore(path: string, userVersion: number): void {
  const db = new DatabaseSync(path);
  db.exec(`CREATE TABLE klbr_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) STRICT;
           INSERT INTO klbr_meta (key, value) VALUES ('format', '${STORE_FORMAT}');
           CREATE TABLE sessions (id TEXT PRIMARY KEY, created_at INTEGER NOT NULL) STRICT;
           PRAGMA user_version = ${userVersion};`);
  db.close();
}

Deno.test("a store of a development build is refused with what to do, and left unchanged", async () => {
  // 13: the last development schema; 1: the first, whose number version 1 now reuses.
  for (const version of [13, 1]) {
    await withDir((dir) => {
      const path = join(dir, "runtime.sqlite");
      writeDevelopmentStore(path, version);
      const before = sha256(path);
      assert.throws(() => openStore(dir), (error) => {
        assert.ok(error instanceof KlbrError, String(error));
        assert.equal(error.code, "foreign_store");
        assert.equal(error.message, developmentStoreMessage(path, version));
        return true;
      });
      assert.match(
        developmentStoreMessage(path, version),
        /development build of klbr .* back up the state directory and start a new one .* run the older klbr/,
      );
      assert.equal(sha256(path), before);
      assert.deepEqual(
        [...Deno.readDirSync(dir)].map((e) => e.name).sort(),
        [
          "owner.lock",
          "runtime.sqlite",
        ].filter((name) => name !== "owner.lock" || Deno.statSync(join(dir, name)).isFile),
      );
    });
  }
});
