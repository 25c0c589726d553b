// `localSend()` against real SQLite in a temp dir: one durable record per send, numbered
// among its cell's effects, idempotent on its key within a session, and once per frame for the
// same text without a key.

import assert from "node:assert/strict";
import { derivedEffectKey, effectsOfCell } from "../../../store/tables/effects.ts";
import { readEventsOfKind } from "../../../store/tables/events.ts";
import { ensureSession } from "../../../store/tables/sessions.ts";
import { openStore } from "../../../store/store.ts";
import { isKlbrError } from "../../../runtime/core/mod.ts";
import { localSend } from "../../../runtime/session/mod.ts";

Deno.test("`localSend()` is idempotent on its key within a session", async () => {
  const dir = await Deno.makeTempDir({ prefix: "klbr-send-" });
  const store = openStore(dir);
  try {
    ensureSession(store, "default");
    ensureSession(store, "other");
    const frame = { id: "fr_1", routing: { conversations: ["local:main"] } };
    const first = localSend(store, "default", frame, { text: "deployed", key: "deploy-1" }, "c1");
    const plain = localSend(store, "default", frame, { text: "and a note" }, "c1");
    const again = localSend(store, "default", frame, { text: "deployed!", key: "deploy-1" }, "c2");
    assert.deepEqual([first.duplicate, plain.duplicate, again.duplicate], [false, false, true]);
    assert.deepEqual([first.ordinal, plain.ordinal], [1, 2]);
    assert.deepEqual(
      { send_id: again.send_id, seq: again.seq, ordinal: again.ordinal },
      { send_id: first.send_id, seq: first.seq, ordinal: 1 },
      "the second send with the key answers the first one's receipt",
    );
    const sends = readEventsOfKind(store, "default", "send").map((e) => e.body);
    assert.deepEqual(sends.map((b) => (b as { text: string }).text), ["deployed", "and a note"]);
    assert.deepEqual(
      sends.map((b) => [(b as { conversation: string }).conversation, (b as { key: unknown }).key]),
      [["local:main", "deploy-1"], [
        "local:main",
        derivedEffectKey({ frameId: "fr_1", cellId: "c1" }, [
          "local:main",
          "and a note",
        ]),
      ]],
    );
    assert.deepEqual(effectsOfCell(store, "c1").map((e) => [e.ordinal, e.summary]), [
      [1, "deployed"],
      [2, "and a note"],
    ]);
    assert.deepEqual(effectsOfCell(store, "c2"), [], "the duplicate recorded no effect");
    // The key is per session: another session sends under the same key.
    const elsewhere = localSend(store, "other", null, { text: "deployed", key: "deploy-1" }, null);
    assert.equal(elsewhere.duplicate, false);
    assert.throws(
      () => localSend(store, "default", frame, { text: "x", key: "" }, "c1"),
      (e) => isKlbrError(e, "invalid_input"),
    );
  } finally {
    store.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("`localSend()` sends the same text once per frame without a key", async () => {
  const dir = await Deno.makeTempDir({ prefix: "klbr-send-" });
  const store = openStore(dir);
  try {
    ensureSession(store, "default");
    const frame = { id: "fr_1", routing: { conversations: ["local:main"] } };
    const first = localSend(store, "default", frame, { text: "the answer is 42" }, "c1");
    // The same cell run again (a new cell id), in the same frame: one message.
    const again = localSend(store, "default", frame, { text: "the answer is 42" }, "c2");
    assert.deepEqual([first.duplicate, again.duplicate], [false, true]);
    assert.deepEqual(
      { send_id: again.send_id, seq: again.seq, ordinal: again.ordinal },
      { send_id: first.send_id, seq: first.seq, ordinal: first.ordinal },
    );
    // Other text, another conversation, another frame: each is a new message.
    const other = localSend(store, "default", frame, { text: "the answer is 43" }, "c2");
    const elsewhere = localSend(
      store,
      "default",
      {
        id: "fr_1",
        routing: { conversations: ["local:side"] },
      },
      { text: "the answer is 42" },
      "c2",
    );
    const later = localSend(store, "default", { ...frame, id: "fr_2" }, {
      text: "the answer is 42",
    }, "c3");
    // Distinct keys say the same words twice in one frame.
    const keyed = localSend(store, "default", frame, { text: "the answer is 42", key: "k2" }, "c2");
    assert.deepEqual([other, elsewhere, later, keyed].map((r) => r.duplicate), [
      false,
      false,
      false,
      false,
    ]);
    const texts = readEventsOfKind(store, "default", "send").map((e) =>
      (e.body as { text: string }).text
    );
    assert.equal(texts.length, 5);
    // Outside any frame, the cell scopes the key; with neither, nothing is deduplicated.
    const bare = () => localSend(store, "default", null, { text: "hello" }, null);
    assert.deepEqual([bare().duplicate, bare().duplicate], [false, false]);
  } finally {
    store.close();
    await Deno.remove(dir, { recursive: true });
  }
});
