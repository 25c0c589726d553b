// `localSend()` against real SQLite in a temp dir: one durable record per send, numbered
// among its cell's effects, and idempotent on its key within a session.

import assert from "node:assert/strict";
import { effectsOfCell } from "../../../store/effects.ts";
import { readEventsOfKind } from "../../../store/events.ts";
import { ensureSession } from "../../../store/sessions.ts";
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
      [["local:main", "deploy-1"], ["local:main", null]],
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
