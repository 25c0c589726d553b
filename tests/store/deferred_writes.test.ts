// Deferred writes against real SQLite in a temp dir: a write queued with `store.defer` is not
// on disk until the next outermost transaction commits (a second connection reads the file),
// rides in that transaction, waits for the one after when that transaction rolls back, never
// fails the transaction it rides in, and `flush`/`close` commit what is queued. The commit
// counter counts each commit once, and the time spent in COMMIT only for commits.

import { withStore as withFreshStore } from "../_helpers/store.ts";
import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { join } from "node:path";
import { appendEvent } from "../../store/tables/events.ts";
import { ensureSession } from "../../store/tables/sessions.ts";
import { openStore, type Store } from "../../store/store.ts";
import { deferTrace, getTrace } from "../../store/tables/behavior_diagnostics.ts";

/** The event types on disk, read through a second connection (what a crash would leave). */
function onDisk(dir: string): string[] {
  const db = new DatabaseSync(join(dir, "runtime.sqlite"), { readOnly: true });
  try {
    const rows = db.prepare("SELECT kind FROM events ORDER BY seq").all() as { kind: string }[];
    return rows.map((r) => r.kind);
  } finally {
    db.close();
  }
}

/** A fresh store whose clock counts one ms a call, so record times are exact. */
const withStore = (fn: (store: Store, dir: string) => void | Promise<void>) =>
  withFreshStore(fn, { countingClock: true });

const STARTED = { frame_id: "frm_x", frame: 1, resumed: false };
const SCRATCH = { frame_id: "frm_x", text: "t", partial: false };

Deno.test("a deferred write is durable only with the next commit, and first in it", async () => {
  await withStore((store, dir) => {
    const commits = store.health().commits;
    store.defer(() => void appendEvent(store, "default", "turn.started", STARTED));
    assert.deepEqual(onDisk(dir), [], "nothing is written by defer itself");
    assert.equal(store.health().commits, commits, "defer makes no commit");
    store.transaction(() => void appendEvent(store, "default", "scratchpad", SCRATCH));
    assert.deepEqual(onDisk(dir), ["turn.started", "scratchpad"]);
    assert.equal(store.health().commits, commits + 1, "one commit carried both");
  });
});

Deno.test("the store counts each outermost commit once, with its time in COMMIT, and no rollback", async () => {
  await withStore((store) => {
    const before = store.health();
    store.transaction(() => {
      appendEvent(store, "default", "scratchpad", SCRATCH);
      store.transaction(() => void appendEvent(store, "default", "scratchpad", SCRATCH));
    });
    const committed = store.health();
    assert.equal(committed.commits, before.commits + 1, "a savepoint is not a commit");
    assert.ok(committed.commitMs > before.commitMs, "the fsynced COMMIT took time");
    assert.throws(() =>
      store.transaction(() => {
        appendEvent(store, "default", "scratchpad", SCRATCH);
        throw new Error("rolled back");
      })
    );
    assert.equal(store.health().commits, committed.commits);
    assert.equal(store.health().commitMs, committed.commitMs, "a rollback spends no COMMIT");
  });
});

Deno.test("a deferred write in a rolled-back transaction waits for the next one", async () => {
  await withStore((store, dir) => {
    store.defer(() => void appendEvent(store, "default", "turn.started", STARTED));
    assert.throws(() =>
      store.transaction(() => {
        appendEvent(store, "default", "scratchpad", SCRATCH);
        throw new Error("boom");
      }), /boom/);
    assert.deepEqual(onDisk(dir), []);
    store.flush();
    assert.deepEqual(onDisk(dir), ["turn.started"], "flush commits what is queued");
  });
});

Deno.test("a deferred write that throws is rolled back alone and reported", async () => {
  await withStore((store, dir) => {
    const failures: unknown[] = [];
    store.defer(() => {
      appendEvent(store, "default", "turn.started", STARTED);
      throw new Error("bad write");
    }, (error) => failures.push(error));
    store.transaction(() => void appendEvent(store, "default", "scratchpad", SCRATCH));
    assert.deepEqual(onDisk(dir), ["scratchpad"], "the failed write left nothing");
    assert.equal(failures.length, 1);
    assert.match(String(failures[0]), /bad write/);
  });
});

Deno.test("a deferred trace is read back by the trace readers and committed by close", async () => {
  const dir = await Deno.makeTempDir({ prefix: "klbr-deferred-" });
  try {
    let store = openStore(dir);
    ensureSession(store);
    const trace = {
      session: "default",
      frameId: null,
      hook: "model.plan",
      releaseId: "rel_x",
      origin: "attention" as const,
      inputs: { a: 1 },
      output: { b: 2 },
      error: null,
      durationMs: 1.5,
    };
    const first = deferTrace(store, trace);
    assert.equal(getTrace(store, first)?.hook, "model.plan", "a reader flushes first");
    const second = deferTrace(store, trace);
    store.close();
    store = openStore(dir);
    try {
      assert.deepEqual([first, second].map((id) => getTrace(store, id)?.id), [first, second]);
    } finally {
      store.close();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
