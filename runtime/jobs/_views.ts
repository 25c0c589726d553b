/**
 * How timers and jobs are shown to a cell, the operator and the UI: plain JSON with ids, states,
 * causes, times as ISO text and the causation.
 *
 * @module
 */

import type { JobRecord } from "../../store/tables/jobs.ts";
import type { TimerRecord } from "../../store/tables/timers.ts";

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

/** A timer as JSON. */
export function timerView(timer: TimerRecord) {
  return {
    timer_id: timer.id,
    state: timer.state,
    note: timer.note,
    due_at: timer.dueAt,
    due: iso(timer.dueAt),
    wait: timer.wait,
    cause: timer.cause,
    cell_id: timer.cellId,
    frame_id: timer.frameId,
    job_id: timer.jobId,
    input_id: timer.inputId,
    created: iso(timer.createdAt),
  };
}

/** A job as JSON; `withResult` adds what it ended with (value, output, error). */
export function jobView(job: JobRecord, withResult = false) {
  return {
    job_id: job.id,
    name: job.name,
    kind: job.kind,
    state: job.state,
    cause: job.cause,
    budget: job.budget,
    requests_used: job.requestsUsed,
    tokens_used: job.tokensUsed,
    release_id: job.releaseId,
    cell_id: job.cellId,
    frame_id: job.frameId,
    parent_job_id: job.parentJobId,
    pid: job.pid,
    input_id: job.inputId,
    created: iso(job.createdAt),
    started: iso(job.startedAt),
    ended: iso(job.endedAt),
    ...(withResult ? { result: job.result } : {}),
  };
}
