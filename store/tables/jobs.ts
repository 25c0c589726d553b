/**
 * The `jobs` table: background work a cell started (`jobs.start`, `agent`). This module is the
 * table's only writer.
 *
 * A job moves `pending` → `running` → `done` | `failed` | `cancelled` | `interrupted` |
 * `over_budget` (a pending job may also end without running). Every move is committed together
 * with its `job.state` event, which carries the cause. A finished job gains its completion input
 * once, in the transaction that admits that input; a job whose input could not be admitted yet is
 * found by {@linkcode unannouncedJobs}. Each row names the cell, frame and parent job that started
 * it, and pins the release and the workspace it runs with.
 *
 * @module
 */

import { z } from "zod";
import { assert, JOB_STATES, KlbrError, newId } from "../../runtime/core/mod.ts";
import { schemaError } from "../schema/_schema_error.ts";
import { fromRow, jsonColumn, type Row } from "./_rows.ts";
import { recordEffect } from "./effects.ts";
import { insertEvent } from "./events.ts";
import { requireSession } from "./sessions.ts";
import type { Store } from "../store.ts";

/** One of `JOB_STATES` (`runtime/core/_records_jobs.ts`): a job's state. */
export type JobState = (typeof JOB_STATES)[number];

/** The states a job ends in. */
export type JobEnd = Exclude<JobState, "pending" | "running">;

/** A job's limits: wall time, model requests and tokens. */
export const JobBudget = z.strictObject({
  wall_time_ms: z.number().int().positive(),
  model_requests: z.number().int().nonnegative(),
  tokens: z.number().int().nonnegative(),
});

/** One job's limits. */
export type JobBudget = z.infer<typeof JobBudget>;

const CreateJobSchema = z.strictObject({
  session: z.string(),
  kind: z.enum(["code", "agent"]),
  name: z.string().min(1).max(200),
  /** The code a `code` job runs, or the task of an `agent` job. */
  code: z.string().min(1).max(1 << 20),
  route: z.string().min(1).max(64).nullable().default(null),
  budget: JobBudget,
  releaseId: z.string().regex(/^[0-9a-f]{64}$/, "is not a release id"),
  workspace: z.string().min(1),
  conversation: z.string().min(1).max(512),
  frameId: z.string().nullable().default(null),
  cellId: z.string().nullable().default(null),
  parentJobId: z.string().nullable().default(null),
  /**
   * The cell of child agent `parentJobId` that started it, which has no `cells` row: the job is
   * among that cell's effects all the same.
   */
  childCellId: z.string().nullable().default(null),
  cause: z.string().min(1).max(500),
});

/** What {@linkcode createJob} takes. */
export type CreateJob = z.input<typeof CreateJobSchema>;

/** One job row. */
export interface JobRecord {
  id: string;
  session: string;
  kind: "code" | "agent";
  name: string;
  code: string;
  route: string | null;
  budget: JobBudget;
  releaseId: string;
  workspace: string;
  conversation: string;
  frameId: string | null;
  cellId: string | null;
  parentJobId: string | null;
  state: JobState;
  /** Why it is in its state: the cause of its last move. */
  cause: string;
  /** The pid (= process group) of its workbench while it runs. */
  pid: number | null;
  requestsUsed: number;
  tokensUsed: number;
  /** What it ended with: value, output, error; null until it ends. */
  result: Record<string, unknown> | null;
  /** The completion input that woke the agent. */
  inputId: string | null;
  createdAt: number;
  startedAt: number | null;
  endedAt: number | null;
}

function toRecord(row: Row): JobRecord {
  return fromRow<JobRecord>(row, {
    budget: jsonColumn(row.budget),
    result: jsonColumn(row.result),
  });
}

/** Whether a job in `state` has ended. */
export function isJobEnded(state: JobState): state is JobEnd {
  return state !== "pending" && state !== "running";
}

