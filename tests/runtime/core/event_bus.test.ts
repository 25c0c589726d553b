// The event bus follows a real store's commits: a session is woken because a commit gave it
// records, never by hand, one event-loop turn after that commit (so the acks a commit allows
// leave before its records), once for all the commits of that turn; a rollback wakes nobody.

import { withStore } from "../../_helpers/store.ts";
import assert from "node:assert/strict";
import { EventBus, type LaneSignal, nextMacrotask } from "../../../runtime/core/mod.ts";
import { appendEvent } from "../../../store/tables/events.ts";
import { ensureSession } from "../../../store/tables/sessions.ts";

const NOTE = { op: "note" };

Deno.test("`EventBus.follow()` wakes a session a turn after the commits that gave it records, once", async () => {
  await withStore(async (store) => {
    ensureSession(store, "other");
    const bus = new EventBus();
    const stop = bus.follow(store);
    const woken: string[] = [];
    const listener = (session: string) => (signal: LaneSignal) =>
      woken.push(`${session}:${signal.kind}`);
    bus.subscribe("default", listener("default"));
    bus.subscribe("other", listener("other"));
    appendEvent(store, "default", "operator", NOTE);
    appendEvent(store, "default", "operator", NOTE);
    store.transaction(() => {}); // a commit without records wakes nobody
    assert.deepEqual(woken, [], "no wake inside the turn of the commit");
    await nextMacrotask();
    assert.deepEqual(woken, ["default:wake"], "two commits in one turn: one wake");
    assert.throws(() =>
      store.transaction(() => {
        appendEvent(store, "other", "operator", NOTE);
        throw new Error("rolled back");
      })
    );
    await nextMacrotask();
    assert.deepEqual(woken, ["default:wake"], "a rollback wakes nobody");
    appendEvent(store, "other", "operator", NOTE);
    await nextMacrotask();
    assert.deepEqual(woken, ["default:wake", "other:wake"]);
    stop();
    appendEvent(store, "default", "operator", NOTE);
    await nextMacrotask();
    assert.deepEqual(woken, ["default:wake", "other:wake"], "a stopped bus follows no more");
  });
});
