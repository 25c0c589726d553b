/**
 * Opening the store file: creation and its pragmas, refusals of what is not a klbr store (the file
 * is left byte-for-byte as found, and no side file is left behind), and reopening after a clean
 * close or a SIGKILL.
 *
 * Every test runs against real SQLite files in a fresh temporary directory.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { appendEvent, readEvents } from "../../store/tables/events.ts";
import { finishFrame, getFrame } from "../../store/tables/frames.ts";
import { admitInput, pendingInputs } from "../../store/tables/inputs.ts";
import { LATEST_VERSION, MIGRATIONS } from "../../store/schema/migrations.ts";
import { schemaVersionOnDisk } from "../../store/maintenance/backup.ts";
import { ensureSession, getSession } from "../../store/tables/sessions.ts";
import { openStore } from "../../store/store.ts";
import { frameOf } from "../_helpers/store.ts";
import {
  ADMIT_BURST,
  count,
  lines,
  listDir,
  local,
  manualClock,
  sha256,
  spawnDeno,
  throwsKlbr,
  withDir,
  writeLegacyDb,
} from "./_store_support.ts";

Deno.test("`openStore()` creates and migrates a missing store: WAL, FULL, foreign keys", async () => {
  await withDir((dir) => {
    const stateDir = join(dir, "nested", "state");
    const store = openStore(stateDir, { busyTimeoutMs: 1234 });
    try {
      const pragma = (name: string) =>
        Object.values(store.statement(`PRAGMA ${name}`).get() as Record<string, unknown>)[0];
      assert.equal(store.path, join(stateDir, "runtime.sqlite"));
      assert.equal(pragma("journal_mode"), "wal");
      assert.equal(pragma("synchronous"), 2, "synchronous=FULL");
      assert.equal(pragma("foreign_keys"), 1);
      assert.equal(pragma("busy_timeout"), 1234);
      assert.equal(pragma("user_version"), LATEST_VERSION);
      assert.deepEqual(
        store.statement("SELECT key, value FROM klbr_meta ORDER BY key").all().map((r) => ({
          ...r,
        })),
        [{ key: "format", value: "klbr-runtime" }, { key: "schema", value: "release-1" }],
      );
    } finally {
      store.close();
    }
    // Reopening an existing store migrates nothing and keeps the format row.
    const again = openStore(stateDir, { create: false });
    again.close();
  });
});

Deno.test("`openStore()` without the owner lock leaves an older schema to the owner, who backs it up first", async () => {
  await withDir((dir) => {
    const path = join(dir, "runtime.sqlite");
    const db = new DatabaseSync(path);
    db.exec("PRAGMA journal_mode = WAL");
    db.exec(MIGRATIONS[0].sql);
    db.exec("PRAGMA user_version = 1");
    db.close();
    // `deno task doctor` between `git pull` and the start, as docs/operations.md's upgrade goes.
    const reader = openStore(dir, { create: false, owner: false });
    try {
      assert.equal(reader.schemaVersion, 1);
    } finally {
      reader.close();
    }
    assert.equal(schemaVersionOnDisk(path), 1, "the daemon still finds the schema to back up");
    const owner = openStore(dir, { create: false });
    try {
      assert.equal(owner.schemaVersion, LATEST_VERSION);
    } finally {
      owner.close();
    }
  });
});

Deno.test("`openStore()` with create false refuses a missing state directory", async () => {
  await withDir((dir) => {
    const stateDir = join(dir, "absent");
    throwsKlbr(
      () => openStore(stateDir, { create: false }),
      "state_missing",
      `cannot open store: the state directory does not exist; deno task init --state ${stateDir} makes it (got ${stateDir})`,
    );
    assert.deepEqual(listDir(dir), []);
  });
});

Deno.test("`openStore()` with create false refuses a missing runtime.sqlite", async () => {
  await withDir((dir) => {
    throwsKlbr(
      () => openStore(dir, { create: false }),
      "state_missing",
      `cannot open store: runtime.sqlite does not exist; deno task init --state ${dir} makes it (got ${
        join(dir, "runtime.sqlite")
      })`,
    );
    assert.ok(!listDir(dir).includes("runtime.sqlite"));
    // The refused open released its owner lock.
    openStore(dir).close();
  });
});

Deno.test("`openStore()` refuses a state directory that is a file", async () => {
  await withDir((dir) => {
    const stateDir = join(dir, "file");
    Deno.writeTextFileSync(stateDir, "not a directory");
    throwsKlbr(() => openStore(stateDir), "state_missing", /is not a directory/);
  });
});

Deno.test("`openStore()` refuses options that fail their schema", async () => {
  await withDir((dir) => {
    throwsKlbr(
      () => openStore(dir, { busyTimeoutMs: -1 }),
      "invalid_input",
      /^cannot open store: busyTimeoutMs .* \(got -1\)$/,
    );
    throwsKlbr(
      () => openStore(dir, { clock: 5 as unknown as () => number }),
      "invalid_input",
      /^cannot open store: clock expected a function \(got 5\)$/,
    );
    assert.deepEqual(listDir(dir), []);
  });
});

Deno.test("`openStore()` adopts a zero-byte runtime.sqlite and a table-less SQLite file", async () => {
  await withDir((dir) => {
    Deno.writeFileSync(join(dir, "runtime.sqlite"), new Uint8Array());
    openStore(dir).close();
  });
  await withDir((dir) => {
    const db = new DatabaseSync(join(dir, "runtime.sqlite"));
    db.exec("CREATE TABLE t (x); DROP TABLE t;");
    db.close();
    const store = openStore(dir);
    assert.equal(count(store, "SELECT COUNT(*) AS n FROM sessions"), 0);
    store.close();
  });
});

Deno.test("`openStore()` never opens or changes an agent.db beside the store", async () => {
  await withDir((dir) => {
    const agentDb = join(dir, "agent.db");
    writeLegacyDb(agentDb);
    const before = sha256(agentDb);
    const mtime = Deno.statSync(agentDb).mtime?.getTime();
    const store = openStore(dir);
    ensureSession(store);
    admitInput(store, local(1));
    // The only database this connection has attached is runtime.sqlite.
    const attached = store.statement("PRAGMA database_list").all() as { file: string }[];
    assert.deepEqual(attached.map((r) => r.file), [join(dir, "runtime.sqlite")]);
    store.close();
    assert.equal(sha256(agentDb), before);
    assert.equal(Deno.statSync(agentDb).mtime?.getTime(), mtime);
    assert.deepEqual(
      listDir(dir).filter((n) => n.startsWith("agent.db")),
      ["agent.db"],
      "no agent.db-wal, -shm or -journal was made",
    );
  });
});

// Legacy refusal: the file is left byte-for-byte as found, and no side file is left behind.

function assertRefusedUnchanged(dir: string, found: RegExp): void {
  const path = join(dir, "runtime.sqlite");
  const names = listDir(dir).filter((n) => n.startsWith("runtime.sqlite"));
  const before = names.map((n) => sha256(join(dir, n)));
  const error = throwsKlbr(() => openStore(dir), "foreign_store");
  assert.ok(error.message.startsWith(`cannot open store ${path}: it is not a klbr store, found `));
  assert.match(error.message, found);
  assert.ok(error.message.endsWith(`; it was left unchanged (got ${path})`));
  const after = listDir(dir).filter((n) => n.startsWith("runtime.sqlite"));
  assert.deepEqual(after, names, "no -wal, -shm or -journal appeared");
  assert.deepEqual(after.map((n) => sha256(join(dir, n))), before);
  // The refusal released the owner lock: a later owner is not blocked by it.
  throwsKlbr(() => openStore(dir), "foreign_store");
}

Deno.test("`openStore()` refuses an old agent schema and leaves it unchanged", async () => {
  await withDir((dir) => {
    writeLegacyDb(join(dir, "runtime.sqlite"));
    assertRefusedUnchanged(
      dir,
      /found a SQLite database with tables memories, messages and no klbr_meta/,
    );
  });
});

Deno.test("`openStore()` refuses a file of random bytes and leaves it unchanged", async () => {
  await withDir((dir) => {
    const bytes = crypto.getRandomValues(new Uint8Array(8192));
    bytes[0] = 0x00; // never accidentally "SQLite format 3"
    Deno.writeFileSync(join(dir, "runtime.sqlite"), bytes);
    assertRefusedUnchanged(dir, /found a file that is not a SQLite database \(first bytes 00 /);
  });
});

Deno.test("`openStore()` refuses a short non-SQLite file", async () => {
  await withDir((dir) => {
    Deno.writeTextFileSync(join(dir, "runtime.sqlite"), "hello\n");
    assertRefusedUnchanged(dir, /found a file that is not a SQLite database \(first bytes 68 65/);
  });
});

Deno.test("`openStore()` refuses a SQLite file whose klbr_meta has another format", async () => {
  await withDir((dir) => {
    const db = new DatabaseSync(join(dir, "runtime.sqlite"));
    db.exec(`CREATE TABLE klbr_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
             INSERT INTO klbr_meta VALUES ('format', 'klbr-memory');`);
    db.close();
    assertRefusedUnchanged(dir, /found klbr_meta with format "klbr-memory"/);
  });
});

Deno.test("`openStore()` refuses an empty SQLite file carrying a foreign user_version", async () => {
  await withDir((dir) => {
    const db = new DatabaseSync(join(dir, "runtime.sqlite"));
    db.exec("PRAGMA user_version = 42");
    db.close();
    assertRefusedUnchanged(dir, /found an empty SQLite database with user_version 42/);
  });
});

Deno.test("`openStore()` refuses a klbr store of a newer schema version unchanged", async () => {
  await withDir((dir) => {
    openStore(dir).close();
    const db = new DatabaseSync(join(dir, "runtime.sqlite"));
    db.exec(`PRAGMA user_version = ${LATEST_VERSION + 1}`);
    db.close();
    assertRefusedUnchanged(
      dir,
      new RegExp(`a klbr store at schema version ${LATEST_VERSION + 1}, newer than`),
    );
  });
});

Deno.test("`openStore()` refuses foreign tables that live only in the WAL", async () => {
  await withDir((dir) => {
    // A WAL database whose tables were never checkpointed: copy its files while it is open.
    const source = join(dir, "live.db");
    const live = new DatabaseSync(source);
    live.exec(`PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0;
               CREATE TABLE messages (body TEXT); INSERT INTO messages VALUES ('old');`);
    Deno.copyFileSync(source, join(dir, "runtime.sqlite"));
    Deno.copyFileSync(`${source}-wal`, join(dir, "runtime.sqlite-wal"));
    live.close();
    for (const name of listDir(dir).filter((n) => n.startsWith("live.db"))) {
      Deno.removeSync(join(dir, name));
    }
    assert.deepEqual(listDir(dir), ["runtime.sqlite", "runtime.sqlite-wal"]);
    assertRefusedUnchanged(dir, /found a SQLite database with tables messages and no klbr_meta/);
  });
});

Deno.test("`openStore()` refuses a directory named runtime.sqlite", async () => {
  await withDir((dir) => {
    Deno.mkdirSync(join(dir, "runtime.sqlite"));
    throwsKlbr(() => openStore(dir), "foreign_store", /found something that is not a regular file/);
  });
});

Deno.test("`openStore()` after a reopen keeps every input once and offers nothing consumed again", async () => {
  await withDir((dir) => {
    const time = manualClock();
    let store = openStore(dir, { clock: time.clock });
    ensureSession(store);
    const ids = Array.from({ length: 6 }, (_, i) => admitInput(store, local(i)).inputId);
    const consumed = frameOf(store, ids.slice(0, 2));
    finishFrame(store, consumed.frameId, "done", "ok");
    const inFlight = frameOf(store, ids.slice(2, 4));
    store.close();

    store = openStore(dir, { clock: time.clock, create: false });
    try {
      assert.equal(count(store, "SELECT COUNT(*) AS n FROM inputs"), 6);
      for (const id of ids) {
        assert.equal(count(store, "SELECT COUNT(*) AS n FROM inputs WHERE id = ?", id), 1);
      }
      // Neither the finished nor the still-open frame's inputs are offered again.
      assert.deepEqual(pendingInputs(store, "default").map((i) => i.id), ids.slice(4));
      // A repeated delivery after the restart is still one input.
      assert.equal(admitInput(store, local(0)).duplicate, true);
      assert.equal(getFrame(store, inFlight.frameId)?.state, "open");
      // Sequence numbers continue where they stopped.
      const last = readEvents(store, "default").at(-1)!.seq;
      assert.equal(appendEvent(store, "default", "test.after", {}), last + 1);
    } finally {
      store.close();
    }
  });
});

Deno.test("`admitInput()` loses no acknowledged input when its process is SIGKILLed", async () => {
  await withDir(async (dir) => {
    const child = spawnDeno(ADMIT_BURST, dir, "200000");
    const out = lines(child.stdout);
    const reported: string[] = [];
    try {
      while (reported.length < 300) {
        const line = await out.next();
        assert.ok(line !== undefined, "the writer ended before it was killed");
        reported.push(line);
      }
      child.kill("SIGKILL");
      // Lines already written before the kill are committed admissions too.
      for (let line = await out.next(); line !== undefined; line = await out.next()) {
        if (/^in_[0-9A-Z]{26}$/.test(line)) reported.push(line);
      }
    } finally {
      try {
        child.kill("SIGKILL");
      } catch {
        // Already dead.
      }
      await child.status;
      await child.stdin.close().catch(() => {});
    }
    assert.equal((await child.status).signal, "SIGKILL");

    const store = openStore(dir, { create: false });
    try {
      assert.equal(
        (store.statement("PRAGMA integrity_check").get() as { integrity_check: string })
          .integrity_check,
        "ok",
      );
      assert.deepEqual(store.statement("PRAGMA foreign_key_check").all(), []);
      for (const id of reported) {
        assert.equal(count(store, "SELECT COUNT(*) AS n FROM inputs WHERE id = ?", id), 1, id);
      }
      const total = count(store, "SELECT COUNT(*) AS n FROM inputs");
      assert.ok(total >= reported.length, `${total} rows for ${reported.length} reported ids`);
      assert.ok(total <= reported.length + 1, "at most the one unreported admission in flight");
      assert.equal(count(store, "SELECT COUNT(DISTINCT dedupe_key) AS n FROM inputs"), total);
      assert.equal(
        count(store, "SELECT COUNT(*) AS n FROM events WHERE kind = 'input.admitted'"),
        total,
        "every input has exactly its admission event",
      );
      assert.equal(getSession(store, "default")?.nextSeq, total + 1, "no sequence gap");
    } finally {
      store.close();
    }
  });
});
