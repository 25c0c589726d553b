// The typed append against real SQLite in a temp dir: a record type's body must match that
// type's schema in `runtime/core/_records.ts`, or nothing is written — not the event, not the
// sequence number, not the row a writer commits with it.

import assert from "node:assert/strict";
import { KlbrError, type RecordInput } from "../../runtime/core/mod.ts";
import { appendEvent, insertEvent, readEvents } from "../../store/events.ts";
import { admitInput } from "../../store/inputs.ts";
import { getSession } from "../../store/sessions.ts";
import { type Store } from "../../store/store.ts";
import { withStore as withStoreOf } from "../_helpers/store.ts";

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