/**
 * Writes a `pending` job and its first `job.state` event in one transaction.
 *
 * Started by a cell (or a child agent's cell), it is also among that cell's effects (kind `job`, or
 * `agent`).
 *
 * When it returns the job is committed with its identity, budget and pins; it has not run.
 * Proven by "`createJob()` commits a pending job with its pins and its cause" in
 * `tests/store/jobs.test.ts`.
 *
 * @throws {KlbrError} `invalid_input` when a field fails its schema; `not_found` for an unknown
 *   session.
 */
export function createJob(store: Store, request: CreateJob): JobRecord {
  const parsed = CreateJobSchema.safeParse(request);
  if (!parsed.success) throw schemaError("start job", parsed.error, request);
  const j = parsed.data;
  return store.transaction(() => {
    requireSession(store, j.session);
    const now = store.clock();
    const id = newId("job", now);
    store.statement(
      `INSERT INTO jobs (id, session_id, kind, name, code, route, budget, release_id, workspace,
         conversation, frame_id, cell_id, parent_job_id, state, cause, created_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?)`,
    ).run(
      id,
      j.session,
      j.kind,
      j.name,
      j.code,
      j.route,
      JSON.stringify(j.budget),
      j.releaseId,
      j.workspace,
      j.conversation,
      j.frameId,
      j.cellId,
      j.parentJobId,
      j.cause,
      now,
    );
    insertEvent(store, j.session, "job.state", {
      job_id: id,
      name: j.name,
      kind: j.kind,
      from: null,
      to: "pending",
      cause: j.cause,
      frame_id: j.frameId,
      cell_id: j.cellId,
      parent_job_id: j.parentJobId,
      release_id: j.releaseId,
      budget: j.budget,
    });
    // A cell's job is among its effects: its result names it, a re-run knows it was started.
    const cellId = j.cellId ?? j.childCellId;
    if (cellId !== null) {
      recordEffect(store, {
        session: j.session,
        cellId,
        kind: j.kind === "agent" ? "agent" : "job",
        refId: id,
        summary: `${j.name ?? "(no name)"}: ${
          j.code.length > 200 ? `${j.code.slice(0, 200)}…` : j.code
        }`,
      });
    }
    return getJob(store, id)!;
  });
}

/** Returns the job `id`, or `undefined` when there is none. */
export function getJob(store: Store, id: string): JobRecord | undefined {
  const row = store.statement("SELECT * FROM jobs WHERE id = ?").get(id);
  return row && toRecord(row);
}

/** What a move of {@linkcode moveJob} writes besides the state. */
export interface JobMove {
  to: Exclude<JobState, "pending">;
  cause: string;
  /** For an ending: what the job ended with. */
  result?: Record<string, unknown>;
}

/**
 * Moves a job to `to` with its cause and appends `job.state`, in one transaction (a savepoint of
 * the caller's, when one is open). `running` sets `started_at`; an ending sets `ended_at` and
 * the result and clears the pid. Returns the job as it now is.
 *
 * When it returns the move is committed. Proven by "`moveJob()` commits each move with its
 * cause and refuses to move a finished job".
 *
 * @throws {KlbrError} `not_found` for an unknown job; `invalid_input` for a move that does not go
 *   forward (a finished job, or running back to running).
 */
export function moveJob(store: Store, id: string, move: JobMove): JobRecord {
  return store.transaction(() => {
    const job = getJob(store, id);
    if (job === undefined) {
      throw new KlbrError("not_found", `cannot move job: no job ${id} (got ${JSON.stringify(id)})`);
    }
    if (isJobEnded(job.state) || job.state === move.to) {
      throw new KlbrError(
        "invalid_input",
        `cannot move job ${id} to ${move.to}: it is ${job.state} (got ${move.to})`,
      );
    }
    const now = store.clock();
    const cause = move.cause.slice(0, 500);
    if (move.to === "running") {
      store.statement("UPDATE jobs SET state = 'running', cause = ?, started_at = ? WHERE id = ?")
        .run(cause, now, id);
    } else {
      store.statement(
        "UPDATE jobs SET state = ?, cause = ?, result = ?, ended_at = ?, pid = NULL WHERE id = ?",
      ).run(move.to, cause, JSON.stringify(move.result ?? {}), now, id);
    }
    insertEvent(store, job.session, "job.state", {
      job_id: id,
      name: job.name,
      kind: job.kind,
      from: job.state,
      to: move.to,
      cause,
      ...(move.result === undefined ? {} : { result: move.result }),
      requests_used: job.requestsUsed,
      tokens_used: job.tokensUsed,
    });
    return getJob(store, id)!;
  });
}

