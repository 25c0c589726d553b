/**
 * Schema version 1 squashed the 13 migrations of the development builds: a fresh store's
 * schema is what that chain left (its `sqlite_master` and seeded rows were dumped into
 * `fixtures/schema_dev13.json` before the squash) and the index migration 2 adds; a store at
 * version 1 migrates to 2 keeping its records; a store a development build wrote is refused with
 * what to do, left byte for byte as it was.
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

Deno.test("a fresh store's schema is the development chain's final schema and migration 2's index, exactly", async () => {
  await withDir((dir) => {
    openStore(dir).close();
    const db = new DatabaseSync(join(dir, "runtime.sqlite"), { readOnly: true });
    try {
      assert.equal(LATEST_VERSION, 2);
      assert.equal(
        (db.prepare("PRAGMA user_version").get() as { user_version: number }).user_version,
        2,
      );
      const objects = master(db);
      assert.deepEqual(
        objects.filter((row) => row[1] !== RARE_KINDS_INDEX[1]),
        DEV_CHAIN.sqlite_master,
      );
      assert.deepEqual(objects.filter((row) => row[1] === RARE_KINDS_INDEX[1]), [RARE_KINDS_INDEX]);
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
          2,
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
