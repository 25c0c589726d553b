// The timer scheduler against a real store with an injected clock and manual host timers: a
// timer fires at its due time, exactly once across restarts, one that fell due while the
// daemon was down fires at start, a cancelled one never fires, and a blocked admission keeps
// the timer pending until it can be admitted.

import assert from "node:assert/strict";
import { readEventsOfKind } from "../../../store/tables/events.ts";
import { pendingInputs } from "../../../store/tables/inputs.ts";
import {
  cancelTimer,
  createTimer,
  getTimer,
  markTimerFired,
} from "../../../store/tables/timers.ts";
import type { Store } from "../../../store/store.ts";
import { SILENT_LOGGER } from "../../../runtime/core/mod.ts";
import { TimerScheduler, unattendedRpcs } from "../../../runtime/jobs/mod.ts";
import { ManualTimers } from "../../_helpers/fake_timers.ts";
import { testAdmit, withClockedStore } from "../../_helpers/unattended.ts";

function scheduler(store: Store, timers: ManualTimers, open = { value: true }) {
  const { admit, admitted } = testAdmit(store, open);
  const s = new TimerScheduler({
    store,
    log: SILENT_LOGGER,
    timers,
    fire: (timer) =>
      admit(timer.session, {
        sourceKind: "timer",
        dedupeKey: `timer:${timer.id}`,
        conversationId: timer.conversation,
        author: "timer",
        body: "fired",
      }, (inputId) => markTimerFired(store, timer.id, inputId)),
  });
  return { s, admitted };
}

const at = (store: Store, dueAt: number) =>
  createTimer(store, { session: "default", dueAt, conversation: "local:default" });

Deno.test("`TimerScheduler` fires a timer at its due time and not before", async () => {
  await withClockedStore(({ store, clock }) => {
    const timers = new ManualTimers(clock);
    const { s, admitted } = scheduler(store, timers);
    s.start();
    const timer = at(store, clock.now + 2_000);
    s.poke();
    assert.equal(timers.nextAt, timer.dueAt);
    timers.advance(1_999);
    assert.equal(getTimer(store, timer.id)?.state, "pending");
    assert.equal(admitted.length, 0);
    timers.advance(1);
    assert.equal(getTimer(store, timer.id)?.state, "fired");
    assert.deepEqual(pendingInputs(store, "default").map((i) => [i.sourceKind, i.dedupeKey]), [
      ["timer", `timer:${timer.id}`],
    ]);
    // Nothing is armed once nothing is pending.
    assert.equal(timers.armed, 0);
    s.stop();
  });
});

Deno.test("`TimerScheduler` fires a timer that fell due while the daemon was down once, at start", async () => {
  await withClockedStore((cs) => {
    const timer = at(cs.store, cs.clock.now + 5_000);
    // The daemon is down across the due time: a restart finds the timer due.
    cs.clock.now += 60_000;
    const store = cs.reopen();
    const timers = new ManualTimers(cs.clock);
    const first = scheduler(store, timers);
    first.s.start();
    assert.equal(getTimer(store, timer.id)?.state, "fired");
    assert.equal(first.admitted.length, 1);
    first.s.stop();
    // Another restart: the timer is final, nothing fires again.
    const again = cs.reopen();
    const second = scheduler(again, new ManualTimers(cs.clock));
    second.s.start();
    assert.equal(second.admitted.length, 0);
    assert.equal(readEventsOfKind(again, "default", "timer.fired").length, 1);
    assert.equal(pendingInputs(again, "default").length, 1);
    second.s.stop();
  });
});

Deno.test("`TimerScheduler` never fires a cancelled timer", async () => {
  await withClockedStore(({ store, clock }) => {
    const timers = new ManualTimers(clock);
    const { s, admitted } = scheduler(store, timers);
    s.start();
    const keep = at(store, clock.now + 1_000);
    const drop = at(store, clock.now + 500);
    s.poke();
    cancelTimer(store, { session: "default", id: drop.id, cause: "cancelled by a cell" });
    s.poke();
    timers.advance(10_000);
    assert.equal(getTimer(store, drop.id)?.state, "cancelled");
    assert.equal(getTimer(store, keep.id)?.state, "fired");
    assert.equal(admitted.length, 1);
    s.stop();
  });
});

Deno.test("`TimerScheduler` keeps a timer pending while admission is closed and fires it after", async () => {
  await withClockedStore(({ store, clock }) => {
    const timers = new ManualTimers(clock);
    const open = { value: false };
    const { s, admitted } = scheduler(store, timers, open);
    const timer = at(store, clock.now + 100);
    s.start();
    timers.advance(100);
    assert.equal(getTimer(store, timer.id)?.state, "pending");
    // It retries after a pause, not in a busy loop.
    assert.equal(timers.armed, 1);
    assert.ok(timers.nextAt! > clock.now);
    open.value = true;
    timers.advance(5_000);
    assert.equal(getTimer(store, timer.id)?.state, "fired");
    assert.equal(admitted.length, 1);
    s.stop();
    assert.equal(timers.armed, 0);
  });
});

Deno.test("`TimerScheduler` re-checks the store at least every minute for a far timer", async () => {
  await withClockedStore(({ store, clock }) => {
    const timers = new ManualTimers(clock);
    const { s } = scheduler(store, timers);
    const timer = at(store, clock.now + 3 * 3_600_000);
    s.start();
    assert.equal(timers.nextAt, clock.now + 60_000);
    timers.advance(3 * 3_600_000);
    assert.equal(getTimer(store, timer.id)?.state, "fired");
    s.stop();
  });
});

Deno.test("`timers.at` refuses a due time past 9999-12-31 in its arguments, before any store write", () => {
  const timersAt = unattendedRpcs.find((rpc) => rpc.name === "timers.at")!;
  assert.equal(timersAt.args.safeParse({ until_ms: 253_402_300_799_999 }).success, true);
  const far = timersAt.args.safeParse({ until_ms: 8_700_000_000_000_000 });
  assert.equal(far.success, false, "a time no date can name is refused as an argument");
});
