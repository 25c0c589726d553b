/**
 * The record bodies of unattended work (`docs/jobs.md`): timers, jobs, child model calls,
 * spent budgets and maintenance runs. Part of the one record union of `_records.ts`.
 *
 * @module
 */

import * as z from "zod";

/** Every state of a job, in the order a job may reach them. */
export const JOB_STATES = [
  "pending",
  "running",
  "done",
  "failed",
  "cancelled",
  "interrupted",
  "over_budget",
] as const;

const int = z.number().int();
const nullableId = z.string().nullable();

/** A job's limits: wall time, model requests and tokens. */
const jobBudget = z.looseObject({
  wall_time_ms: int.positive(),
  model_requests: int.nonnegative(),
  tokens: int.nonnegative(),
});

/** The `data` schema of each record type of unattended work. */
export const UNATTENDED_DATA = {
  "timer.set": z.looseObject({
    timer_id: z.string(),
    /** When it fires, in ms since the epoch. */
    due_at: int,
    note: z.string(),
    /** Whether `wait(seconds=…)` set it. */
    wait: z.boolean(),
    frame_id: nullableId,
    cell_id: nullableId,
    job_id: nullableId,
  }),
  "timer.fired": z.looseObject({
    timer_id: z.string(),
    /** The `timer` input its firing admitted, in the same transaction. */
    input_id: z.string(),
    due_at: int,
    note: z.string(),
  }),
  "timer.cancelled": z.looseObject({ timer_id: z.string(), cause: z.string() }),
  "job.state": z.looseObject({
    job_id: z.string(),
    name: z.string(),
    kind: z.enum(["code", "agent"]),
    /** The state it left (`null` for the first record, when it was started). */
    from: z.enum(JOB_STATES).nullable(),
    to: z.enum(JOB_STATES),
    cause: z.string(),
    /** What it ended with, on an ending: value, output, error. */
    result: z.record(z.string(), z.unknown()).optional(),
    requests_used: int.nonnegative().optional(),
    tokens_used: int.nonnegative().optional(),
    /** On the first record: what started it and what it is pinned to. */
    frame_id: nullableId.optional(),
    cell_id: nullableId.optional(),
    parent_job_id: nullableId.optional(),
    release_id: z.string().optional(),
    budget: jobBudget.optional(),
  }),
  "job.queued": z.looseObject({ job_id: z.string(), reason: z.string() }),
  "job.cell": z.looseObject({
    job_id: z.string(),
    /** The child agent's step that ran it. */
    step: int.positive(),
    code: z.string(),
    outcome: z.string(),
    stdout: z.string(),
    error: z.string().nullable(),
  }),
  "model_call": z.looseObject({
    call_id: z.string(),
    kind: z.enum(["llm", "agent"]),
    route: z.string(),
    state: z.enum(["done", "failed"]),
    frame_id: nullableId,
    cell_id: nullableId,
    job_id: nullableId,
    prompt_tokens: int.nonnegative().nullable(),
    completion_tokens: int.nonnegative().nullable(),
    error: z.string().optional(),
  }),
  "budget.exhausted": z.looseObject({
    /** The spent limit, e.g. `tokens_per_hour` or `concurrent_processes`. */
    what: z.string(),
    limit: z.number().nonnegative(),
    used: z.number().nonnegative(),
    /** When it frees (ISO 8601), or `null` for a limit that frees only when work ends. */
    until: z.string().nullable(),
    /** What waits or is refused meanwhile, in words. */
    effect: z.string(),
    /** How the operator lifts it now, for an hourly limit (`klbr budget <session> --reset`). */
    lift: z.string().optional(),
  }),
  "maintenance.started": z.looseObject({
    run_id: z.string(),
    trigger: z.string(),
    policy: z.record(z.string(), z.unknown()),
    /** The draft ids and release ids it is about to remove. */
    drafts: z.array(z.string()),
    releases: z.array(z.string()),
  }),
  "maintenance.finished": z.looseObject({ run_id: z.string(), errors: z.array(z.string()) }),
} as const;
