/**
 * Admission of several inputs at once (`admitInputs`, the daemon's group commit): a refused
 * input is answered alone and writes nothing, the others are admitted with consecutive seqs.
 *
 * @module
 */

import assert from "node:assert/strict";
import { KlbrError } from "../../runtime/core/mod.ts";
import { type AdmitInput, admitInputs, pendingInputs } from "../../store/tables/inputs.ts";
import { readEvents } from "../../store/tables/events.ts";
import { ensureSession, getSession } from "../../store/tables/sessions.ts";
import { type Store } from "../../store/store.ts";
import { withStore } from "../_helpers/store.ts";

const headSeq = (store: Store, session: string) => getSession(store, session)!.nextSeq - 1;

const input = (key: string, fields: Partial<AdmitInput> = {}): AdmitInput => ({
  session: "default",
  sourceKind: "local",
  dedupeKey: `local:c1:${key}`,
  conversationId: "local:main",
  author: "owner",
  body: `text ${key}`,
  ...fields,
});

Deno.test("`admitInputs()` refuses a bad input alone and admits the rest with their own seqs", async () => {
  await withStore((store) => {
    const before = headSeq(store, "default");
    const outcomes = admitInputs(store, [
      input("a"),
      input("b", { author: "" }),
      input("c"),
      input("a"),
    ]);
    assert.equal(outcomes.length, 4);
    const [a, b, c, again] = outcomes;
    assert.ok(
      !(a instanceof KlbrError) && !(c instanceof KlbrError) && !(again instanceof KlbrError),
    );
    assert.ok(b instanceof KlbrError);
    assert.equal(b.code, "invalid_input");
    assert.match(b.message, /author/);
    assert.deepEqual([a.seq, c.seq], [before + 1, before + 2]);
    assert.equal(a.duplicate, false);
    // The same key twice in one call is one input.
    assert.deepEqual(again, { inputId: a.inputId, seq: a.seq, duplicate: true });
    assert.equal(headSeq(store, "default"), before + 2);
    assert.deepEqual(pendingInputs(store, "default").map((i) => i.body), ["text a", "text c"]);
  });
});

Deno.test("`admitInputs()` answers a write refused after its checks alone", async () => {
  await withStore((store) => {
    const before = headSeq(store, "default");
    // A session that does not exist passes the checks and is refused when written.
    const outcomes = admitInputs(store, [
      input("a"),
      input("b", { session: "nowhere" }),
      input("c"),
    ]);
    const [a, b, c] = outcomes;
    assert.ok(b instanceof KlbrError);
    assert.equal(b.code, "not_found");
    assert.ok(!(a instanceof KlbrError) && !(c instanceof KlbrError));
    // The first attempt was rolled back whole: no seq was lost to it.
    assert.deepEqual([a.seq, c.seq], [before + 1, before + 2]);
    assert.equal(headSeq(store, "default"), before + 2);
    assert.equal(pendingInputs(store, "default").length, 2);
  });
});

Deno.test("`admitInputs()` inside a transaction that rolls back admits nothing", async () => {
  await withStore((store) => {
    const before = headSeq(store, "default");
    assert.throws(
      () =>
        store.transaction(() => {
          const outcomes = admitInputs(store, [input("a"), input("b")]);
          assert.equal(outcomes.filter((o) => !(o instanceof KlbrError)).length, 2);
          throw new Error("the caller gives up");
        }),
      /the caller gives up/,
    );
    assert.equal(headSeq(store, "default"), before);
    assert.equal(pendingInputs(store, "default").length, 0);
    // Nothing was kept of the keys either: they admit anew.
    const [a] = admitInputs(store, [input("a")]);
    assert.ok(!(a instanceof KlbrError) && !a.duplicate);
  });
});

Deno.test("`admitInputs()` numbers each session's new inputs consecutively, in order, and every seq has its record", async () => {
  await withStore((store) => {
    ensureSession(store, "other");
    const [beforeDefault, beforeOther] = [headSeq(store, "default"), headSeq(store, "other")];
    admitInputs(store, [input("old")]);
    const outcomes = admitInputs(store, [
      input("a"),
      input("x", { session: "other" }),
      input("old"),
      input("b"),
      input("a"),
      input("y", { session: "other" }),
    ]);
    const seqs = outcomes.map((o) => {
      assert.ok(!(o instanceof KlbrError));
      return [o.seq, o.duplicate];
    });
    const d = beforeDefault;
    const o = beforeOther;
    assert.deepEqual(seqs, [
      [d + 2, false],
      [o + 1, false],
      [d + 1, true], // admitted before this call: its first seq
      [d + 3, false],
      [d + 2, true], // repeated within the call: the first one's
      [o + 2, false],
    ]);
    assert.deepEqual([headSeq(store, "default"), headSeq(store, "other")], [d + 3, o + 2]);
    // Each number is one input.admitted record of the input that holds it: no gap, no reuse.
    for (const session of ["default", "other"]) {
      const records = readEvents(store, session).filter((e) => e.kind === "input.admitted");
      const inputs = pendingInputs(store, session);
      assert.deepEqual(
        records.map((e) => [e.seq, (e.body as { input_id: string }).input_id]),
        inputs.map((i) => [i.seq, i.id]),
      );
      assert.deepEqual(
        readEvents(store, session).map((e) => e.seq),
        Array.from({ length: headSeq(store, session) }, (_, i) => i + 1),
      );
    }
  });
});
