// The events table against real SQLite in a temp dir: a session's events are numbered 1, 2, 3
// without gaps, read in order and never changed; the typed append refuses a body that does not
// match its type's schema in `runtime/core/_records.ts`, and then nothing is written — not the
// event, not the sequence number, not the row a writer commits with it.

import assert from "node:assert/strict";
import { KlbrError, type RecordInput } from "../../runtime/core/mod.ts";
import { appendEvent, insertEvent, readEvents } from "../../store/tables/events.ts";
import { admitInput } from "../../store/tables/inputs.ts";
import { ensureSession, getSession } from "../../store/tables/sessions.ts";
import { type Store } from "../../store/store.ts";
import { withStore as withStoreOf } from "../_helpers/store.ts";
import { count, throwsKlbr, withStore as withTimedStore } from "./_store_support.ts";

const withStore = (fn: (store: Store) => void | Promise<void>) =>
  withStoreOf(fn, { countingClock: true });

function refuses(fn: () => unknown, text: string): void {
  assert.throws(fn, (error) => {
    assert.ok(error instanceof KlbrError, `expected a KlbrError, got ${String(error)}`);
    assert.equal(error.code, "invalid_input");
    assert.equal(error.message, text);
    return true;
  });
}

function nothingWritten(store: Store): void {
  assert.deepEqual(readEvents(store, "default"), []);
  assert.equal(getSession(store, "default")?.nextSeq, 1, "no sequence number was taken");
}

const SEND: RecordInput<"send"> = {
  send_id: "snd_01JHMMRRB3N0P54WQQ8838V2DD",
  text: "Build is green.",
  conversation: "local:default",
  frame_id: null,
  cell_id: null,
  state: "delivered",
};

/** Bypasses the compile-time check, as a caller with a wrongly built body would. */
function untyped<T>(body: unknown): T {
  return body as T;
}

Deno.test("`appendEvent()` refuses a record body that does not match its type and writes nothing", async () => {
  await withStore((store) => {
    const { text: _text, ...noText } = SEND;
    refuses(
      // @ts-expect-error: the compiler refuses it too, for a body built in place.
      () => appendEvent(store, "default", "send", noText),
      `cannot append record send: text: Invalid input: expected string, received undefined (got ${
        JSON.stringify(noText)
      })`,
    );
    refuses(
      () => appendEvent(store, "default", "turn.ended", untyped({ frame_id: "fr_1", reason: 7 })),
      'cannot append record turn.ended: reason: Invalid input: expected string, received number (got {"frame_id":"fr_1","reason":7})',
    );
    refuses(
      () => appendEvent(store, "default", "scratchpad", untyped("thinking")),
      'cannot append record scratchpad: (root): Invalid input: expected object, received string (got "thinking")',
    );
    nothingWritten(store);
  });
});

Deno.test("`appendEvent()` refuses an outbox step whose state is not its type's", async () => {
  await withStore((store) => {
    const body = {
      outbox_id: "ob_1",
      state: "confirmed",
      attempts: 1,
      remote_id: "1",
      error: null,
    };
    refuses(
      () => appendEvent(store, "default", "outbox.failed", untyped(body)),
      `cannot append record outbox.failed: state: Invalid input: expected "failed" (got ${
        JSON.stringify(body)
      })`,
    );
    nothingWritten(store);
  });
});

Deno.test("`appendEvent()` cuts a long refused body in its message", async () => {
  await withStore((store) => {
    const body = { ...SEND, text: "x".repeat(500), state: "sent" };
    assert.throws(
      () => appendEvent(store, "default", "send", untyped(body)),
      (error) => {
        assert.ok(error instanceof KlbrError);
        assert.match(
          error.message,
          /^cannot append record send: state: Invalid input: expected "delivered" \(got \{.{180,}…\)$/,
        );
        assert.ok(error.message.length < 400, `message of ${error.message.length} characters`);
        return true;
      },
    );
    nothingWritten(store);
  });
});

Deno.test("`insertEvent()` refusing a body rolls back the writer's whole transaction", async () => {
  await withStore((store) => {
    assert.throws(() =>
      store.transaction(() => {
        admitInput(store, {
          session: "default",
          sourceKind: "local",
          dedupeKey: "local:cl_1:m1",
          conversationId: "local:default",
          author: "owner",
          body: "hello",
        });
        insertEvent(store, "default", "frame.accepted", untyped({ frame_id: "fr_1" }));
      }), /cannot append record frame\.accepted: number: /);
    const count = store.statement("SELECT COUNT(*) AS n FROM inputs").get() as { n: number };
    assert.equal(count.n, 0, "the input committed in the same transaction is gone too");
    nothingWritten(store);
  });
});

Deno.test("`appendEvent()` keeps the fields a record type does not name, as given", async () => {
  await withStore((store) => {
    const body = { ...SEND, added_by_a_newer_writer: { any: ["thing"] } };
    assert.equal(appendEvent(store, "default", "send", body), 1);
    assert.deepEqual(readEvents(store, "default").map((e) => [e.kind, e.body]), [["send", body]]);
  });
});

Deno.test("`appendEvent()` stores a kind outside the record union as it is", async () => {
  await withStore((store) => {
    assert.equal(appendEvent(store, "default", "job.started", { job_id: 3 }), 1);
    assert.deepEqual(readEvents(store, "default").map((e) => [e.kind, e.body]), [
      ["job.started", { job_id: 3 }],
    ]);
  });
});

Deno.test("`appendEvent()` numbers a session's events 1, 2, 3 without gaps", async () => {
  await withTimedStore((store) => {
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
  await withTimedStore((store) => {
    throwsKlbr(
      () => appendEvent(store, "ghost", "test.a", {}),
      "not_found",
      'cannot use session: it does not exist; call ensureSession first (got "ghost")',
    );
    assert.equal(count(store, "SELECT COUNT(*) AS n FROM events"), 0);
  });
});

Deno.test("`appendEvent()` refuses a malformed kind and a body that is not JSON", async () => {
  await withTimedStore((store) => {
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
  await withTimedStore((store) => {
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
  await withTimedStore((store) => {
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
  await withTimedStore((store) => {
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
