/**
 * The page's outbox of inputs without a durable record: the states an input passes through,
 * its ids kept for safe re-sending, and its survival across a reload.
 *
 * @module
 */

import assert from "node:assert/strict";
import { InputOutbox, type KeyValueStore } from "../../ui/src/input_outbox.ts";
import { body } from "./_record_data.ts";

/** A storage object like `sessionStorage`, counting writes. */
function memoryStorage(initial: Record<string, string> = {}): KeyValueStore & {
  data: Map<string, string>;
  writes: number;
} {
  const data = new Map(Object.entries(initial));
  return {
    data,
    writes: 0,
    getItem: (key) => data.get(key) ?? null,
    setItem(key, value) {
      this.writes++;
      data.set(key, value);
    },
    removeItem: (key) => void data.delete(key),
  };
}

const KEY = "klbr:outbox:default";

Deno.test("`InputOutbox.add()` gives each input fresh, distinct ids and queues it", () => {
  const outbox = new InputOutbox(undefined, KEY);
  const a = outbox.add("one", "local:default");
  const b = outbox.add("two", "local:default");
  assert.notEqual(a.clientMsgId, b.clientMsgId);
  assert.equal(a.request, `in-${a.clientMsgId}`);
  assert.deepEqual(outbox.unacknowledged().map((i) => i.text), ["one", "two"]);
  assert.equal(a.status, "queued");
});

Deno.test("`InputOutbox.ack()` records the input id and ends re-sending", () => {
  const outbox = new InputOutbox(undefined, KEY);
  const item = outbox.add("one", "local:default");
  outbox.markSent(item.request);
  assert.equal(outbox.list()[0].status, "sent");
  assert.equal(outbox.unacknowledged().length, 1, "a sent input is re-sent until acknowledged");
  assert.equal(outbox.ack(item.request, { input_id: "in_1", seq: 7, duplicate: true }), true);
  assert.deepEqual(
    [outbox.list()[0].status, outbox.list()[0].inputId, outbox.list()[0].duplicate],
    ["acked", "in_1", true],
  );
  assert.equal(outbox.unacknowledged().length, 0);
});

Deno.test("`InputOutbox.ack()` and `fail()` ignore requests that are not the outbox's", () => {
  const outbox = new InputOutbox(undefined, KEY);
  outbox.add("one", "local:default");
  assert.equal(outbox.ack("op-1", { input_id: "in_1", seq: 1, duplicate: false }), false);
  assert.equal(outbox.fail("op-1", { code: "x", message: "y" }), false);
  assert.equal(outbox.list()[0].status, "queued");
});

Deno.test("`InputOutbox.fail()` keeps a refused input until it is retried or discarded", () => {
  const outbox = new InputOutbox(undefined, KEY);
  const a = outbox.add("one", "local:default");
  const b = outbox.add("two", "local:default");
  outbox.fail(a.request, { code: "invalid_input", message: "cannot accept" });
  outbox.fail(b.request, { code: "internal", message: "boom" });
  assert.equal(outbox.unacknowledged().length, 0, "a refused input is not re-sent by itself");
  outbox.retry(a.clientMsgId);
  assert.deepEqual(outbox.unacknowledged().map((i) => [i.clientMsgId, i.error]), [[
    a.clientMsgId,
    undefined,
  ]]);
  outbox.discard(b.clientMsgId);
  assert.deepEqual(outbox.list().map((i) => i.text), ["one"]);
});

Deno.test("`InputOutbox.retry()` leaves inputs that were not refused alone", () => {
  const outbox = new InputOutbox(undefined, KEY);
  const a = outbox.add("one", "local:default");
  outbox.ack(a.request, { input_id: "in_1", seq: 1, duplicate: false });
  outbox.retry(a.clientMsgId);
  assert.equal(outbox.list()[0].status, "acked");
});

/** An `input.admitted` record as the daemon writes it; without a message id, as an older one did. */
function admitted(inputId: string, clientMsgId?: string) {
  return {
    type: "input.admitted",
    data: body("input.admitted", {
      input_id: inputId,
      source_kind: "local",
      dedupe_key: `local:web-1:${clientMsgId ?? "m-unknown"}`,
      body: "x",
      ...(clientMsgId === undefined ? {} : { client_msg_id: clientMsgId }),
    }),
  };
}

Deno.test("`InputOutbox.noteRecord()` drops the input its record names by message id", () => {
  const outbox = new InputOutbox(undefined, KEY);
  const a = outbox.add("one", "local:default");
  const b = outbox.add("two", "local:default");
  outbox.noteRecord(admitted("in_a", a.clientMsgId));
  assert.deepEqual(outbox.list().map((i) => i.clientMsgId), [b.clientMsgId]);
  assert.equal(outbox.inputIdOf(a.clientMsgId), "in_a");
});

