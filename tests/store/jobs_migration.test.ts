// Migration 7 rebuilds the inbox to admit job inputs: every input of a version-6 store survives
// with its identity, status and frame, and the inbox's triggers and indexes are back.

import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { join } from "node:path";
import { MIGRATIONS } from "../../store/migrations.ts";
import { admitInput, getInput, pendingInputs } from "../../store/inputs.ts";
import { openStore } from "../../store/store.ts";

Deno.test("migration 7 keeps every input of a version-6 store and admits job inputs", async () => {
  const dir = await Deno.makeTempDir({ prefix: "klbr-mig6-" });
  try {
    const db = new DatabaseSync(join(dir, "runtime.sqlite"));
    db.exec("PRAGMA journal_mode = WAL");
    for (const migration of MIGRATIONS.filter((m) => m.version <= 6)) {
      db.exec("BEGIN");
      db.exec(migration.sql);
      db.exec(`PRAGMA user_version = ${migration.version}`);
      db.exec("COMMIT");
    }
    db.exec("INSERT INTO sessions (id, created_at, next_seq) VALUES ('default', 1, 3)");
    const insert = db.prepare(
      `INSERT INTO inputs (id, session_id, source_kind, dedupe_key, conversation_id, author, body,
       received_at, admitted_at, admitted_seq, status) VALUES (?, 'default', ?, ?, 'local:default', 'owner', '"hi"', 1, 1, ?, 'pending')`,
    );
    insert.run("in_1", "local", "local:c:1", 1);
    insert.run("in_2", "timer", "timer:t1", 2);
    assert.throws(() => insert.run("in_3", "job", "job:j1", 3), /CHECK constraint failed/);
    db.close();

    const store = openStore(dir);
    try {
      assert.equal(store.schemaVersion, MIGRATIONS.at(-1)!.version);
      assert.deepEqual(pendingInputs(store, "default").map((i) => [i.id, i.sourceKind, i.seq]), [
        ["in_1", "local", 1],
        ["in_2", "timer", 2],
      ]);
      const job = admitInput(store, {
        session: "default",
        sourceKind: "job",
        dedupeKey: "job:j1",
        conversationId: "local:default",
        author: "job",
        body: "done",
      });
      assert.equal(getInput(store, job.inputId)?.sourceKind, "job");
      // The rebuilt inbox keeps its rules: identity immutable, rows never deleted.
      assert.throws(
        () => store.statement("UPDATE inputs SET body = '\"x\"' WHERE id = 'in_1'").run(),
        /immutable/,
      );
      assert.throws(
        () => store.statement("DELETE FROM inputs WHERE id = 'in_1'").run(),
        /never deleted/,
      );
      const indexes = store.statement(
        "SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'inputs' AND sql IS NOT NULL ORDER BY name",
      ).all() as { name: string }[];
      // The rebuilt table's indexes, and migration 11's on top.
      assert.deepEqual(indexes.map((i) => i.name), [
        "inputs_conversation",
        "inputs_frame",
        "inputs_pending",
      ]);
    } finally {
      store.close();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
