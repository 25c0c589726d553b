/**
 * The inputs table: admission commits an input with its record, a dedupe key is one input, and an
 * admitted identity never changes.
 *
 * Every test runs against real SQLite files in a fresh temporary directory.
 *
 * @module
 */

import assert from "node:assert/strict";
import { discordDedupeKey, localDedupeKey } from "../../store/tables/dedupe_keys.ts";
import { appendEvent, readEvents } from "../../store/tables/events.ts";
import {
  type AdmitInput,
  admitInput,
  getInput,
  pendingInputs,
  pendingSummary,
} from "../../store/tables/inputs.ts";
import { getSession } from "../../store/tables/sessions.ts";
import { frameOf } from "../_helpers/store.ts";
import { count, local, throwsKlbr, withStore } from "./_store_support.ts";

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
