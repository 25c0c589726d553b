// The effects writer, the store's health and its failure classes, against real SQLite in a
// temp dir.

import { withStore as withFreshStore } from "../_helpers/store.ts";
import assert from "node:assert/strict";
import { effectByKey, effectsOfCell, recordEffect } from "../../store/tables/effects.ts";
import { expireInputs, getInput, pendingBefore } from "../../store/tables/inputs.ts";
import { admitInput } from "../../store/tables/inputs.ts";
import { readEvents } from "../../store/tables/events.ts";
import { type Store } from "../../store/store.ts";
import { isKlbrError } from "../../runtime/core/mod.ts";

/** A fresh store whose clock counts one ms a call, so record times are exact. */
const withStore = (fn: (store: Store, dir: string) => void | Promise<void>) =>
  withFreshStore(fn, { countingClock: true });

const effect = (cellId: string | null, refId: string, key?: string) => ({
  session: "default",
  cellId,
  kind: "local.send",
  refId,
  key,
  summary: `text of ${refId}`,
});

Deno.test("`recordEffect()` numbers a cell's effects and keeps a key once", async () => {
  await withStore((store) => {
    const ordinals = store.transaction(() => [
      recordEffect(store, effect("cell_a", "s1")),
      recordEffect(store, effect("cell_a", "s2", "k")),
      recordEffect(store, effect("cell_b", "s3")),
      recordEffect(store, effect(null, "s4")),
    ]);
    assert.deepEqual(ordinals, [1, 2, 1, 1]);
    assert.deepEqual(effectsOfCell(store, "cell_a").map((e) => [e.ordinal, e.refId]), [
      [1, "s1"],
      [2, "s2"],
    ]);
    assert.equal(effectByKey(store, "default", "local.send", "k")?.refId, "s2");
    assert.equal(effectByKey(store, "default", "discord.send", "k"), undefined);
    // The same key in the same session and kind is refused by the store itself.
    assert.throws(
      () => store.transaction(() => recordEffect(store, effect("cell_c", "s5", "k"))),
      /UNIQUE constraint failed/,
    );
    assert.equal(effectsOfCell(store, "cell_c").length, 0, "the refused effect wrote nothing");
    assert.throws(
      () => recordEffect(store, effect("cell_a", "x")),
      /inside its writer's transaction/,
    );
  });
});

Deno.test("`expireInputs()` ends pending inputs with their disposition and leaves the rest", async () => {
  await withStore((store) => {
    const admit = (n: number) =>
      admitInput(store, {
        session: "default",
        sourceKind: "local",
        dedupeKey: `local:cl:m${n}`,
        conversationId: "local:default",
        author: "owner",
        body: `n${n}`,
      }).inputId;
    const [a, b, c] = [admit(1), admit(2), admit(3)];
    assert.deepEqual(pendingBefore(store, "default", store.clock()).count, 3);
    const done = expireInputs(store, { session: "default", inputIds: [a, b], reason: "too old" });
    assert.deepEqual(done, [a, b]);
    assert.deepEqual(
      expireInputs(store, { session: "default", inputIds: [a, "in_missing"], reason: "again" }),
      [],
      "an input that is no longer pending, or not there, is left alone",
    );
    assert.equal(getInput(store, a)?.status, "dismissed");
    assert.equal(getInput(store, a)?.disposition, "expired");
    assert.equal(getInput(store, a)?.dispositionReason, "too old");
    assert.equal(getInput(store, c)?.status, "pending");
    const events = readEvents(store, "default").slice(3);
    assert.deepEqual(events.map((e) => e.kind), ["input.expired", "input.expired"]);
    const body = events[0].body as { input_id: string; reason: string; waited_ms: number };
    assert.deepEqual([body.input_id, body.reason], [a, "too old"]);
    assert.ok(body.waited_ms > 0, "the record says how long it waited");
    assert.equal(pendingBefore(store, "default", store.clock()).count, 1);
    assert.throws(
      () => expireInputs(store, { session: "default", inputIds: [c], reason: "" }),
      (e) => isKlbrError(e, "invalid_input"),
    );
  });
});

Deno.test("`transaction()` answers a SQLite write failure with store_unavailable; health is failing until the next commit", async () => {
  await withStore((store) => {
    assert.equal(store.health().state, "ok");
    // query_only makes every write fail with SQLITE_READONLY: a real failure class of SQLite.
    store.statement("PRAGMA query_only = 1").run();
    const insert = () =>
      store.transaction(() =>
        store.statement("INSERT INTO klbr_meta (key, value) VALUES ('x', 'y')").run()
      );
    assert.throws(insert, (error) => {
      assert.ok(isKlbrError(error, "store_unavailable"), String(error));
      assert.equal(error.status, 503);
      assert.match(error.message, /^cannot use the store: the store cannot be written/);
      return true;
    });
    const health = store.health();
    assert.equal(health.state, "failing");
    assert.match(String(health.error), /readonly database/);
    assert.ok(health.since !== null);
    store.statement("PRAGMA query_only = 0").run();
    insert();
    assert.equal(store.health().state, "ok", "the next real commit clears it");
    assert.ok(store.health().lastCommitAt !== null);
  });
});
