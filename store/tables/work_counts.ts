/**
 * Counts of the work the daemon holds — pending inputs, pending and running jobs, pending
 * timers — and of the inputs waiting too long, for `status` and `/health`. They are counted when
 * asked, from the partial indexes of open work (`inputs_pending`, `jobs_open`, `timers_due`), so
 * a read costs what is open, never what the log holds: about 0.5 ms for 20,000 pending inputs
 * here, nothing for consumed ones. Counters kept by triggers on every write answered in O(1)
 * once, and were deleted: `/health` under row 1m's flood of 20,000 pending inputs stayed within
 * its goal without them, and admission no longer paid for them (`docs/performance.md`,
 * "Mechanisms kept, and the row that needs each").
 *
 * Proven by "work counts follow admission, frames, expiry, jobs and timers, and roll back with
 * their transaction" in `tests/store/work_counts.test.ts`.
 *
 * @module
 */

import type { Store } from "../store.ts";
import { fromRow } from "./_rows.ts";

/** The counts `status` and `/health` report for one session. */
export interface WorkCounts {
  pendingInputs: number;
  pendingJobs: number;
  runningJobs: number;
  pendingTimers: number;
}

/**
 * The counts of `session`, or (omitted) summed over every session. Each count reads an index of
 * open work only.
 *
 * @example
 * ```ts
 * const { pendingInputs } = workCounts(store, "default");
 * ```
 */
export function workCounts(store: Store, session?: string): WorkCounts {
  const row = session === undefined
    ? store.statement(countsSql("")).get()
    : store.statement(countsSql("AND session_id = ?1")).get(session);
  return fromRow<WorkCounts>(row!);
}

/** The four counts in one statement, each over its partial index, narrowed by `where`. */
function countsSql(where: string): string {
  return `SELECT
    (SELECT count(*) FROM inputs WHERE status = 'pending' ${where}) AS pending_inputs,
    (SELECT count(*) FROM jobs WHERE state = 'pending' ${where}) AS pending_jobs,
    (SELECT count(*) FROM jobs WHERE state = 'running' ${where}) AS running_jobs,
    (SELECT count(*) FROM timers WHERE state = 'pending' ${where}) AS pending_timers`;
}

/** When the oldest pending input of `session` was admitted (ms), or null: one index probe. */
export function oldestPendingAt(store: Store, session: string): number | null {
  const row = store.statement(
    `SELECT admitted_at FROM inputs WHERE session_id = ? AND status = 'pending'
     ORDER BY admitted_seq LIMIT 1`,
  ).get(session) as { admitted_at: number } | undefined;
  return row?.admitted_at ?? null;
}

/**
 * How many inputs of `session` are pending and were admitted before `now - warnMs`, and the
 * last `admitted_seq` among them (the mark): a caller lists them by seq up to it. They are the
 * oldest pending inputs, up to the first that has not crossed the threshold, so a read walks
 * only those that waited too long. Admission times follow the sequence (the store's clock); an
 * input stamped earlier than one admitted before it (a clock set back) is counted once the
 * inputs before it have crossed.
 */
export function waitingInputs(
  store: Store,
  session: string,
  now: number,
  warnMs: number,
): { count: number; markSeq: number } {
  const stop = store.statement(
    `SELECT admitted_seq FROM inputs WHERE session_id = ? AND status = 'pending'
     AND admitted_at >= ? ORDER BY admitted_seq LIMIT 1`,
  ).get(session, now - warnMs) as { admitted_seq: number } | undefined;
  const crossed = store.statement(
    `SELECT count(*) AS n, max(admitted_seq) AS last FROM inputs
     WHERE session_id = ? AND status = 'pending' AND admitted_seq < ?`,
  ).get(session, stop?.admitted_seq ?? Number.MAX_SAFE_INTEGER) as {
    n: number;
    last: number | null;
  };
  return { count: crossed.n, markSeq: crossed.last ?? 0 };
}
