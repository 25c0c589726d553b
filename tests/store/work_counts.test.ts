// The work counts against real SQLite: after every kind of change (admission, a duplicate, a
// frame taking inputs, a frame giving them back, expiry, a rolled-back transaction, jobs and
// timers moving) they equal what counting the tables says, and the inputs waiting past a
// threshold are counted as the clock moves.

import assert from "node:assert/strict";
import { localDedupeKey } from "../../store/tables/dedupe_keys.ts";
import { acceptFrame, finishFrame } from "../../store/tables/frames.ts";
import {
  admitInput,
  expireInputs,
  pendingBefore,
  pendingSummary,
} from "../../store/tables/inputs.ts";
import { createJob, moveJob } from "../../store/tables/jobs.ts";
import { cancelTimer, createTimer } from "../../store/tables/timers.ts";
import { oldestPendingAt, waitingInputs, workCounts } from "../../store/tables/work_counts.ts";
import type { Store } from "../../store/store.ts";
import { RELEASE, withClockedStore } from "../_helpers/unattended.ts";

let n = 0;
function admit(store: Store, message = `m-${++n}`): string {
  return admitInput(store, {
    session: "default",
    sourceKind: "local",
    dedupeKey: localDedupeKey("counts", message),
    conversationId: "local:default",
    author: "owner",
    body: message,
  }).inputId;
}

/** A count read straight from the tables (one session), the oracle. */
function countRows(store: Store, sql: string): number {
  return (store.statement(sql).get() as { n: number }).n;
}

/** The counts equal a full count of the tables. */
function assertTruth(store: Store): void {
  const truth = {
    pendingInputs: pendingSummary(store, "default").count,
    pendingJobs: countRows(store, "SELECT count(*) AS n FROM jobs WHERE state = 'pending'"),
    runningJobs: countRows(store, "SELECT count(*) AS n FROM jobs WHERE state = 'running'"),
    pendingTimers: countRows(store, "SELECT count(*) AS n FROM timers WHERE state = 'pending'"),
  };
  assert.deepEqual(workCounts(store, "default"), truth);
  assert.deepEqual(workCounts(store), truth, "one session: the sum is the session");
  assert.equal(
    oldestPendingAt(store, "default"),
    pendingSummary(store, "default").oldestAdmittedAt,
  );
}

Deno.test("work counts follow admission, frames, expiry, jobs and timers, and roll back with their transaction", async () => {
  await withClockedStore(({ store, clock }) => {
    const early = admit(store);
    assertTruth(store);
    assert.equal(workCounts(store, "default").pendingInputs, 1);

    const ids = [early, admit(store), admit(store), admit(store)];
    admit(store, "m-2"); // a duplicate writes nothing
    assertTruth(store);
    assert.equal(workCounts(store, "default").pendingInputs, 4);

    const frame = acceptFrame(store, {
      session: "default",
      inputIds: ids.slice(0, 2),
      routing: {},
      contextEpoch: 0,
      policyRevision: RELEASE,
    });
    assertTruth(store);
    assert.equal(workCounts(store, "default").pendingInputs, 2);
    finishFrame(store, frame.frameId, "abandoned", "gave its inputs back");
    assertTruth(store);
    assert.equal(workCounts(store, "default").pendingInputs, 4);

    expireInputs(store, { session: "default", inputIds: [ids[3]], reason: "too old" });
    assertTruth(store);
    assert.equal(workCounts(store, "default").pendingInputs, 3);

    // A transaction that rolls back takes its counts with it.
    assert.throws(() =>
      store.transaction(() => {
        admit(store);
        admit(store);
        throw new Error("rolled back");
      })
    );
    assertTruth(store);
    assert.equal(workCounts(store, "default").pendingInputs, 3);

    const job = createJob(store, {
      session: "default",
      kind: "code",
      name: "count",
      code: "1",
      budget: { wall_time_ms: 1000, model_requests: 1, tokens: 10 },
      releaseId: RELEASE,
      workspace: "/work",
      conversation: "local:default",
      cellId: null,
      cause: "test",
    });
    assertTruth(store);
    moveJob(store, job.id, { to: "running", cause: "started" });
    assertTruth(store);
    assert.equal(workCounts(store, "default").runningJobs, 1);
    moveJob(store, job.id, { to: "done", cause: "ended", result: {} });
    assertTruth(store);
    assert.equal(workCounts(store, "default").runningJobs, 0);

    const base = { session: "default", conversation: "local:default", note: "n" };
    const timer = createTimer(store, { ...base, dueAt: clock.now + 10 });
    createTimer(store, { ...base, dueAt: clock.now + 20 });
    assertTruth(store);
    cancelTimer(store, { session: "default", id: timer.id, cause: "cancelled" });
    assertTruth(store);
    assert.equal(workCounts(store, "default").pendingTimers, 1);
  });
});

Deno.test("`waitingInputs()` counts the pending inputs past the threshold as the clock moves", async () => {
  await withClockedStore(({ store, clock }) => {
    const warn = 1_000;
    const truth = () => pendingBefore(store, "default", clock.now - warn).count;
    const check = () => {
      assert.equal(waitingInputs(store, "default", clock.now, warn).count, truth());
    };
    const first = [admit(store), admit(store), admit(store)];
    check();
    assert.equal(truth(), 0);
    clock.now += 600;
    const second = [admit(store), admit(store)];
    check();
    clock.now += 500; // the first three crossed
    check();
    assert.equal(truth(), 3);
    // Taking a crossed input and giving it back moves the count both ways.
    const frame = acceptFrame(store, {
      session: "default",
      inputIds: [first[0], second[0]],
      routing: {},
      contextEpoch: 0,
      policyRevision: RELEASE,
    });
    check();
    assert.equal(truth(), 2);
    clock.now += 700; // the second two crossed too, one of them taken
    check();
    assert.equal(truth(), 3);
    finishFrame(store, frame.frameId, "abandoned", "back");
    check();
    assert.equal(truth(), 5);
    expireInputs(store, { session: "default", inputIds: [first[1]], reason: "old" });
    check();
    assert.equal(truth(), 4);
    const { markSeq } = waitingInputs(store, "default", clock.now, warn);
    assert.ok(markSeq > 0);
    // Another threshold counts afresh.
    assert.equal(waitingInputs(store, "default", clock.now, 10_000).count, 0);
  });
});
