// The jobs panel's view: timers and jobs built from their durable records, newest first, each
// state in words; a job is cancellable only while it is pending or running.

import assert from "node:assert/strict";
import type { LaneRecord } from "../../runtime/core/mod.ts";
import { cancellable, deriveUnattended, stateBadge } from "../../ui/src/jobs_view.ts";

function records(...items: [string, Record<string, unknown>][]): LaneRecord[] {
  return items.map(([type, data], i) => ({
    kind: "record",
    session: "default",
    seq: i + 1,
    at: 1_736_933_400_000 + i * 1000,
    type,
    data,
  }));
}

Deno.test("`deriveUnattended()` follows each timer and job through its records", () => {
  const view = deriveUnattended(records(
    ["timer.set", { timer_id: "tm_1", due_at: 5, note: "nap", wait: true, cell_id: "cell_1" }],
    ["timer.set", { timer_id: "tm_2", due_at: 9, note: "later", wait: false, cell_id: "cell_1" }],
    ["job.state", {
      job_id: "job_1",
      name: "build",
      kind: "code",
      from: null,
      to: "pending",
      cause: "started by cell cell_1",
    }],
    ["timer.fired", { timer_id: "tm_1", input_id: "in_1" }],
    ["job.state", { job_id: "job_1", to: "running", cause: "a job slot was free", tokens_used: 0 }],
    ["timer.cancelled", { timer_id: "tm_2", cause: "cancelled by a cell" }],
    ["job.state", {
      job_id: "job_1",
      to: "over_budget",
      cause: "job tokens: 2468 of 2000 used",
      tokens_used: 2468,
      requests_used: 2,
    }],
    ["timer.fired", { timer_id: "tm_unknown" }],
  ));
  assert.deepEqual(view.timers.map((t) => [t.timerId, t.state, t.wait, t.cause]), [
    ["tm_2", "cancelled", false, "cancelled by a cell"],
    ["tm_1", "fired", true, "fired"],
  ]);
  const [job] = view.jobs;
  assert.deepEqual([job.name, job.state, job.cause, job.tokensUsed, job.requestsUsed], [
    "build",
    "over_budget",
    "job tokens: 2468 of 2000 used",
    2468,
    2,
  ]);
  assert.deepEqual(job.moves.map((m) => m.to), ["pending", "running", "over_budget"]);
});

Deno.test("`cancellable()` and `stateBadge()` say each state in words", () => {
  assert.deepEqual(["pending", "running", "done", "interrupted"].map(cancellable), [
    true,
    true,
    false,
    false,
  ]);
  assert.deepEqual(stateBadge("interrupted"), {
    tone: "partial",
    label: "interrupted · not re-run",
  });
  assert.deepEqual(stateBadge("over_budget"), { tone: "warning", label: "over budget" });
  assert.deepEqual(stateBadge("running"), { tone: "progress", label: "running" });
});