Deno.test("`InputOutbox.ack()` drops an input whose record came first without a message id", () => {
  const outbox = new InputOutbox(undefined, KEY);
  const a = outbox.add("one", "local:default");
  outbox.noteRecord(admitted("in_a"));
  assert.equal(outbox.list().length, 1, "nothing ties the record to the input yet");
  outbox.ack(a.request, { input_id: "in_a", seq: 1, duplicate: false });
  assert.equal(outbox.list().length, 0);
  assert.equal(outbox.inputIdOf(a.clientMsgId), "in_a");
});

Deno.test("`InputOutbox.noteRecord()` ignores other record types and foreign inputs", () => {
  const outbox = new InputOutbox(undefined, KEY);
  outbox.add("one", "local:default");
  outbox.noteRecord({ type: "send", data: { input_id: "in_a", dedupe_key: "local:x:y" } });
  outbox.noteRecord(admitted("in_z", "someone-else"));
  outbox.noteRecord({ type: "input.admitted", data: { dedupe_key: "discord:1:2" } });
  assert.equal(outbox.list().length, 1);
});

Deno.test("`InputOutbox.forgetRecords()` stops settling by records of a replaced log", () => {
  const outbox = new InputOutbox(undefined, KEY);
  outbox.noteRecord(admitted("in_a"));
  outbox.forgetRecords();
  const a = outbox.add("one", "local:default");
  outbox.ack(a.request, { input_id: "in_a", seq: 1, duplicate: false });
  assert.equal(outbox.list().length, 1, "in_a belonged to the old log");
});

Deno.test("`InputOutbox` survives a reload through its storage with the same ids", () => {
  const storage = memoryStorage();
  const first = new InputOutbox(storage, KEY);
  const item = first.add("one", "local:default");
  first.markSent(item.request);
  const second = new InputOutbox(storage, KEY);
  assert.deepEqual(second.list(), first.list());
  assert.deepEqual(second.unacknowledged().map((i) => i.clientMsgId), [item.clientMsgId]);
});

Deno.test("`InputOutbox` keeps an input's attachments across a reload, so a re-send names them", () => {
  const storage = memoryStorage();
  const file = { artifact: "a".repeat(64), filename: "fruit.csv", content_type: "text/csv" };
  const item = new InputOutbox(storage, KEY).add("", "local:default", { attachments: [file] });
  const reloaded = new InputOutbox(storage, KEY).unacknowledged();
  assert.deepEqual(reloaded.map((i) => [i.clientMsgId, i.text, i.attachments]), [
    [item.clientMsgId, "", [file]],
  ]);
  const plain = new InputOutbox(undefined, KEY).add("hi", "local:default");
  assert.equal("attachments" in plain, false, "an input without files names none");
});

Deno.test("`InputOutbox` removes its storage entry once nothing is left", () => {
  const storage = memoryStorage();
  const outbox = new InputOutbox(storage, KEY);
  const item = outbox.add("one", "local:default");
  assert.ok(storage.data.has(KEY));
  outbox.discard(item.clientMsgId);
  assert.equal(storage.data.has(KEY), false);
});

Deno.test("`InputOutbox` starts empty from a corrupt entry and drops malformed items", () => {
  assert.equal(new InputOutbox(memoryStorage({ [KEY]: "{not json" }), KEY).list().length, 0);
  assert.equal(new InputOutbox(memoryStorage({ [KEY]: '{"a":1}' }), KEY).list().length, 0);
  const mixed = JSON.stringify([
    {
      clientMsgId: "m1",
      request: "in-m1",
      text: "ok",
      conversation: "local:default",
      status: "sent",
    },
    { clientMsgId: "m2", text: "no request", conversation: "local:default", status: "sent" },
    "junk",
  ]);
  assert.deepEqual(
    new InputOutbox(memoryStorage({ [KEY]: mixed }), KEY).list().map((i) => i.clientMsgId),
    ["m1"],
  );
});

Deno.test("`InputOutbox` keeps working in memory when its storage refuses writes", () => {
  const storage: KeyValueStore = {
    getItem: () => null,
    setItem: () => {
      throw new DOMException("quota", "QuotaExceededError");
    },
    removeItem: () => {
      throw new DOMException("denied", "SecurityError");
    },
  };
  const outbox = new InputOutbox(storage, KEY);
  const item = outbox.add("one", "local:default");
  outbox.ack(item.request, { input_id: "in_1", seq: 1, duplicate: false });
  assert.equal(outbox.list()[0].inputId, "in_1");
  outbox.discard(item.clientMsgId);
  assert.equal(outbox.list().length, 0);
});
