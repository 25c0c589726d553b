// The jobs panel's view: timers and jobs built from their durable records (read through the
// shared schemas), newest first, each state in words; a job is cancellable only while it is
// pending or running; the events lane names these records in words.

import assert from "node:assert/strict";
import type { LaneRecord, RecordInput, RecordType } from "../../runtime/core/mod.ts";
import { cancellable, deriveUnattended, stateBadge } from "../../ui/src/jobs_view.ts";
import { body, titleOf } from "./_record_data.ts";

function records(...items: { [T in RecordType]: [T, Partial<RecordInput<T>>] }[RecordType][]) {
  return items.map(([type, fields], i): LaneRecord => ({
    kind: "record",
    session: "default",
    seq: i + 1,
    at: 1_736_933_400_000 + i * 1000,
    type,
    data: body(type, fields as never) as LaneRecord["data"],
  }));
}

const job = (from: string | null, to: string, cause: string, more: Record<string, unknown> = {}) =>
  ["job.state", { job_id: "job_1", name: "build", kind: "code", from, to, cause, ...more }] as [
    "job.state",
    Partial<RecordInput<"job.state">>,
  ];

Deno.test("`deriveUnattended()` follows each timer and job through its records", () => {
  const view = deriveUnattended(records(
    ["timer.set", { timer_id: "tm_1", due_at: 5, note: "nap", wait: true }],
    ["timer.set", { timer_id: "tm_2", due_at: 9, note: "later", wait: false }],
    job(null, "pending", "started by cell cell_1"),
    ["timer.fired", { timer_id: "tm_1", input_id: "in_1" }],
    job("pending", "running", "a job slot was free", { tokens_used: 0 }),
    ["timer.cancelled", { timer_id: "tm_2", cause: "cancelled by a cell" }],
    job("running", "over_budget", "job tokens: 2468 of 2000 used", {
      tokens_used: 2468,
      requests_used: 2,
    }),
    ["timer.fired", { timer_id: "tm_unknown" }],
  ));
  assert.deepEqual(view.timers.map((t) => [t.timerId, t.state, t.wait, t.cause]), [
    ["tm_2", "cancelled", false, "cancelled by a cell"],
    ["tm_1", "fired", true, "fired"],
  ]);
  const [only] = view.jobs;
  assert.deepEqual([only.name, only.state, only.cause, only.tokensUsed, only.requestsUsed], [
    "build",
    "over_budget",
    "job tokens: 2468 of 2000 used",
    2468,
    2,
  ]);
  assert.deepEqual(only.moves.map((m) => m.to), ["pending", "running", "over_budget"]);
});

Deno.test("`deriveUnattended()` skips a record whose body does not read", () => {
  const view = deriveUnattended([{
    kind: "record",
    session: "default",
    seq: 1,
    at: 1,
    type: "job.state",
    data: { job_id: "job_1", to: "running" },
  }]);
  assert.deepEqual(view.jobs, []);
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

Deno.test("the events lane names timer, job and budget records in words", () => {
  const [moved] = records(job("running", "over_budget", "job tokens: 2468 of 2000 used"));
  assert.deepEqual(titleOf(moved), {
    title: "Job build: running → over_budget",
    detail: "job tokens: 2468 of 2000 used",
    severity: "warning",
  });
  const [spent] = records(["budget.exhausted", { until: "2025-01-15T10:12:03.000Z" }]);
  assert.deepEqual(titleOf(spent), {
    title: "Budget spent: tokens_per_hour",
    detail: "1234 of 1000; frees at 2025-01-15T10:12:03.000Z · llm() and child agents are refused",
    severity: "warning",
  });
  // An hourly limit says how the operator lifts it.
  const lift = "deno task klbr budget default --reset lifts it now";
  const [liftable] = records(["budget.exhausted", { until: "2025-01-15T10:12:03.000Z", lift }]);
  assert.equal(
    titleOf(liftable).detail,
    `1234 of 1000; frees at 2025-01-15T10:12:03.000Z · llm() and child agents are refused · ${lift}`,
  );
});
