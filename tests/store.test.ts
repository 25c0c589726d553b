/**
 * The SQLite store: version guard, opening, legacy refusal, owner lock, the writer modules of
 * every table, release snapshots, and reopening after a clean close or a SIGKILL.
 *
 * Every test runs against real SQLite files in a fresh `Deno.makeTempDir()`. Multi-process
 * tests start real Deno children (`tests/store/*.ts`) and never wait on a timer: they read the
 * child's stdout line by line and kill it with SIGKILL.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import fc from "fast-check";
import { KlbrError } from "../runtime/core/mod.ts";
import { finishCell, getCell, interruptOpenCells, startCell } from "../store/cells.ts";
import { discordDedupeKey, localDedupeKey } from "../store/dedupe_keys.ts";
import { appendEvent, readEvents } from "../store/events.ts";
import { adoptFrame, finishFrame, getFrame, openFrames } from "../store/frames.ts";
import {
  type AdmitInput,
  admitInput,
  getInput,
  pendingInputs,
  pendingSummary,
} from "../store/inputs.ts";
import { currentGeneration, startGeneration } from "../store/kernel_generations.ts";
import { LATEST_VERSION } from "../store/migrations.ts";
import { readOwnerLock } from "../store/owner_lock.ts";
import { activateRelease, getRelease, markLastGood, recordRelease } from "../store/releases.ts";
import { ensureSession, getSession } from "../store/sessions.ts";
import { publishRelease, snapshotTree, verifyRelease } from "../store/snapshot_hash.ts";
import { openStore, type Store } from "../store/store.ts";
import { frameOf } from "./_helpers/store.ts";
import {
  checkSqliteVersion,
  linkedSqliteVersion,
  MIN_SQLITE_VERSION,
} from "../store/version_guard.ts";

const HOLD_OWNER = new URL("./store/hold_owner.ts", import.meta.url).pathname;
const ADMIT_BURST = new URL("./store/admit_burst.ts", import.meta.url).pathname;

// ---------------------------------------------------------------------------------------------
// helpers

/** Asserts that `fn` throws a KlbrError with `code` whose message equals or matches `message`. */
function throwsKlbr(fn: () => unknown, code: string, message?: string | RegExp): KlbrError {
  let caught: unknown;
  try {
    fn();
  } catch (error) {
    caught = error;
  }
  return checkKlbr(caught, code, message);
}

async function rejectsKlbr(
  fn: () => Promise<unknown>,
  code: string,
  message?: string | RegExp,
): Promise<KlbrError> {
  let caught: unknown;
  try {
    await fn();
  } catch (error) {
    caught = error;
  }
  return checkKlbr(caught, code, message);
}

function checkKlbr(caught: unknown, code: string, message?: string | RegExp): KlbrError {
  assert.ok(caught instanceof KlbrError, `expected a KlbrError ${code}, got ${String(caught)}`);
  assert.equal(caught.code, code, caught.message);
  if (typeof message === "string") assert.equal(caught.message, message);
  if (message instanceof RegExp) assert.match(caught.message, message);
  return caught;
}

/** Runs `fn` with a fresh temp dir and removes it afterwards. */
async function withDir(fn: (dir: string) => Promise<void> | void): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "klbr-store-" });
  try {
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** A clock tests move by hand. */
function manualClock(): { now: number; clock: () => number } {
  const state = { now: Date.now(), clock: () => state.now };
  return state;
}

/** Opens a store with session `default`, runs `fn`, closes it. */
async function withStore(
  fn: (store: Store, dir: string, time: { now: number }) => Promise<void> | void,
): Promise<void> {
  await withDir(async (dir) => {
    const time = manualClock();
    const store = openStore(dir, { clock: time.clock });
    try {
      ensureSession(store);
      await fn(store, dir, time);
    } finally {
      store.close();
    }
  });
}

function sha256(path: string): string {
  return createHash("sha256").update(Deno.readFileSync(path)).digest("hex");
}

function listDir(dir: string): string[] {
  return [...Deno.readDirSync(dir)].map((e) => e.name).sort();
}

function local(n: number | string, session = "default"): AdmitInput {
  return {
    session,
    sourceKind: "local",
    dedupeKey: localDedupeKey("cl_test", `m${n}`),
    conversationId: "local:main",
    author: "owner",
    body: { text: `hello ${n}` },
  };
}

function count(store: Store, sql: string, ...params: (string | number)[]): number {
  return (store.statement(sql).get(...params) as { n: number }).n;
}

/** Makes a SQLite file of an old agent: tables `messages` and `memories`, no klbr_meta. */
function writeLegacyDb(path: string): void {
  const db = new DatabaseSync(path);
  db.exec(`CREATE TABLE messages (id INTEGER PRIMARY KEY, body TEXT);
           CREATE TABLE memories (id INTEGER PRIMARY KEY, note TEXT);
           INSERT INTO messages (body) VALUES ('old'), ('older');`);
  db.close();
}

/** A line reader over a child's stdout. */
function lines(stream: ReadableStream<Uint8Array>) {
  const reader = stream.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  return {
    /** The next complete line, or `undefined` at end of stream. */
    async next(): Promise<string | undefined> {
      for (let reads = 0; reads < 1_000_000; reads++) {
        const newline = buffer.indexOf("\n");
        if (newline >= 0) {
          const line = buffer.slice(0, newline);
          buffer = buffer.slice(newline + 1);
          return line;
        }
        const { value, done } = await reader.read();
        if (done) return undefined;
        buffer += value;
      }
      throw new Error("line reader did not finish");
    },
    cancel: () => reader.cancel(),
  };
}

function spawnDeno(script: string, ...args: string[]): Deno.ChildProcess {
  return new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--allow-read",
      "--allow-write",
      "--allow-env",
      "--allow-sys",
      script,
      ...args,
    ],
    stdin: "piped",
    stdout: "piped",
    stderr: "null",
  }).spawn();
}

// ---------------------------------------------------------------------------------------------
// version guard

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

// ---------------------------------------------------------------------------------------------
// opening

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
        store.statement("SELECT key, value FROM klbr_meta").all().map((r) => ({ ...r })),
        [{ key: "format", value: "klbr-runtime" }],
      );
    } finally {
      store.close();
    }
    // Reopening an existing store migrates nothing and keeps the format row.
    const again = openStore(stateDir, { create: false });
    again.close();
  });
});

Deno.test("`openStore()` with create false refuses a missing state directory", async () => {
  await withDir((dir) => {
    const stateDir = join(dir, "absent");
    throwsKlbr(
      () => openStore(stateDir, { create: false }),
      "state_missing",
      `cannot open store: the state directory does not exist; run init (got ${stateDir})`,
    );
    assert.deepEqual(listDir(dir), []);
  });
});

