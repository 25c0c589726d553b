// The timers writer against real SQLite: a timer commits with its event and its cause, fires
// only inside its admission's transaction and only once, and a cancelled timer never fires.

import assert from "node:assert/strict";
import { readEventsOfKind } from "../../store/tables/events.ts";
import { getInput } from "../../store/tables/inputs.ts";
import {
  cancelTimer,
  createTimer,
  dueTimerCount,
  dueTimers,
  getTimer,
  listTimers,
  markTimerFired,
  nextDueAt,
} from "../../store/tables/timers.ts";
import { workCounts } from "../../store/tables/work_counts.ts";
import { isKlbrError } from "../../runtime/core/mod.ts";
import { someCell, testAdmit, withClockedStore } from "../_helpers/unattended.ts";

const base = { session: "default", conversation: "local:default" };

Deno.test("`createTimer()` commits a pending timer with its event and its cause", async () => {
  await withClockedStore(({ store, clock }) => {
    const cellId = someCell(store);
    const timer = createTimer(store, {
      ...base,
      dueAt: clock.now + 2000,
      note: "nap",
      cellId,
      wait: true,
    });
    assert.match(timer.id, /^tm_/);
    assert.equal(timer.state, "pending");
    assert.equal(timer.cellId, cellId);
    assert.equal(timer.wait, true);
    assert.deepEqual(getTimer(store, timer.id), timer);
    const [event] = readEventsOfKind(store, "default", "timer.set");
    assert.equal(event.body && (event.body as { timer_id: string }).timer_id, timer.id);
    assert.equal((event.body as { cell_id: string }).cell_id, cellId);
    // The effects of a cell are found by its id.
    assert.deepEqual(
      listTimers(store, "default", { all: true }).filter((t) => t.cellId === cellId).map((t) =>
        t.id
      ),
      [timer.id],
    );
  });
});

Deno.test("`createTimer()` refuses a negative due time and an unknown cell", async () => {
  await withClockedStore(({ store }) => {
    assert.throws(
      () => createTimer(store, { ...base, dueAt: -1 }),
      (e) => isKlbrError(e, "invalid_input"),
    );
    // A cell id is a reference: one that was never recorded is refused by the store.
    assert.throws(() => createTimer(store, { ...base, dueAt: 5, cellId: "cell_nope" }));
    assert.deepEqual(listTimers(store, "default", { all: true }), []);
  });
});

Deno.test("`markTimerFired()` runs only inside a transaction and fires a timer once", async () => {
  await withClockedStore(({ store, clock }) => {
    const timer = createTimer(store, { ...base, dueAt: clock.now + 10 });
    assert.throws(
      () => markTimerFired(store, timer.id, "in_x"),
      /inside its admission's transaction/,
    );
    assert.deepEqual(dueTimers(store, clock.now), []);
    clock.now += 10;
    assert.deepEqual(dueTimers(store, clock.now).map((t) => t.id), [timer.id]);
    const { admit, admitted } = testAdmit(store);
    const fire = () =>
      admit("default", {
        sourceKind: "timer",
        dedupeKey: `timer:${timer.id}`,
        conversationId: "local:default",
        author: "timer",
        body: "fired",
      }, (inputId) => markTimerFired(store, timer.id, inputId));
    assert.equal(fire(), true);
    const fired = getTimer(store, timer.id)!;
    assert.equal(fired.state, "fired");
    assert.equal(fired.inputId, admitted[0]);
    assert.equal(getInput(store, admitted[0])?.sourceKind, "timer");
    // Firing again is refused, and the refusal rolls the whole admission back.
    assert.throws(fire, (e) => isKlbrError(e, "invalid_input"));
    assert.equal(admitted.length, 1);
    assert.equal(readEventsOfKind(store, "default", "input.admitted").length, 1);
    assert.equal(readEventsOfKind(store, "default", "timer.fired").length, 1);
    assert.deepEqual(dueTimers(store, clock.now), []);
    assert.equal(nextDueAt(store), undefined);
  });
});

Deno.test("`cancelTimer()` ends a pending timer and leaves a fired one alone", async () => {
  await withClockedStore(({ store, clock }) => {
    const a = createTimer(store, { ...base, dueAt: clock.now + 5 });
    const b = createTimer(store, { ...base, dueAt: clock.now + 7 });
    assert.deepEqual([workCounts(store).pendingTimers, dueTimerCount(store, clock.now)], [2, 0]);
    const done = cancelTimer(store, { session: "default", id: a.id, cause: "cancelled by a cell" });
    assert.equal(done.cancelled, true);
    assert.equal(done.timer.state, "cancelled");
    assert.equal(done.timer.cause, "cancelled by a cell");
    assert.equal(
      cancelTimer(store, { session: "default", id: a.id, cause: "again" }).cancelled,
      false,
    );
    clock.now += 100;
    // A cancelled timer is never due.
    assert.deepEqual(dueTimers(store, clock.now).map((t) => t.id), [b.id]);
    assert.deepEqual([workCounts(store).pendingTimers, dueTimerCount(store, clock.now)], [1, 1]);
    assert.throws(
      () => cancelTimer(store, { session: "other", id: b.id, cause: "x" }),
      (e) => isKlbrError(e, "not_found"),
    );
    assert.deepEqual(listTimers(store, "default").map((t) => t.id), [b.id]);
    assert.deepEqual(listTimers(store, "default", { all: true }).map((t) => t.id), [b.id, a.id]);
  });
});
