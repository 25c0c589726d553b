/**
 * Timers and jobs as the jobs panel shows them, derived from the durable records: a timer from
 * its `timer.set` record, moved by `timer.fired` or `timer.cancelled`; a job from its
 * `job.state` records, each move with its cause.
 *
 * @module
 */

import type { LaneRecord } from "../../runtime/core/mod.ts";
import { num, text } from "./_fields.ts";

/** A badge tone of `state_badge.tsx` (named here so this module stays free of JSX). */
export type BadgeTone = "pending" | "progress" | "ok" | "error" | "warning" | "partial" | "info";

/** One durable timer. */
export interface TimerItem {
  timerId: string;
  note: string;
  dueAt: number | undefined;
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

function applyTimer(timers: Map<string, TimerItem>, record: LaneRecord): void {
  const d = record.data;
  const id = text(d, "timer_id");
  if (id === undefined) return;
  if (record.type === "timer.set") {
    timers.set(id, {
      timerId: id,
      note: text(d, "note") ?? "",
      dueAt: num(d, "due_at"),
      state: "pending",
      wait: d.wait === true,
      cause: undefined,
      setBy: text(d, "cell_id", "job_id"),
    });
    return;
  }
  const timer = timers.get(id);
  if (timer === undefined) return;
  timer.state = record.type === "timer.fired" ? "fired" : "cancelled";
  timer.cause = text(d, "cause") ?? (record.type === "timer.fired" ? "fired" : undefined);
}

function applyJob(jobs: Map<string, JobItem>, record: LaneRecord): void {
  const d = record.data;
  const id = text(d, "job_id");
  const to = text(d, "to");
  if (id === undefined || to === undefined) return;
  const job = jobs.get(id) ?? {
    jobId: id,
    name: text(d, "name") ?? id,
    kind: text(d, "kind") ?? "code",
    state: to,
    cause: "",
    tokensUsed: undefined,
    requestsUsed: undefined,
    moves: [],
  };
  const cause = text(d, "cause") ?? "";
  job.state = to;
  job.cause = cause;
  job.tokensUsed = num(d, "tokens_used") ?? job.tokensUsed;
  job.requestsUsed = num(d, "requests_used") ?? job.requestsUsed;
  job.moves.push({ seq: record.seq, at: record.at, to, cause });
  jobs.set(id, job);
}

/**
 * Builds the panel's view from records in `seq` order.
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
    if (record.type.startsWith("timer.")) applyTimer(timers, record);
    else if (record.type === "job.state") applyJob(jobs, record);
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
