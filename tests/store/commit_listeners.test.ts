// Commit listeners against real SQLite in a temp dir: the store tells its listeners once per
// outermost commit, after COMMIT returned (a second connection already reads the records),
// which sessions the commit gave records, and those records exactly as the log holds them. A nested transaction announces nothing of its own;
// a transaction or savepoint rolled back announces nothing of what it wrote; a deferred write
// rides in the announcement of the commit that holds it.

import { withStore } from "../_helpers/store.ts";
import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { join } from "node:path";
import { appendEvent, insertEvent, readEventTexts } from "../../store/tables/events.ts";
import { ensureSession } from "../../store/tables/sessions.ts";
import type { Commit, Store } from "../../store/store.ts";

const NOTE = { op: "note" };

/** How many records `session` has on disk, read through a second connection. */
function onDisk(dir: string, session: string): number {
  const db = new DatabaseSync(join(dir, "runtime.sqlite"), { readOnly: true });
  try {
    const row = db.prepare("SELECT count(*) AS n FROM events WHERE session_id = ?").get(
      session,
    ) as { n: number };
    return row.n;
  } finally {
    db.close();
  }
}

interface Heard {
  sessions: string[];
  /** Whether the store was still inside a transaction when the listener ran. */
  inTransaction: boolean;
  /** The `default` session's records on disk when the listener ran. */
  durable: number;
}

/** Listens to `store`'s commits, noting what each said and what was on disk then. */
function listen(store: Store, dir: string): Heard[] {
  const heard: Heard[] = [];
  store.onCommit((commit: Commit) => {
    heard.push({
      sessions: [...commit.records.keys()].sort(),
      inTransaction: store.inTransaction,
      durable: onDisk(dir, "default"),
    });
  });
  return heard;
}

Deno.test("a commit announces the sessions it gave records, once, after COMMIT returned", async () => {
  await withStore((store, dir) => {
    ensureSession(store, "other");
    const heard = listen(store, dir);
    store.transaction(() => {
      appendEvent(store, "default", "operator", NOTE);
      appendEvent(store, "other", "operator", NOTE);
      appendEvent(store, "default", "operator", NOTE);
      assert.deepEqual(heard, [], "nothing is announced before the outermost commit");
    });
    assert.deepEqual(heard, [{ sessions: ["default", "other"], inTransaction: false, durable: 2 }]);
  });
});

Deno.test("a commit's announced records are the rows the log holds, in seq order, none left out", async () => {
  await withStore((store) => {
    ensureSession(store, "other");
    const announced = new Map<string, unknown[]>();
    store.onCommit((commit) => {
      for (const [session, records] of commit.records) {
        announced.set(session, [...announced.get(session) ?? [], ...records]);
      }
    });
    appendEvent(store, "default", "operator", { op: "first" });
    store.transaction(() => {
      appendEvent(store, "default", "operator", { op: "second" });
      // A savepoint rolled back gives its seq back; the record written after takes it.
      assert.throws(() =>
        store.transaction(() => {
          appendEvent(store, "default", "operator", { op: "rolled back" });
          throw new Error("not this one");
        }), /not this one/);
      store.transaction(() => void appendEvent(store, "other", "operator", { op: "nested" }));
      appendEvent(store, "default", "operator", { op: "third" });
    });
    for (const session of ["default", "other"]) {
      const onLog = readEventTexts(store, session);
      assert.ok(onLog.length > 0);
      const stored = onLog.map((record) => ({ ...record }));
      assert.deepEqual(announced.get(session), stored, `${session}: announced as stored`);
    }
    assert.deepEqual(
      readEventTexts(store, "default").map((record) => JSON.parse(record.body).op),
      ["first", "second", "third"],
    );
  });
});

Deno.test("nested transactions announce once, with their outermost commit", async () => {
  await withStore((store, dir) => {
    const heard = listen(store, dir);
    store.transaction(() => {
      store.transaction(() => {
        store.transaction(() => void insertEvent(store, "default", "operator", NOTE));
        assert.deepEqual(heard, []);
      });
      assert.deepEqual(heard, []);
    });
    assert.deepEqual(heard, [{ sessions: ["default"], inTransaction: false, durable: 1 }]);
  });
});

Deno.test("a commit that wrote no record announces an empty set; each outermost commit is heard", async () => {
  await withStore((store, dir) => {
    const heard = listen(store, dir);
    store.transaction(() => {});
    appendEvent(store, "default", "operator", NOTE);
    assert.deepEqual(heard.map((h) => h.sessions), [[], ["default"]]);
  });
});

Deno.test("a rolled-back transaction announces nothing; a rolled-back savepoint's records are left out", async () => {
  await withStore((store, dir) => {
    ensureSession(store, "other");
    const heard = listen(store, dir);
    assert.throws(() =>
      store.transaction(() => {
        appendEvent(store, "default", "operator", NOTE);
        throw new Error("changed my mind");
      }), /changed my mind/);
    assert.deepEqual(heard, [], "a rollback is not a commit");
    store.transaction(() => {
      appendEvent(store, "default", "operator", NOTE);
      assert.throws(() =>
        store.transaction(() => {
          appendEvent(store, "other", "operator", NOTE);
          throw new Error("not this part");
        }), /not this part/);
    });
    assert.deepEqual(heard, [{ sessions: ["default"], inTransaction: false, durable: 1 }]);
    assert.equal(onDisk(dir, "other"), 0);
  });
});

Deno.test("a deferred write's record rides in the announcement of the commit that holds it", async () => {
  await withStore((store, dir) => {
    ensureSession(store, "other");
    const heard = listen(store, dir);
    store.defer(() => void appendEvent(store, "other", "operator", NOTE));
    store.defer(() => {
      appendEvent(store, "default", "operator", NOTE);
      throw new Error("this queued write fails alone");
    }, () => {});
    assert.equal(heard.length, 0, "defer commits nothing");
    store.transaction(() => {});
    assert.deepEqual(heard.map((h) => h.sessions), [["other"]]);
  });
});

Deno.test("a listener that throws fails no commit; one that writes starts a commit of its own; a removed one hears nothing", async () => {
  await withStore((store, dir) => {
    store.onCommit(() => {
      throw new Error("a broken listener");
    });
    let wrote = false;
    store.onCommit(() => {
      if (wrote) return;
      wrote = true;
      appendEvent(store, "default", "operator", { op: "from a listener" });
    });
    const heard = listen(store, dir);
    const removed: Commit[] = [];
    const off = store.onCommit((commit) => removed.push(commit));
    off();
    assert.equal(appendEvent(store, "default", "operator", NOTE), 1);
    // The listener's own commit is announced (before the first one reaches the later listener).
    assert.deepEqual(heard, [
      { sessions: ["default"], inTransaction: false, durable: 2 },
      { sessions: ["default"], inTransaction: false, durable: 2 },
    ]);
    assert.deepEqual(removed, []);
  });
});
