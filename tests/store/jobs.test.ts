// The jobs writer against real SQLite: a job commits with its pins and cause, moves only
// forward with each move and cause recorded, is announced once, and draws usage only while open.

import assert from "node:assert/strict";
import { readEventsOfKind } from "../../store/tables/events.ts";
import {
  announceJob,
  createJob,
  drawJobUsage,
  getJob,
  listJobs,
  moveJob,
  openJobs,
  releasesPinnedByJobs,
  unannouncedJobs,
} from "../../store/tables/jobs.ts";
import { workCounts } from "../../store/tables/work_counts.ts";
import { isKlbrError } from "../../runtime/core/mod.ts";
import { RELEASE, someCell, testAdmit, withClockedStore } from "../_helpers/unattended.ts";

const budget = { wall_time_ms: 60_000, model_requests: 3, tokens: 1000 };

function newJob(store: Parameters<typeof createJob>[0], cellId: string | null = null) {
  return createJob(store, {
    session: "default",
    kind: "code",
    name: "build",
    code: "6 * 7",
    budget,
    releaseId: RELEASE,
    workspace: "/work",
    conversation: "local:default",
    cellId,
    cause: "started by a cell",
  });
}

Deno.test("`createJob()` commits a pending job with its pins and its cause", async () => {
  await withClockedStore(({ store }) => {
    const cellId = someCell(store);
    const job = newJob(store, cellId);
    assert.match(job.id, /^job_/);
    assert.equal(job.state, "pending");
    assert.equal(job.cause, "started by a cell");
    assert.equal(job.releaseId, RELEASE);
    assert.equal(job.workspace, "/work");
    assert.deepEqual(job.budget, budget);
    assert.deepEqual(getJob(store, job.id), job);
    const [event] = readEventsOfKind(store, "default", "job.state");
    assert.deepEqual(
      [(event.body as { from: null }).from, (event.body as { to: string }).to],
      [null, "pending"],
    );
    assert.deepEqual(
      listJobs(store, "default").filter((j) => j.cellId === cellId).map((j) => j.id),
      [job.id],
    );
    assert.deepEqual(releasesPinnedByJobs(store), [RELEASE]);
    assert.deepEqual([workCounts(store).pendingJobs, workCounts(store).runningJobs], [1, 0]);
  });
});

Deno.test("`createJob()` refuses a bad budget and an unrecorded release", async () => {
  await withClockedStore(({ store }) => {
    assert.throws(
      () => createJob(store, { ...newJobFields(), budget: { ...budget, tokens: -1 } }),
      (e) => isKlbrError(e, "invalid_input"),
    );
    assert.throws(() => createJob(store, { ...newJobFields(), releaseId: "b".repeat(64) }));
    assert.deepEqual(openJobs(store), []);
  });
});

function newJobFields() {
  return {
    session: "default",
    kind: "code" as const,
    name: "x",
    code: "1",
    budget,
    releaseId: RELEASE,
    workspace: "/w",
    conversation: "local:default",
    cause: "test",
  };
}

Deno.test("`moveJob()` commits each move with its cause and refuses to move a finished job", async () => {
  await withClockedStore(({ store, clock }) => {
    const job = newJob(store);
    clock.now += 5;
    const running = moveJob(store, job.id, { to: "running", cause: "a job slot was free" });
    assert.equal(running.startedAt, clock.now);
    assert.throws(
      () => moveJob(store, job.id, { to: "running", cause: "again" }),
      (e) => isKlbrError(e, "invalid_input") && /it is running/.test(e.message),
    );
    clock.now += 5;
    const done = moveJob(store, job.id, {
      to: "done",
      cause: "its code finished",
      result: { value: "42" },
    });
    assert.deepEqual([done.state, done.endedAt, done.result], ["done", clock.now, { value: "42" }]);
    for (const to of ["failed", "interrupted", "running"] as const) {
      assert.throws(
        () => moveJob(store, job.id, { to, cause: "late" }),
        (e) => isKlbrError(e, "invalid_input") && e.message.endsWith(`it is done (got ${to})`),
      );
    }
    const moves = readEventsOfKind(store, "default", "job.state").map((e) =>
      e.body as Record<string, string>
    );
    assert.deepEqual(moves.map((m) => [m.from, m.to, m.cause]), [
      [null, "pending", "started by a cell"],
      ["pending", "running", "a job slot was free"],
      ["running", "done", "its code finished"],
    ]);
  });
});

Deno.test("`announceJob()` records the completion input once, in its admission", async () => {
  await withClockedStore(({ store }) => {
    const job = newJob(store);
    const { admit } = testAdmit(store);
    const input = {
      sourceKind: "job" as const,
      dedupeKey: `job:${job.id}`,
      conversationId: "local:default",
      author: "job",
      body: "ended",
    };
    // A job that has not ended cannot be announced; the admission rolls back with it.
    assert.throws(() => admit("default", input, (id) => announceJob(store, job.id, id)));
    assert.equal(readEventsOfKind(store, "default", "input.admitted").length, 0);
    moveJob(store, job.id, { to: "cancelled", cause: "cancelled by the operator" });
    assert.deepEqual(unannouncedJobs(store, "default").map((j) => j.id), [job.id]);
    admit("default", input, (id) => announceJob(store, job.id, id));
    assert.match(getJob(store, job.id)!.inputId!, /^in_/);
    assert.deepEqual(unannouncedJobs(store, "default"), []);
    assert.throws(
      () => store.transaction(() => announceJob(store, job.id, "in_other")),
      (e) => isKlbrError(e, "invalid_input"),
    );
  });
});

Deno.test("`drawJobUsage()` adds to open jobs only", async () => {
  await withClockedStore(({ store }) => {
    const a = newJob(store);
    const b = newJob(store);
    moveJob(store, b.id, { to: "running", cause: "x" });
    moveJob(store, b.id, { to: "failed", cause: "x" });
    const [after, ended] = drawJobUsage(store, [a.id, b.id], { requests: 1, tokens: 300 });
    assert.deepEqual([after.requestsUsed, after.tokensUsed], [1, 300]);
    assert.deepEqual([ended.requestsUsed, ended.tokensUsed], [0, 0]);
  });
});