Deno.test("`openStore()` with create false refuses a missing runtime.sqlite", async () => {
  await withDir((dir) => {
    throwsKlbr(
      () => openStore(dir, { create: false }),
      "state_missing",
      `cannot open store: runtime.sqlite does not exist; run init (got ${
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

// ---------------------------------------------------------------------------------------------
// legacy refusal: the file is left byte-for-byte as found, and no side file is left behind

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

// ---------------------------------------------------------------------------------------------
// owner lock

Deno.test("`openStore()` refuses a second owner in the same process, naming the pid", async () => {
  await withDir((dir) => {
    const time = manualClock();
    const first = openStore(dir, { clock: time.clock });
    try {
      const started = new Date(time.now).toISOString();
      throwsKlbr(
        () => openStore(dir),
        "owner_locked",
        new RegExp(
          `^cannot open store as owner: the state directory is held by pid ${Deno.pid} started at ${
            started.replace(/[.]/g, "\\.")
          } on .+ \\(got ${join(dir, "owner.lock")}\\)$`,
        ),
      );
      // A non-owner open is not refused.
      openStore(dir, { owner: false }).close();
    } finally {
      first.close();
    }
  });
});

Deno.test("`close()` releases the owner lock for the next opener", async () => {
  await withDir((dir) => {
    const first = openStore(dir);
    first.close();
    first.close(); // a second close is a no-op
    const second = openStore(dir);
    assert.equal(readOwnerLock(dir)?.holder.pid, Deno.pid);
    second.close();
    assert.equal(readOwnerLock(dir), undefined, "a released lock names nobody");
  });
});

Deno.test("`openStore()` refuses a second owner process and names its pid", async () => {
  await withDir(async (dir) => {
    const holder = spawnDeno(HOLD_OWNER, dir);
    const holderOut = lines(holder.stdout);
    try {
      const ready = JSON.parse((await holderOut.next())!);
      assert.deepEqual(ready, { ready: true, pid: holder.pid });
      // A second, real process is refused and names the holder.
      const second = spawnDeno(HOLD_OWNER, dir);
      const secondOut = lines(second.stdout);
      const refusal = JSON.parse((await secondOut.next())!);
      await second.stdin.close();
      assert.equal((await second.status).code, 3);
      assert.equal(refusal.error, "owner_locked");
      assert.match(refusal.message, new RegExp(`held by pid ${holder.pid} started at \\d{4}-`));
      // So is this process.
      throwsKlbr(() => openStore(dir), "owner_locked", new RegExp(`held by pid ${holder.pid} `));
      assert.deepEqual(readOwnerLock(dir)?.alive, true);
    } finally {
      await holder.stdin.close();
      await holder.status;
    }
    // After a clean exit the directory is free.
    openStore(dir).close();
  });
});

Deno.test("`openStore()` recovers the owner lock of a SIGKILLed process", async () => {
  await withDir(async (dir) => {
    const victim = spawnDeno(HOLD_OWNER, dir);
    const out = lines(victim.stdout);
    assert.deepEqual(JSON.parse((await out.next())!), { ready: true, pid: victim.pid });
    throwsKlbr(() => openStore(dir), "owner_locked", new RegExp(`pid ${victim.pid} `));
    victim.kill("SIGKILL");
    const status = await victim.status;
    assert.equal(status.signal, "SIGKILL");
    await victim.stdin.close().catch(() => {});
    // The dead holder's file still names it, and it is reported dead.
    assert.deepEqual(readOwnerLock(dir), {
      holder: readOwnerLock(dir)!.holder,
      alive: false,
    });
    assert.equal(readOwnerLock(dir)!.holder.pid, victim.pid);
    // A new process recovers the lock.
    const heir = spawnDeno(HOLD_OWNER, dir);
    const heirOut = lines(heir.stdout);
    try {
      assert.deepEqual(JSON.parse((await heirOut.next())!), { ready: true, pid: heir.pid });
      throwsKlbr(() => openStore(dir), "owner_locked", new RegExp(`pid ${heir.pid} `));
    } finally {
      await heir.stdin.close();
      assert.equal((await heir.status).code, 0);
    }
  });
});

Deno.test("`openStore()` takes over a lock file that names a dead process", async () => {
  await withDir((dir) => {
    Deno.writeTextFileSync(
      join(dir, "owner.lock"),
      JSON.stringify({
        pid: 2 ** 22 + 7, // above pid_max on Linux: never a live process
        started_at: 0,
        hostname: "elsewhere",
      }),
    );
    assert.equal(readOwnerLock(dir)?.alive, false);
    const store = openStore(dir);
    try {
      assert.equal(readOwnerLock(dir)?.holder.pid, Deno.pid);
      assert.equal(readOwnerLock(dir)?.alive, true);
    } finally {
      store.close();
    }
  });
});

// ---------------------------------------------------------------------------------------------
// transactions

Deno.test("`transaction()` rolls back every write when the body throws", async () => {
  await withStore((store) => {
    assert.throws(
      () =>
        store.transaction(() => {
          admitInput(store, local(1));
          appendEvent(store, "default", "test.note", { n: 1 });
          throw new Error("boom");
        }),
      /boom/,
    );
    assert.equal(count(store, "SELECT COUNT(*) AS n FROM inputs"), 0);
    assert.equal(count(store, "SELECT COUNT(*) AS n FROM events"), 0);
    assert.equal(getSession(store, "default")?.nextSeq, 1);
    // No transaction was left open: a new one begins.
    assert.doesNotThrow(() => store.transaction(() => {}));
  });
});

Deno.test("`transaction()` refuses an async body and writes nothing", async () => {
  await withStore((store) => {
    assert.throws(
      () =>
        store.transaction(() => {
          appendEvent(store, "default", "test.note", {});
          return Promise.resolve(1);
        }),
      /a store transaction body is synchronous/,
    );
    assert.equal(count(store, "SELECT COUNT(*) AS n FROM events"), 0);
  });
});

Deno.test("`transaction()` rolls back only a failed nested call", async () => {
  await withStore((store) => {
    store.transaction(() => {
      admitInput(store, local(1));
      assert.throws(() => admitInput(store, { ...local(2), author: "" }), KlbrError);
      assert.throws(
        () =>
          store.transaction(() => {
            admitInput(store, local(3));
            throw new Error("inner");
          }),
        /inner/,
      );
    });
    assert.deepEqual(pendingInputs(store, "default").map((i) => i.dedupeKey), [
      "local:cl_test:m1",
    ]);
    assert.deepEqual(readEvents(store, "default").map((e) => e.seq), [1]);
  });
});

// ---------------------------------------------------------------------------------------------
// sessions and events

Deno.test("`ensureSession()` creates the default session once", async () => {
  await withStore((store, _dir, time) => {
    const first = getSession(store, "default")!;
    time.now += 5;
    const again = ensureSession(store);
    assert.deepEqual(again, first);
    assert.deepEqual(
      { ...first, createdAt: 0 },
      {
        id: "default",
        createdAt: 0,
        state: "open",
        contextEpoch: 0,
        behaviorEpoch: 0,
        activeRelease: null,
        lastGoodRelease: null,
        nextSeq: 1,
      },
    );
    assert.equal(count(store, "SELECT COUNT(*) AS n FROM sessions"), 1);
  });
});

Deno.test("`ensureSession()` refuses a malformed session id", async () => {
  await withStore((store) => {
    for (const id of ["", " x", "a/b", "x".repeat(65), "line\nbreak"]) {
      throwsKlbr(
        () => ensureSession(store, id),
        "invalid_input",
        `cannot use session id: expected 1-64 letters, digits, "_", "." or "-" (got ${
          JSON.stringify(id)
        })`,
      );
    }
    assert.equal(count(store, "SELECT COUNT(*) AS n FROM sessions"), 1);
  });
});

Deno.test("`appendEvent()` numbers a session's events 1, 2, 3 without gaps", async () => {
  await withStore((store) => {
    ensureSession(store, "other");
    assert.equal(appendEvent(store, "default", "test.a", { n: 1 }), 1);
    assert.equal(appendEvent(store, "other", "test.a", { n: 1 }), 1);
    assert.equal(appendEvent(store, "default", "test.b", "text"), 2);
    assert.throws(() => appendEvent(store, "default", "Bad Kind", {}), KlbrError);
    assert.equal(appendEvent(store, "default", "test.c", [1, 2]), 3);
    assert.deepEqual(
      readEvents(store, "default").map((e) => [e.seq, e.kind, e.body]),
      [[1, "test.a", { n: 1 }], [2, "test.b", "text"], [3, "test.c", [1, 2]]],
    );
    assert.equal(getSession(store, "default")?.nextSeq, 4);
  });
});

Deno.test("`appendEvent()` refuses an unknown session and writes nothing", async () => {
  await withStore((store) => {
    throwsKlbr(
      () => appendEvent(store, "ghost", "test.a", {}),
      "not_found",
      'cannot use session: it does not exist; call ensureSession first (got "ghost")',
    );
    assert.equal(count(store, "SELECT COUNT(*) AS n FROM events"), 0);
  });
});

Deno.test("`appendEvent()` refuses a malformed kind and a body that is not JSON", async () => {
  await withStore((store) => {
    for (const kind of ["", "Upper", "a..b", "a.", "9a", "a b"]) {
      throwsKlbr(
        () => appendEvent(store, "default", kind, {}),
        "invalid_input",
        `cannot append event: kind must be dotted lowercase words (got ${JSON.stringify(kind)})`,
      );
    }
    throwsKlbr(
      () => appendEvent(store, "default", "test.a", undefined),
      "invalid_input",
      "cannot append event test.a: body is not JSON (got undefined)",
    );
    throwsKlbr(() => appendEvent(store, "default", "test.a", { n: 1n }), "invalid_input");
    assert.equal(count(store, "SELECT COUNT(*) AS n FROM events"), 0);
    assert.equal(getSession(store, "default")?.nextSeq, 1);
  });
});

Deno.test("the events table refuses UPDATE and DELETE", async () => {
  await withStore((store) => {
    appendEvent(store, "default", "test.a", {});
    assert.throws(
      () => store.statement("UPDATE events SET kind = 'x'").run(),
      /events is append-only/,
    );
    assert.throws(() => store.statement("DELETE FROM events").run(), /events is append-only/);
    assert.deepEqual(readEvents(store, "default").map((e) => e.kind), ["test.a"]);
  });
});

Deno.test("`readEvents()` returns the events after `since`, in order, up to `limit`", async () => {
  await withStore((store) => {
    for (let i = 0; i < 10; i++) appendEvent(store, "default", "test.n", { i });
    assert.deepEqual(readEvents(store, "default", { since: 7 }).map((e) => e.seq), [8, 9, 10]);
    assert.deepEqual(readEvents(store, "default", { since: 2, limit: 3 }).map((e) => e.seq), [
      3,
      4,
      5,
    ]);
    assert.deepEqual(readEvents(store, "default", { since: 10 }), []);
    assert.deepEqual(readEvents(store, "ghost"), []);
  });
});

Deno.test("`readEvents()` refuses a negative `since` and a `limit` out of range", async () => {
  await withStore((store) => {
    throwsKlbr(
      () => readEvents(store, "default", { since: -1 }),
      "invalid_input",
      "cannot read events: since must be an integer >= 0 (got -1)",
    );
    for (const limit of [0, 10_001, 1.5]) {
      throwsKlbr(
        () => readEvents(store, "default", { limit }),
        "invalid_input",
        `cannot read events: limit must be an integer in 1-10000 (got ${limit})`,
      );
    }
  });
});

// ---------------------------------------------------------------------------------------------
// admission

Deno.test("`admitInput()` commits the input and its input.admitted event together", async () => {
  await withStore((store, _dir, time) => {
    const receivedAt = time.now - 40;
    const result = admitInput(store, { ...local(1), receivedAt });
    assert.equal(result.duplicate, false);
    assert.equal(result.seq, 1);
    assert.match(result.inputId, /^in_[0-9A-Z]{26}$/);
    assert.deepEqual(getInput(store, result.inputId), {
      id: result.inputId,
      session: "default",
      sourceKind: "local",
      dedupeKey: "local:cl_test:m1",
      conversationId: "local:main",
      author: "owner",
      body: { text: "hello 1" },
      receivedAt,
      admittedAt: time.now,
      seq: 1,
      status: "pending",
      frameId: null,
      disposition: null,
      dispositionReason: null,
    });
    assert.deepEqual(readEvents(store, "default"), [{
      session: "default",
      seq: 1,
      kind: "input.admitted",
      at: time.now,
      body: {
        input_id: result.inputId,
        source_kind: "local",
        dedupe_key: "local:cl_test:m1",
        conversation_id: "local:main",
        author: "owner",
        received_at: receivedAt,
        body: { text: "hello 1" },
      },
    }]);
  });
});

Deno.test("`admitInput()` keeps one row for a repeated dedupe key", async () => {
  await withStore((store) => {
    const first = admitInput(store, local(1));
    admitInput(store, local(2));
    const repeat = admitInput(store, { ...local(1), body: "a different body", author: "x" });
    assert.deepEqual(repeat, { inputId: first.inputId, seq: first.seq, duplicate: true });
    assert.equal(count(store, "SELECT COUNT(*) AS n FROM inputs"), 2);
    assert.equal(getSession(store, "default")?.nextSeq, 3, "a duplicate takes no seq");
    assert.deepEqual(getInput(store, first.inputId)?.body, { text: "hello 1" });
    // The same key under another source kind is another input.
    const timer = admitInput(store, { ...local(1), sourceKind: "timer", dedupeKey: "timer:m1" });
    assert.equal(timer.duplicate, false);
  });
});

Deno.test("`admitInput()` refuses a dedupe key that does not start with its source kind", async () => {
  await withStore((store) => {
    throwsKlbr(
      () => admitInput(store, { ...local(1), sourceKind: "discord" }),
      "invalid_input",
      'cannot admit input: a discord dedupe key starts with "discord:" (got "local:cl_test:m1")',
    );
    throwsKlbr(
      () => admitInput(store, { ...local(1), dedupeKey: "m1" }),
      "invalid_input",
      'cannot admit input: a local dedupe key starts with "local:" (got "m1")',
    );
    assert.equal(count(store, "SELECT COUNT(*) AS n FROM inputs"), 0);
  });
});

Deno.test("`admitInput()` refuses an unknown session and writes nothing", async () => {
  await withStore((store) => {
    throwsKlbr(() => admitInput(store, local(1, "ghost")), "not_found", /got "ghost"/);
    assert.equal(count(store, "SELECT COUNT(*) AS n FROM inputs"), 0);
    assert.equal(count(store, "SELECT COUNT(*) AS n FROM events"), 0);
  });
});

Deno.test("`admitInput()` refuses inputs that fail their schema", async () => {
  await withStore((store) => {
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ author: "" }, /^cannot admit input: author .* \(got ""\)$/],
      [
        { conversationId: "a\u0007b" },
        /^cannot admit input: conversationId has a control character/,
      ],
      [{ sourceKind: "email" }, /^cannot admit input: sourceKind .* \(got "email"\)$/],
      [{ receivedAt: -5 }, /^cannot admit input: receivedAt .* \(got -5\)$/],
      [{ extra: 1 }, /^cannot admit input: /],
      [{ body: undefined }, /^cannot admit input: body must be JSON .* \(got undefined\)$/],
      [{ body: "x".repeat(1 << 20) }, /body must be JSON of at most 1048576 characters/],
      [{ session: "a b" }, /^cannot use session id/],
    ];
    for (const [patch, message] of cases) {
      throwsKlbr(
        () => admitInput(store, { ...local(1), ...patch } as AdmitInput),
        "invalid_input",
        message,
      );
    }
    assert.equal(count(store, "SELECT COUNT(*) AS n FROM inputs"), 0);
  });
});

Deno.test("an input's identity cannot be changed or deleted after admission", async () => {
  await withStore((store) => {
    const { inputId } = admitInput(store, local(1));
    for (const column of ["conversation_id", "dedupe_key", "author", "body", "source_kind"]) {
      const value = column === "body" ? '"x"' : column === "source_kind" ? "timer" : "changed";
      assert.throws(
        () => store.statement(`UPDATE inputs SET ${column} = ? WHERE id = ?`).run(value, inputId),
        /inputs identity is immutable/,
      );
    }
    for (const column of ["received_at", "admitted_at"]) {
      assert.throws(
        () => store.statement(`UPDATE inputs SET ${column} = 1 WHERE id = ?`).run(inputId),
        /inputs identity is immutable/,
      );
    }
    assert.throws(() => store.statement("DELETE FROM inputs").run(), /inputs are never deleted/);
    assert.equal(getInput(store, inputId)?.conversationId, "local:main");
  });
});

Deno.test("`localDedupeKey()` builds local:<client_id>:<client_msg_id>", () => {
  assert.equal(localDedupeKey("cl_7", "m-42"), "local:cl_7:m-42");
  assert.equal(localDedupeKey("c", "a:b"), "local:c:a:b");
  assert.equal(discordDedupeKey("123", "456789"), "discord:123:456789");
});

Deno.test("`localDedupeKey()` refuses empty parts, control characters and a colon in client_id", () => {
  throwsKlbr(
    () => localDedupeKey("", "m1"),
    "invalid_input",
    'cannot build local dedupe key: client_id must be 1-200 characters without ":" and no control characters (got "")',
  );
  throwsKlbr(() => localDedupeKey("a:b", "m1"), "invalid_input", /client_id .* \(got "a:b"\)$/);
  throwsKlbr(() => localDedupeKey("c", ""), "invalid_input", /client_msg_id must be 1-200/);
  throwsKlbr(() => localDedupeKey("c", "m\n1"), "invalid_input", /client_msg_id/);
  throwsKlbr(() => localDedupeKey("c\u007f", "m1"), "invalid_input", /client_id/);
  throwsKlbr(() => localDedupeKey("c", "m".repeat(201)), "invalid_input", /client_msg_id/);
});

Deno.test("`discordDedupeKey()` refuses ids that are not snowflakes", () => {
  throwsKlbr(
    () => discordDedupeKey("12a", "5"),
    "invalid_input",
    'cannot build discord dedupe key: channel_id must be a snowflake of 1-20 digits (got "12a")',
  );
  throwsKlbr(() => discordDedupeKey("1", ""), "invalid_input", /message_id .* \(got ""\)$/);
  throwsKlbr(() => discordDedupeKey("1", "1".repeat(21)), "invalid_input", /message_id/);
});

Deno.test("`pendingInputs()` lists pending inputs in admission order", async () => {
  await withStore((store) => {
    const ids = [3, 1, 2].map((n) => admitInput(store, local(n)).inputId);
    appendEvent(store, "default", "test.between", {});
    ids.push(admitInput(store, local(0)).inputId);
    assert.deepEqual(pendingInputs(store, "default").map((i) => i.id), ids);
    assert.deepEqual(
      pendingInputs(store, "default", { limit: 2 }).map((i) => i.id),
      ids.slice(0, 2),
    );
    throwsKlbr(
      () => pendingInputs(store, "default", { limit: 0 }),
      "invalid_input",
      "cannot list pending inputs: limit must be an integer in 1-10000 (got 0)",
    );
  });
});

Deno.test("`pendingSummary()` counts pending inputs and names the oldest admission", async () => {
  await withStore((store, _dir, time) => {
    assert.deepEqual(pendingSummary(store, "default"), { count: 0, oldestAdmittedAt: null });
    const first = time.now;
    const a = admitInput(store, local(1)).inputId;
    time.now += 500;
    admitInput(store, local(2));
    assert.deepEqual(pendingSummary(store, "default"), { count: 2, oldestAdmittedAt: first });
    // A consumed input no longer counts, and the oldest moves on.
    frameOf(store, [a]);
    assert.deepEqual(pendingSummary(store, "default"), {
      count: 1,
      oldestAdmittedAt: first + 500,
    });
  });
});

// ---------------------------------------------------------------------------------------------
// frames

Deno.test("`acceptFrame()` consumes its inputs and appends frame.accepted", async () => {
  await withStore((store) => {
    const a = admitInput(store, local(1)).inputId;
    const b = admitInput(store, local(2)).inputId;
    const c = admitInput(store, local(3)).inputId;
    const frame = frameOf(store, [a, b], { contextEpoch: 4, policyRevision: "rev-9" });
    assert.equal(frame.number, 1);
    assert.equal(frame.seq, 4);
    assert.deepEqual(pendingInputs(store, "default").map((i) => i.id), [c]);
    for (const id of [a, b]) {
      assert.deepEqual(
        [getInput(store, id)?.status, getInput(store, id)?.frameId],
        ["consumed", frame.frameId],
      );
    }
    const stored = getFrame(store, frame.frameId)!;
    assert.deepEqual(
      [stored.inputIds, stored.routing, stored.contextEpoch, stored.policyRevision, stored.state],
      [[a, b], { reply_to: "local:main" }, 4, "rev-9", "open"],
    );
    const event = readEvents(store, "default", { since: 3 })[0];
    assert.equal(event.kind, "frame.accepted");
    assert.deepEqual(event.body, {
      frame_id: frame.frameId,
      number: 1,
      input_ids: [a, b],
      routing: { reply_to: "local:main" },
      context_epoch: 4,
      policy_revision: "rev-9",
    });
    assert.equal(frameOf(store, [c]).number, 2);
  });
});

Deno.test("`acceptFrame()` writes nothing when one input is not pending", async () => {
  await withStore((store) => {
    const a = admitInput(store, local(1)).inputId;
    const b = admitInput(store, local(2)).inputId;
    frameOf(store, [a]);
    const eventsBefore = count(store, "SELECT COUNT(*) AS n FROM events");
    throwsKlbr(
      () => frameOf(store, [b, a]),
      "invalid_input",
      new RegExp(
        `^cannot accept frame: input ${a} is not pending \\(got status consumed\\)$`,
      ),
    );
    assert.equal(getInput(store, b)?.status, "pending", "b was not consumed by the refused frame");
    assert.equal(count(store, "SELECT COUNT(*) AS n FROM frames"), 1);
    assert.equal(count(store, "SELECT COUNT(*) AS n FROM events"), eventsBefore);
  });
});

Deno.test("`acceptFrame()` refuses a missing input and an input of another session", async () => {
  await withStore((store) => {
    ensureSession(store, "other");
    const mine = admitInput(store, local(1)).inputId;
    const theirs = admitInput(store, local(2, "other")).inputId;
    throwsKlbr(
      () => frameOf(store, [mine, theirs]),
      "invalid_input",
      new RegExp(`input ${theirs} belongs to session other, not default \\(got ${theirs}\\)$`),
    );
    throwsKlbr(
      () => frameOf(store, [mine, "in_NOPE"]),
      "invalid_input",
      /: input in_NOPE does not exist \(got in_NOPE\)$/,
    );
    throwsKlbr(() => frameOf(store, [mine], { session: "ghost" }), "not_found");
    assert.equal(count(store, "SELECT COUNT(*) AS n FROM frames"), 0);
    assert.equal(getInput(store, mine)?.status, "pending");
  });
});

Deno.test("`acceptFrame()` refuses an empty or repeated input list and a bad epoch", async () => {
  await withStore((store) => {
    const a = admitInput(store, local(1)).inputId;
    throwsKlbr(() => frameOf(store, []), "invalid_input", /^cannot accept frame: inputIds /);
    throwsKlbr(
      () => frameOf(store, [a, a]),
      "invalid_input",
      /^cannot accept frame: inputIds has a repeated id/,
    );
    throwsKlbr(() => frameOf(store, [a], { contextEpoch: -1 }), "invalid_input", /contextEpoch/);
    assert.equal(count(store, "SELECT COUNT(*) AS n FROM frames"), 0);
  });
});

Deno.test("`finishFrame()` ends a frame and keeps its inputs consumed", async () => {
  await withStore((store, _dir, time) => {
    const a = admitInput(store, local(1)).inputId;
    const { frameId } = frameOf(store, [a]);
    time.now += 10;
    const seq = finishFrame(store, frameId, "done", "turn ended");
    const frame = getFrame(store, frameId)!;
    assert.deepEqual(
      [frame.state, frame.endedAt, frame.endedReason],
      ["done", time.now, "turn ended"],
    );
    assert.equal(getInput(store, a)?.status, "consumed");
    const event = readEvents(store, "default", { since: seq - 1 })[0];
    assert.deepEqual([event.kind, event.body], [
      "frame.finished",
      { frame_id: frameId, number: 1, state: "done", reason: "turn ended", input_ids: [a] },
    ]);
  });
});

Deno.test("`finishFrame()` with abandoned returns the inputs to pending", async () => {
  await withStore((store) => {
    const a = admitInput(store, local(1)).inputId;
    const { frameId } = frameOf(store, [a]);
    finishFrame(store, frameId, "abandoned", "operator stop before the turn began");
    assert.deepEqual(pendingInputs(store, "default").map((i) => [i.id, i.frameId]), [[a, null]]);
    assert.equal(readEvents(store, "default").at(-1)?.kind, "frame.abandoned");
  });
});

Deno.test("`finishFrame()` refuses a frame that has already ended", async () => {
  await withStore((store) => {
    const a = admitInput(store, local(1)).inputId;
    const { frameId } = frameOf(store, [a]);
    finishFrame(store, frameId, "failed", "model error");
    const events = count(store, "SELECT COUNT(*) AS n FROM events");
    throwsKlbr(
      () => finishFrame(store, frameId, "done", "again"),
      "invalid_input",
      `cannot finish frame ${frameId}: the frame has ended (got state failed)`,
    );
    throwsKlbr(() => finishFrame(store, frameId, "abandoned", "again"), "invalid_input");
    assert.equal(getInput(store, a)?.status, "consumed");
    assert.equal(count(store, "SELECT COUNT(*) AS n FROM events"), events);
    // The table itself refuses reopening an ended frame.
    assert.throws(
      () => store.statement("UPDATE frames SET state = 'open', ended_at = NULL").run(),
      /a finished frame is final/,
    );
  });
});

Deno.test("`finishFrame()` refuses an unknown frame, state or empty reason", async () => {
  await withStore((store) => {
    throwsKlbr(
      () => finishFrame(store, "fr_NOPE", "done", "x"),
      "not_found",
      "cannot finish frame fr_NOPE: no such frame (got fr_NOPE)",
    );
    throwsKlbr(
      () => finishFrame(store, "fr_NOPE", "open" as "done", "x"),
      "invalid_input",
      "cannot finish frame fr_NOPE: state must be done, failed or abandoned (got open)",
    );
    throwsKlbr(() => finishFrame(store, "fr_NOPE", "done", ""), "invalid_input", /reason must be/);
  });
});

Deno.test("`adoptFrame()` records that an open frame is continued", async () => {
  await withStore((store) => {
    const a = admitInput(store, local(1)).inputId;
    const open = frameOf(store, [a]);
    const ended = frameOf(store, [admitInput(store, local(2)).inputId]);
    finishFrame(store, ended.frameId, "done", "finished");
    assert.deepEqual(openFrames(store, "default").map((f) => f.id), [open.frameId]);
    adoptFrame(store, open.frameId);
    assert.equal(getFrame(store, open.frameId)!.state, "open");
    // Its inputs stay consumed by it: adopting is not re-offering.
    assert.deepEqual(pendingInputs(store, "default"), []);
    const event = readEvents(store, "default").at(-1)!;
    assert.deepEqual([event.kind, event.body], ["frame.resumed", {
      frame_id: open.frameId,
      number: 1,
    }]);
    throwsKlbr(
      () => adoptFrame(store, ended.frameId),
      "invalid_input",
      `cannot adopt frame ${ended.frameId}: the frame has ended (got state done)`,
    );
  });
});

// ---------------------------------------------------------------------------------------------
// releases and activation

const RELEASE_A = "a".repeat(64);
const RELEASE_B = "b".repeat(63) + "0";

Deno.test("`activateRelease()` bumps the epoch and records the activation", async () => {
  await withStore((store, dir) => {
    recordRelease(store, {
      id: RELEASE_A,
      path: join(dir, "releases", RELEASE_A),
      fileCount: 1,
      byteCount: 3,
    });
    recordRelease(store, {
      id: RELEASE_B,
      path: join(dir, "releases", RELEASE_B),
      fileCount: 2,
      byteCount: 5,
    });
    const first = activateRelease(store, {
      session: "default",
      expectedEpoch: 0,
      releaseId: RELEASE_A,
      reason: "startup",
    });
    const second = activateRelease(store, {
      session: "default",
      expectedEpoch: 1,
      releaseId: RELEASE_B,
      reason: "operator",
    });
    assert.deepEqual([first.epoch, second.epoch], [1, 2]);
    const session = getSession(store, "default")!;
    assert.deepEqual([session.behaviorEpoch, session.activeRelease], [2, RELEASE_B]);
    assert.deepEqual(
      store.statement("SELECT epoch, release_id, reason FROM activations ORDER BY epoch").all()
        .map((r) => ({ ...r })),
      [
        { epoch: 1, release_id: RELEASE_A, reason: "startup" },
        { epoch: 2, release_id: RELEASE_B, reason: "operator" },
      ],
    );
    const event = readEvents(store, "default", { since: second.seq - 1 })[0];
    assert.deepEqual([event.kind, event.body], ["activation", {
      epoch: 2,
      release_id: RELEASE_B,
      previous_release: RELEASE_A,
      reason: "operator",
    }]);
  });
});

Deno.test("`activateRelease()` refuses when the epoch moved", async () => {
  await withStore((store, dir) => {
    recordRelease(store, { id: RELEASE_A, path: join(dir, RELEASE_A), fileCount: 0, byteCount: 0 });
    for (let epoch = 0; epoch < 8; epoch++) {
      activateRelease(store, {
        session: "default",
        expectedEpoch: epoch,
        releaseId: RELEASE_A,
        reason: "r",
      });
    }
    const events = count(store, "SELECT COUNT(*) AS n FROM events");
    throwsKlbr(
      () =>
        activateRelease(store, {
          session: "default",
          expectedEpoch: 7,
          releaseId: RELEASE_A,
          reason: "late",
        }),
      "epoch_moved",
      "cannot activate release aaaaaaaaaaaa: epoch moved (expected 7, found 8)",
    );
    assert.equal(getSession(store, "default")?.behaviorEpoch, 8);
    assert.equal(count(store, "SELECT COUNT(*) AS n FROM activations"), 8);
    assert.equal(count(store, "SELECT COUNT(*) AS n FROM events"), events);
  });
});

Deno.test("`activateRelease()` refuses an unpublished release and malformed requests", async () => {
  await withStore((store) => {
    throwsKlbr(
      () =>
        activateRelease(store, {
          session: "default",
          expectedEpoch: 0,
          releaseId: RELEASE_A,
          reason: "r",
        }),
      "not_found",
      `cannot activate release aaaaaaaaaaaa: it was never published (got ${RELEASE_A})`,
    );
    throwsKlbr(
      () =>
        activateRelease(store, {
          session: "default",
          expectedEpoch: 0,
          releaseId: "abc",
          reason: "r",
        }),
      "invalid_input",
      /^cannot activate release: releaseId is not 64 lowercase hex digits \(got "abc"\)$/,
    );
    throwsKlbr(
      () =>
        activateRelease(store, {
          session: "ghost",
          expectedEpoch: 0,
          releaseId: RELEASE_A,
          reason: "r",
        }),
      "not_found",
    );
    assert.equal(getSession(store, "default")?.behaviorEpoch, 0);
  });
});

Deno.test("`markLastGood()` refuses a release the session never activated", async () => {
  await withStore((store, dir) => {
    recordRelease(store, { id: RELEASE_A, path: join(dir, RELEASE_A), fileCount: 0, byteCount: 0 });
    recordRelease(store, { id: RELEASE_B, path: join(dir, RELEASE_B), fileCount: 0, byteCount: 0 });
    throwsKlbr(
      () => markLastGood(store, "default", RELEASE_A),
      "invalid_input",
      `cannot mark release last good: session default never activated it (got ${RELEASE_A})`,
    );
    activateRelease(store, {
      session: "default",
      expectedEpoch: 0,
      releaseId: RELEASE_A,
      reason: "r",
    });
    markLastGood(store, "default", RELEASE_A);
    activateRelease(store, {
      session: "default",
      expectedEpoch: 1,
      releaseId: RELEASE_B,
      reason: "r",
    });
    const session = getSession(store, "default")!;
    assert.deepEqual([session.activeRelease, session.lastGoodRelease], [RELEASE_B, RELEASE_A]);
    assert.equal(readEvents(store, "default").at(-2)?.kind, "release.last_good");
  });
});

Deno.test("`recordRelease()` keeps the first row and refuses a malformed id", async () => {
  await withStore((store) => {
    const first = recordRelease(store, {
      id: RELEASE_A,
      path: "/r/one",
      fileCount: 1,
      byteCount: 1,
    });
    const again = recordRelease(store, {
      id: RELEASE_A,
      path: "/r/two",
      fileCount: 1,
      byteCount: 1,
    });
    assert.deepEqual(again, first);
    throwsKlbr(
      () =>
        recordRelease(store, {
          id: RELEASE_A.toUpperCase(),
          path: "/r",
          fileCount: 0,
          byteCount: 0,
        }),
      "invalid_input",
      /^cannot record release: id is not 64 lowercase hex digits/,
    );
    assert.throws(() => store.statement("DELETE FROM releases").run(), /releases is append-only/);
  });
});

// ---------------------------------------------------------------------------------------------
// kernel generations and cells

function generation(store: Store, reason = "startup") {
  return startGeneration(store, {
    session: "default",
    reason,
    skillsRevision: "skills-1",
    behaviorRevision: RELEASE_A,
  });
}

Deno.test("`startGeneration()` numbers generations and records kernel.reset", async () => {
  await withStore((store, _dir, time) => {
    const first = generation(store);
    time.now += 7;
    const second = startGeneration(store, {
      session: "default",
      reason: "framing_failure",
      skillsRevision: "skills-2",
      behaviorRevision: null,
    });
    assert.deepEqual([first.generation, second.generation], [1, 2]);
    const current = currentGeneration(store, "default")!;
    assert.deepEqual([current.generation, current.endedAt, current.skillsRevision], [
      2,
      null,
      "skills-2",
    ]);
    const ended = store.statement(
      "SELECT ended_at FROM kernel_generations WHERE generation = 1",
    ).get() as { ended_at: number };
    assert.equal(ended.ended_at, time.now);
    const event = readEvents(store, "default").at(-1)!;
    assert.deepEqual([event.seq, event.kind, event.body], [second.seq, "kernel.reset", {
      generation: 2,
      reason: "framing_failure",
      skills_revision: "skills-2",
      behavior_revision: null,
      heap_restored: false,
    }]);
    throwsKlbr(
      () =>
        startGeneration(store, {
          session: "default",
          reason: "",
          skillsRevision: "s",
          behaviorRevision: null,
        }),
      "invalid_input",
      /^cannot start kernel generation: reason /,
    );
  });
});

Deno.test("`startCell()` refuses a generation that is not the current one", async () => {
  await withStore((store) => {
    const code = "print(1)";
    throwsKlbr(
      () => startCell(store, { session: "default", generation: 1, code }),
      "invalid_input",
      "cannot start cell: generation 1 is not the running kernel of default (got current none)",
    );
    generation(store);
    generation(store, "reset");
    throwsKlbr(
      () => startCell(store, { session: "default", generation: 1, code }),
      "invalid_input",
      "cannot start cell: generation 1 is not the running kernel of default (got current 2)",
    );
    throwsKlbr(
      () => startCell(store, { session: "default", generation: 2, code, frameId: "fr_NOPE" }),
      "not_found",
      "cannot start cell: no frame fr_NOPE in default",
    );
    assert.equal(count(store, "SELECT COUNT(*) AS n FROM cells"), 0);
  });
});

Deno.test("`startCell()` records a cell before it runs and `finishCell()` writes its outcome", async () => {
  await withStore((store, _dir, time) => {
    const { frameId } = frameOf(store, [admitInput(store, local(1)).inputId]);
    generation(store);
    const { cellId, seq } = startCell(store, {
      session: "default",
      generation: 1,
      frameId,
      toolCallId: "call_1",
      code: "x = 1",
    });
    assert.match(cellId, /^cell_[0-9A-Z]{26}$/);
    assert.deepEqual(readEvents(store, "default", { since: seq - 1 })[0].body, {
      cell_id: cellId,
      generation: 1,
      frame_id: frameId,
      tool_call_id: "call_1",
      code: "x = 1",
    });
    assert.equal(getCell(store, cellId)?.outcome, null);
    time.now += 3;
    const done = finishCell(store, cellId, { outcome: "ok", result: { value: "1" } });
    const cell = getCell(store, cellId)!;
    assert.deepEqual([cell.outcome, cell.result, cell.endedAt], ["ok", { value: "1" }, time.now]);
    const event = readEvents(store, "default", { since: done - 1 })[0];
    assert.deepEqual([event.kind, event.body], ["cell.finished", {
      cell_id: cellId,
      tool_call_id: "call_1",
      outcome: "ok",
      result: { value: "1" },
    }]);
  });
});

Deno.test("`finishCell()` refuses to overwrite a finished cell", async () => {
  await withStore((store) => {
    generation(store);
    const { cellId } = startCell(store, { session: "default", generation: 1, code: "1" });
    finishCell(store, cellId, { outcome: "error", result: { type: "ValueError" } });
    throwsKlbr(
      () => finishCell(store, cellId, { outcome: "ok", result: null }),
      "invalid_input",
      `cannot finish cell ${cellId}: it already finished (got outcome error)`,
    );
    assert.deepEqual(getCell(store, cellId)?.result, { type: "ValueError" });
    assert.throws(
      () => store.statement("UPDATE cells SET outcome = 'ok' WHERE id = ?").run(cellId),
      /a finished cell is final/,
    );
  });
});

Deno.test("`finishCell()` refuses an unknown cell, an unknown outcome and a non-JSON result", async () => {
  await withStore((store) => {
    generation(store);
    const { cellId } = startCell(store, { session: "default", generation: 1, code: "1" });
    throwsKlbr(
      () => finishCell(store, "cell_NOPE", { outcome: "ok", result: null }),
      "not_found",
      "cannot finish cell cell_NOPE: no such cell (got cell_NOPE)",
    );
    throwsKlbr(
      () => finishCell(store, cellId, { outcome: "exploded" as "ok", result: null }),
      "invalid_input",
      `cannot finish cell ${cellId}: outcome must be one of ok, error, cancelled, timed_out, killed, interrupted (got "exploded")`,
    );
    throwsKlbr(
      () => finishCell(store, cellId, { outcome: "ok", result: undefined }),
      "invalid_input",
      `cannot finish cell ${cellId}: result is not JSON (got undefined)`,
    );
    assert.equal(getCell(store, cellId)?.outcome, null);
  });
});

Deno.test("`interruptOpenCells()` closes open cells and leaves finished ones alone", async () => {
  await withStore((store) => {
    generation(store);
    const finished = startCell(store, { session: "default", generation: 1, code: "a" }).cellId;
    finishCell(store, finished, { outcome: "ok", result: 1 });
    const open1 = startCell(store, { session: "default", generation: 1, code: "b" }).cellId;
    const open2 = startCell(store, { session: "default", generation: 1, code: "c" }).cellId;
    assert.deepEqual(interruptOpenCells(store, "default", "restart"), [open1, open2]);
    assert.deepEqual(
      [open1, open2].map((id) => [getCell(store, id)?.outcome, getCell(store, id)?.result]),
      [["interrupted", { interrupted: "restart" }], ["interrupted", { interrupted: "restart" }]],
    );
    assert.deepEqual([getCell(store, finished)?.outcome, getCell(store, finished)?.result], [
      "ok",
      1,
    ]);
    assert.deepEqual(interruptOpenCells(store, "default", "restart"), [], "nothing is open now");
    throwsKlbr(() => interruptOpenCells(store, "default", ""), "invalid_input", /reason must be/);
  });
});

// ---------------------------------------------------------------------------------------------
// snapshot hash and releases on disk

async function writeTree(root: string, files: Record<string, string | [string, number]>) {
  for (const [path, spec] of Object.entries(files)) {
    const [text, mode] = typeof spec === "string" ? [spec, 0o644] : spec;
    const absolute = join(root, path);
    await Deno.mkdir(absolute.slice(0, absolute.lastIndexOf("/")), { recursive: true });
    await Deno.writeTextFile(absolute, text);
    await Deno.chmod(absolute, mode);
  }
}

const TREE = {
  "hooks/attention.py": "def plan(x):\n    return x\n",
  "hooks/model.py": "ROUTE = 'a'\n",
  "run.sh": ["#!/bin/sh\necho hi\n", 0o755] as [string, number],
  "README.md": "behaviour\n",
};

Deno.test("`snapshotTree()` gives the same id for the same tree", async () => {
  await withDir(async (dir) => {
    await writeTree(join(dir, "a"), TREE);
    // The same files written in another order, with other non-executable mode bits.
    const reversed = Object.fromEntries(Object.entries(TREE).reverse());
    await writeTree(join(dir, "b"), reversed);
    await Deno.chmod(join(dir, "b", "README.md"), 0o600);
    const a = await snapshotTree(join(dir, "a"));
    const b = await snapshotTree(join(dir, "b"));
    assert.match(a.id, /^[0-9a-f]{64}$/);
    assert.equal(a.id, b.id);
    assert.deepEqual(a.files, [
      { path: "README.md", mode: 0o644, size: 10 },
      { path: "hooks/attention.py", mode: 0o644, size: 26 },
      { path: "hooks/model.py", mode: 0o644, size: 12 },
      { path: "run.sh", mode: 0o755, size: 18 },
    ]);
  });
});

Deno.test("`snapshotTree()` gives another id for a changed byte, mode or name", async () => {
  await withDir(async (dir) => {
    await writeTree(join(dir, "base"), TREE);
    const base = (await snapshotTree(join(dir, "base"))).id;
    const variants: Record<string, (root: string) => Promise<void>> = {
      byte: (root) => Deno.writeTextFile(join(root, "hooks/model.py"), "ROUTE = 'b'\n"),
      mode: (root) => Deno.chmod(join(root, "README.md"), 0o744),
      name: (root) => Deno.rename(join(root, "README.md"), join(root, "README.txt")),
      move: (root) => Deno.rename(join(root, "hooks/model.py"), join(root, "model.py")),
      added: (root) => Deno.writeTextFile(join(root, "empty"), ""),
    };
    const ids = new Set([base]);
    for (const [name, change] of Object.entries(variants)) {
      const root = join(dir, name);
      await writeTree(root, TREE);
      await change(root);
      const id = (await snapshotTree(root)).id;
      assert.notEqual(id, base, `${name} changes the id`);
      ids.add(id);
    }
    assert.equal(ids.size, Object.keys(variants).length + 1);
  });
});

Deno.test("`snapshotTree()` keeps fields apart: moving bytes between name and content changes the id", async () => {
  await withDir(async (dir) => {
    let n = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.string({ minLength: 1, maxLength: 6, unit: fc.constantFrom("a", "b", "c") }),
        fc.string({ maxLength: 6, unit: fc.constantFrom("a", "b", "c") }),
        fc.nat({ max: 5 }),
        async (name, content, cut) => {
          // {name: content} against {name + content[:cut]: content[cut:]}: same concatenation.
          if (cut === 0 || cut > content.length) return;
          const one = join(dir, `one${n}`);
          const two = join(dir, `two${n++}`);
          await writeTree(one, { [name]: content });
          await writeTree(two, { [name + content.slice(0, cut)]: content.slice(cut) });
          assert.notEqual((await snapshotTree(one)).id, (await snapshotTree(two)).id);
        },
      ),
      { numRuns: 40 },
    );
  });
});

Deno.test("`snapshotTree()` ignores empty directories", async () => {
  await withDir(async (dir) => {
    await writeTree(join(dir, "a"), TREE);
    await writeTree(join(dir, "b"), TREE);
    await Deno.mkdir(join(dir, "b", "drafts", "deeper"), { recursive: true });
    assert.equal((await snapshotTree(join(dir, "a"))).id, (await snapshotTree(join(dir, "b"))).id);
  });
});

Deno.test("`snapshotTree()` refuses a symlink anywhere in the tree, naming it", async () => {
  await withDir(async (dir) => {
    const root = join(dir, "tree");
    await writeTree(root, TREE);
    await Deno.symlink(join(root, "README.md"), join(root, "hooks", "link.py"));
    await rejectsKlbr(
      () => snapshotTree(root),
      "release_invalid",
      `cannot snapshot tree ${root}: hooks/link.py is a symlink (got hooks/link.py)`,
    );
    await Deno.remove(join(root, "hooks", "link.py"));
    await Deno.symlink(dir, join(root, "dirlink"));
    await rejectsKlbr(() => snapshotTree(root), "release_invalid", /dirlink is a symlink/);
    await Deno.symlink(root, join(dir, "rootlink"));
    await rejectsKlbr(
      () => snapshotTree(join(dir, "rootlink")),
      "release_invalid",
      /the root is a symlink/,
    );
  });
});

Deno.test("`snapshotTree()` refuses a missing directory, a file and a tree over its limits", async () => {
  await withDir(async (dir) => {
    await rejectsKlbr(
      () => snapshotTree(join(dir, "absent")),
      "not_found",
      `cannot snapshot tree: no such directory (got ${join(dir, "absent")})`,
    );
    await writeTree(dir, { "f.txt": "12345" });
    await rejectsKlbr(() => snapshotTree(join(dir, "f.txt")), "release_invalid", /not a directory/);
    await rejectsKlbr(
      () => snapshotTree(dir, { maxBytes: 4 }),
      "release_invalid",
      /more than 4 bytes/,
    );
    await writeTree(dir, { "g.txt": "1" });
    await rejectsKlbr(
      () => snapshotTree(dir, { maxEntries: 1 }),
      "release_invalid",
      /more than 1 entries/,
    );
  });
});

Deno.test("`publishRelease()` writes a release once and records it", async () => {
  await withStore(async (store, dir) => {
    const source = join(dir, "behavior");
    const releasesDir = join(dir, "releases");
    await writeTree(source, TREE);
    const expected = await snapshotTree(source);
    const published = await publishRelease(store, { sourceDir: source, releasesDir });
    assert.equal(published.id, expected.id);
    assert.equal(published.created, true);
    assert.equal(published.path, join(releasesDir, expected.id));
    assert.deepEqual(listDir(releasesDir), [expected.id], "no temp directory is left");
    assert.equal(Deno.statSync(join(published.path, "run.sh")).mode! & 0o777, 0o755);
    assert.equal(Deno.readTextFileSync(join(published.path, "hooks/model.py")), "ROUTE = 'a'\n");
    assert.deepEqual((await verifyRelease(published.path)).files, expected.files);
    const row = getRelease(store, expected.id)!;
    assert.deepEqual([row.path, row.fileCount, row.byteCount], [published.path, 4, 66]);
    // Publishing again verifies the existing copy instead of rewriting it.
    const mtime = Deno.statSync(join(published.path, "README.md")).mtime?.getTime();
    const again = await publishRelease(store, { sourceDir: source, releasesDir });
    assert.deepEqual([again.id, again.created], [expected.id, false]);
    assert.equal(Deno.statSync(join(published.path, "README.md")).mtime?.getTime(), mtime);
    assert.deepEqual(listDir(releasesDir), [expected.id]);
    assert.equal(count(store, "SELECT COUNT(*) AS n FROM releases"), 1);
  });
});

Deno.test("`publishRelease()` sets a tampered release directory aside and installs a good copy", async () => {
  await withStore(async (store, dir) => {
    const source = join(dir, "behavior");
    const releasesDir = join(dir, "releases");
    await writeTree(source, TREE);
    const { path, id } = await publishRelease(store, { sourceDir: source, releasesDir });
    await Deno.writeTextFile(join(path, "README.md"), "tampered\n");
    // The source is authoritative for its own id: the damaged copy is kept for diagnosis.
    const again = await publishRelease(store, { sourceDir: source, releasesDir });
    assert.equal(again.id, id);
    assert.equal(again.created, true);
    await verifyRelease(path);
    const names = listDir(releasesDir);
    assert.equal(names.length, 2);
    assert.ok(names.includes(id));
    assert.ok(names.some((n) => n.startsWith(`.broken-${id}-`)));
  });
});

Deno.test("`publishRelease()` leaves nothing behind when the source holds a symlink", async () => {
  await withStore(async (store, dir) => {
    const source = join(dir, "behavior");
    const releasesDir = join(dir, "releases");
    await writeTree(source, TREE);
    await Deno.symlink("/etc/passwd", join(source, "hooks", "secret"));
    await rejectsKlbr(
      () => publishRelease(store, { sourceDir: source, releasesDir }),
      "release_invalid",
      /hooks\/secret is a symlink/,
    );
    assert.deepEqual(listDir(releasesDir), []);
    assert.equal(count(store, "SELECT COUNT(*) AS n FROM releases"), 0);
  });
});

Deno.test("`verifyRelease()` refuses a changed file, a missing release and a name that is no hash", async () => {
  await withStore(async (store, dir) => {
    const source = join(dir, "behavior");
    await writeTree(source, TREE);
    const { path, id } = await publishRelease(store, {
      sourceDir: source,
      releasesDir: join(dir, "r"),
    });
    await Deno.chmod(join(path, "README.md"), 0o755);
    await rejectsKlbr(() => verifyRelease(path), "release_invalid", /its content hashes to/);
    await Deno.chmod(join(path, "README.md"), 0o644);
    await verifyRelease(path);
    await rejectsKlbr(
      () => verifyRelease(join(dir, "r", "f".repeat(64))),
      "release_invalid",
      `cannot verify release ffffffffffff: it does not exist (got ${
        join(dir, "r", "f".repeat(64))
      })`,
    );
    await rejectsKlbr(
      () => verifyRelease(source),
      "release_invalid",
      `cannot verify release: its directory name is not a sha256 id (got ${source})`,
    );
    assert.ok(id);
  });
});

// ---------------------------------------------------------------------------------------------
// reopening

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
