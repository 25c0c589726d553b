/**
 * Timers and jobs as the jobs panel shows them, derived from the durable records (read through
 * the shared schemas): a timer from its `timer.set` record, moved by `timer.fired` or
 * `timer.cancelled`; a job from its `job.state` records, each move with its cause. Also the
 * events lane's titles of these records.
 *
 * @module
 */

import { type KnownRecord, type LaneRecord, readRecord } from "../../runtime/core/mod.ts";
import type { EventTitle } from "./event_titles.ts";

/** A badge tone of `state_badge.tsx` (named here so this module stays free of JSX). */
export type BadgeTone = "pending" | "progress" | "ok" | "error" | "warning" | "partial" | "info";

/** One durable timer. */
export interface TimerItem {
  timerId: string;
  note: string;
  dueAt: number;
  /** `pending`, `fired` or `cancelled`. */
  state: string;
  /** Whether `wait(seconds=…)` set it. */
  wait: boolean;
  cause: string | undefined;
  setBy: string | undefined;
}

/** One job with its moves. */
export interface JobItem {
  jobId: string;
  name: string;
  kind: string;
  state: string;
  cause: string;
  tokensUsed: number | undefined;
  requestsUsed: number | undefined;
  moves: { seq: number; at: number; to: string; cause: string }[];
}

/** Every timer and job the records tell of, newest first. */
export interface UnattendedView {
  timers: TimerItem[];
  jobs: JobItem[];
}

const ENDED = new Set(["done", "failed", "cancelled", "interrupted", "over_budget"]);

/** Whether the operator may still cancel a job in `state`. */
export function cancellable(state: string): boolean {
  return !ENDED.has(state);
}

type TimerRecord = Extract<KnownRecord, { type: `timer.${string}` }>;
type JobStateRecord = Extract<KnownRecord, { type: "job.state" }>;

function applyTimer(timers: Map<string, TimerItem>, record: TimerRecord): void {
  if (record.type === "timer.set") {
    const data = record.data;
    timers.set(data.timer_id, {
      timerId: data.timer_id,
      note: data.note,
      dueAt: data.due_at,
      state: "pending",
      wait: data.wait,
      cause: undefined,
      setBy: data.cell_id ?? data.job_id ?? undefined,
    });
    return;
  }
  const timer = timers.get(record.data.timer_id);
  if (timer === undefined) return;
  timer.state = record.type === "timer.fired" ? "fired" : "cancelled";
  timer.cause = record.type === "timer.cancelled" ? record.data.cause : "fired";
}

function applyJob(
  jobs: Map<string, JobItem>,
  record: JobStateRecord,
  at: { seq: number; at: number },
) {
  const d = record.data;
  const job = jobs.get(d.job_id) ?? {
    jobId: d.job_id,
    name: d.name,
    kind: d.kind,
    state: d.to,
    cause: "",
    tokensUsed: undefined,
    requestsUsed: undefined,
    moves: [],
  };
  job.state = d.to;
  job.cause = d.cause;
  job.tokensUsed = d.tokens_used ?? job.tokensUsed;
  job.requestsUsed = d.requests_used ?? job.requestsUsed;
  job.moves.push({ seq: at.seq, at: at.at, to: d.to, cause: d.cause });
  jobs.set(d.job_id, job);
}

/**
 * Builds the panel's view from records in `seq` order; a record that does not read is skipped
 * here (the events lane shows it as unknown).
 *
 * @example
 * ```ts
 * const { timers, jobs } = deriveUnattended(client.log.records());
 * ```
 */
export function deriveUnattended(records: readonly LaneRecord[]): UnattendedView {
  const timers = new Map<string, TimerItem>();
  const jobs = new Map<string, JobItem>();
  for (const record of records) {
    if (!record.type.startsWith("timer.") && record.type !== "job.state") continue;
    const read = readRecord(record.type, record.data);
    if (!read.ok) continue;
    const known = read.record;
    if (known.type === "job.state") applyJob(jobs, known, record);
    else if (known.type.startsWith("timer.")) applyTimer(timers, known as TimerRecord);
  }
  return { timers: [...timers.values()].reverse(), jobs: [...jobs.values()].reverse() };
}

/**
 * The badge of a timer or job state, in words and with its symbol; never colour alone.
 *
 * @example
 * ```ts
 * stateBadge("over_budget"); // { tone: "warning", label: "over budget" }
 * ```
 */
export function stateBadge(state: string): { tone: BadgeTone; label: string } {
  switch (state) {
    case "pending":
      return { tone: "pending", label: "pending" };
    case "running":
      return { tone: "progress", label: "running" };
    case "done":
    case "fired":
      return { tone: "ok", label: state };
    case "failed":
      return { tone: "error", label: "failed" };
    case "over_budget":
      return { tone: "warning", label: "over budget" };
    case "interrupted":
      return { tone: "partial", label: "interrupted · not re-run" };
    case "cancelled":
      return { tone: "info", label: "cancelled" };
    default:
      return { tone: "info", label: state };
  }
}

/**
 * The events lane's words for a record of unattended work, or `undefined` for any other.
 *
 * @example
 * ```ts
 * unattendedTitle(record)?.title; // "Job tests: running → done"
 * ```
 */
export function unattendedTitle(record: KnownRecord): EventTitle | undefined {
  switch (record.type) {
    case "timer.set":
      return {
        title: `Timer set for ${new Date(record.data.due_at).toISOString()}`,
        detail: record.data.note,
        severity: "info",
      };
    case "timer.fired":
      return { title: "Timer fired", detail: record.data.note, severity: "info" };
    case "timer.cancelled":
      return { title: "Timer cancelled", detail: record.data.cause, severity: "info" };
    case "job.state": {
      const d = record.data;
      const bad = d.to === "failed" || d.to === "over_budget" || d.to === "interrupted";
      return {
        title: `Job ${d.name}: ${d.from ?? "started"} → ${d.to}`,
        detail: d.cause,
        severity: d.to === "failed" ? "error" : bad ? "warning" : "info",
      };
    }
    case "job.queued":
      return { title: "Job waits for a slot", detail: record.data.reason, severity: "info" };
    case "budget.exhausted":
      return {
        title: `Budget spent: ${record.data.what}`,
        detail: `${record.data.used} of ${record.data.limit}${
          record.data.until === null ? "" : `; frees at ${record.data.until}`
        } · ${record.data.effect}${record.data.lift === undefined ? "" : ` · ${record.data.lift}`}`,
        severity: "warning",
      };
    default:
      return undefined;
  }
}