/**
 * Records the completion input of a finished job; for the admission transaction that admitted
 * it, so the input and the announcement commit together.
 *
 * @throws {KlbrError} `invalid_input` when the job has not ended or was announced already.
 */
export function announceJob(store: Store, id: string, inputId: string): void {
  assert(store.inTransaction, "a job is announced inside its admission's transaction");
  const changed = store.statement(
    "UPDATE jobs SET input_id = ? WHERE id = ? AND ended_at IS NOT NULL AND input_id IS NULL",
  ).run(inputId, id).changes;
  if (changed !== 1) {
    throw new KlbrError(
      "invalid_input",
      `cannot announce job ${id}: it has not ended or was announced already (got ${inputId})`,
    );
  }
}

/** Records the pid of a running job's workbench. */
export function setJobPid(store: Store, id: string, pid: number): void {
  store.statement("UPDATE jobs SET pid = ? WHERE id = ? AND state = 'running'").run(pid, id);
}

/**
 * Adds one model request's usage to each of `ids` that has not ended (a job and its parents);
 * returns the jobs as they now are, in the same order (an ended one unchanged).
 */
export function drawJobUsage(
  store: Store,
  ids: readonly string[],
  usage: { requests: number; tokens: number },
): JobRecord[] {
  return store.transaction(() =>
    ids.map((id) => {
      store.statement(
        `UPDATE jobs SET requests_used = requests_used + ?, tokens_used = tokens_used + ?
         WHERE id = ? AND ended_at IS NULL`,
      ).run(usage.requests, usage.tokens, id);
      return getJob(store, id)!;
    })
  );
}

/** Jobs not yet ended (every session when `session` is omitted), oldest first. */
export function openJobs(store: Store, session?: string): JobRecord[] {
  return store.statement(
    `SELECT * FROM jobs WHERE state IN ('pending', 'running') AND (? IS NULL OR session_id = ?)
     ORDER BY created_at, id`,
  ).all(session ?? null, session ?? null).map(toRecord);
}

/** Ended jobs of `session` whose completion input has not been admitted yet, oldest first. */
export function unannouncedJobs(store: Store, session: string): JobRecord[] {
  return store.statement(
    `SELECT * FROM jobs WHERE session_id = ? AND ended_at IS NOT NULL AND input_id IS NULL
     ORDER BY ended_at, id`,
  ).all(session).map(toRecord);
}

/** A session's jobs, newest first, at most `limit` (1–1000, default 50). */
export function listJobs(store: Store, session: string, limit = 50): JobRecord[] {
  return store.statement(
    "SELECT * FROM jobs WHERE session_id = ? ORDER BY created_at DESC, id DESC LIMIT ?",
  ).all(session, Math.min(Math.max(Math.trunc(limit), 1), 1000)).map(toRecord);
}

/** The open child jobs of `parentJobId`. */
export function openChildJobs(store: Store, parentJobId: string): JobRecord[] {
  return store.statement(
    `SELECT * FROM jobs WHERE parent_job_id = ? AND state IN ('pending', 'running')
     ORDER BY created_at, id`,
  ).all(parentJobId).map(toRecord);
}

/** The releases the jobs that have not ended are pinned to. */
export function releasesPinnedByJobs(store: Store): string[] {
  const rows = store.statement(
    "SELECT DISTINCT release_id FROM jobs WHERE state IN ('pending', 'running')",
  ).all() as { release_id: string }[];
  return rows.map((row) => row.release_id);
}
