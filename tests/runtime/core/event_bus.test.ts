// The event bus follows a real store's commits: a session is woken because a commit gave it
// records, never by hand, one event-loop turn after that commit (so the acks a commit allows
// leave before its records), once for all the commits of that turn, carrying their records; a
// rollback wakes nobody.

import { withStore } from "../../_helpers/store.ts";
import assert from "node:assert/strict";
import {
  EventBus,
  type LaneSignal,
  MAX_CARRIED_RECORDS,
  nextMacrotask,
} from "../../../runtime/core/mod.ts";
import { appendEvent, readEventTexts } from "../../../store/tables/events.ts";
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

Deno.test("a wake carries the records committed since the last one, as stored; past the cap it carries none", async () => {
  await withStore(async (store) => {
    const bus = new EventBus();
    const stop = bus.follow(store);
    const wakes: LaneSignal[] = [];
    bus.subscribe("default", (signal) => wakes.push(signal));
    appendEvent(store, "default", "operator", { op: "one" });
    appendEvent(store, "default", "operator", { op: "two" });
    await nextMacrotask();
    const stored = readEventTexts(store, "default").map((record) => ({ ...record }));
    assert.deepEqual(wakes, [{ kind: "wake", records: stored }]);
    store.transaction(() => {
      for (let i = 0; i <= MAX_CARRIED_RECORDS; i++) {
        appendEvent(store, "default", "operator", NOTE);
      }
    });
    await nextMacrotask();
    assert.deepEqual(wakes.at(-1), { kind: "wake" }, "too many to carry: read them");
    stop();
  });
});
