/**
 * The `model_calls` table: every model request the daemon makes — the agent's turns, `llm()`
 * calls and the steps of child agents — with its causation (frame, cell, job) and the tokens it
 * used. This module is the table's only writer, and the only writer of the `klbr_meta` row
 * that records the operator's last budget reset.
 *
 * A call is written `requested` before the request leaves and finished `done` or `failed` after,
 * so a request is counted against the budgets even when its answer is lost; at restart a call
 * left `requested` is finished `failed`. The hourly budgets are read from here, so they survive
 * restarts.
 *
 * @module
 */

import { z } from "zod";
import { KlbrError, newId } from "../../runtime/core/mod.ts";
import { schemaError } from "../schema/_schema_error.ts";
import { insertEvent } from "./events.ts";
import { requireSession } from "./sessions.ts";
import type { Store } from "../store.ts";
import { fromRow, jsonColumn, type Row } from "./_rows.ts";

/** What asked for a model call. */
export const MODEL_CALL_KINDS = ["turn", "llm", "agent"] as const;

const StartCallSchema = z.strictObject({
  session: z.string(),
  kind: z.enum(MODEL_CALL_KINDS),
  route: z.string().min(1).max(64),
  frameId: z.string().nullable().default(null),
  cellId: z.string().nullable().default(null),
  jobId: z.string().nullable().default(null),
  /** What was asked: the prompt of an `llm()` call, a summary of a turn's request. */
  request: z.record(z.string(), z.unknown()),
});

/** What {@linkcode startModelCall} takes. */
export type StartModelCall = z.input<typeof StartCallSchema>;

/** One model call row. */
export interface ModelCallRecord {
  id: string;
  session: string;
  kind: (typeof MODEL_CALL_KINDS)[number];
  route: string;
  frameId: string | null;
  cellId: string | null;
  jobId: string | null;
  request: Record<string, unknown>;
  state: "requested" | "done" | "failed";
  response: Record<string, unknown> | null;
  error: string | null;
  promptTokens: number | null;
  completionTokens: number | null;
  createdAt: number;
  endedAt: number | null;
}

function toRecord(row: Row): ModelCallRecord {
  return fromRow<ModelCallRecord>(row, {
    request: jsonColumn(row.request),
    response: jsonColumn(row.response),
  });
}

/**
 * Records a model call as `requested`, before its request is sent; returns its id.
 *
 * When it returns the call is committed and counts against the hourly request budget. Proven by
 * "`startModelCall()` and `finishModelCall()` record a call with its causation and usage" in
 * `tests/store/model_calls.test.ts`.
 *
 * @throws {KlbrError} `invalid_input` when a field fails its schema; `not_found` for an unknown
 *   session.
 */
export function startModelCall(store: Store, request: StartModelCall): string {
  const parsed = StartCallSchema.safeParse(request);
  if (!parsed.success) throw schemaError("record model call", parsed.error, request);
  const c = parsed.data;
  return store.transaction(() => {
    requireSession(store, c.session);
    const now = store.clock();
    const id = newId("model_call", now);
    store.statement(
      `INSERT INTO model_calls (id, session_id, kind, route, frame_id, cell_id, job_id, request,
         state, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'requested', ?)`,
    ).run(
      id,
      c.session,
      c.kind,
      c.route,
      c.frameId,
      c.cellId,
      c.jobId,
      JSON.stringify(c.request),
      now,
    );
    return id;
  });
}

/** How a model call ended. */
export interface ModelCallEnd {
  state: "done" | "failed";
  response?: Record<string, unknown>;
  error?: string;
  promptTokens?: number;
  completionTokens?: number;
}

/**
 * Finishes a requested call with its response or error and its usage; a child call (`llm`,
 * `agent`) also appends a `model_call` event. Returns the call as it now is.
 *
 * When it returns the usage is committed and counts against the budgets.
 *
 * @throws {KlbrError} `not_found` for an unknown call; `invalid_input` for one already finished.
 */
export function finishModelCall(store: Store, id: string, end: ModelCallEnd): ModelCallRecord {
  return store.transaction(() => {
    const call = getModelCall(store, id);
    if (call === undefined) {
      throw new KlbrError("not_found", `cannot finish model call: no call ${id} (got ${id})`);
    }
    if (call.state !== "requested") {
      throw new KlbrError(
        "invalid_input",
        `cannot finish model call ${id}: it already ended (got ${call.state})`,
      );
    }
    store.statement(
      `UPDATE model_calls SET state = ?, response = ?, error = ?, prompt_tokens = ?,
         completion_tokens = ?, ended_at = ? WHERE id = ?`,
    ).run(
      end.state,
      end.response === undefined ? null : JSON.stringify(end.response),
      end.error?.slice(0, 2000) ?? null,
      end.promptTokens ?? null,
      end.completionTokens ?? null,
      store.clock(),
      id,
    );
    const done = getModelCall(store, id)!;
    if (call.kind !== "turn") {
      insertEvent(store, call.session, "model_call", {
        call_id: id,
        kind: call.kind,
        route: call.route,
        state: end.state,
        frame_id: call.frameId,
        cell_id: call.cellId,
        job_id: call.jobId,
        prompt_tokens: done.promptTokens,
        completion_tokens: done.completionTokens,
        ...(end.error === undefined ? {} : { error: end.error.slice(0, 500) }),
      });
    }
    return done;
  });
}

/** Returns the call `id`, or `undefined` when there is none. */
export function getModelCall(store: Store, id: string): ModelCallRecord | undefined {
  const row = store.statement("SELECT * FROM model_calls WHERE id = ?").get(id);
  return row ? toRecord(row) : undefined;
}

/**
 * Finishes every call of `session` left `requested` as `failed` with `reason`; returns their
 * ids. Run at start-up: their answers were lost with the process that asked.
 */
export function failOpenModelCalls(store: Store, session: string, reason: string): string[] {
  return store.transaction(() => {
    const ids = (store.statement(
      "SELECT id FROM model_calls WHERE session_id = ? AND state = 'requested' ORDER BY id",
    ).all(session) as { id: string }[]).map((row) => row.id);
    for (const id of ids) finishModelCall(store, id, { state: "failed", error: reason });
    return ids;
  });
}

/** Which model calls a budget counts: every call, or only child calls (`llm`, `agent`). */
export type UsageScope = "all" | "children";

const SCOPE_SQL: Record<UsageScope, string> = { all: "", children: " AND kind <> 'turn'" };

/**
 * Every model call of every session made at or after `since` (ms), oldest first, as the
 * budgets count them: when it was made and the tokens it used (0 while unknown). `scope`
 * `children` counts only `llm` and `agent` calls.
 */
export function modelUsageSince(
  store: Store,
  since: number,
  scope: UsageScope = "all",
): { at: number; tokens: number }[] {
  const rows = store.statement(
    `SELECT created_at AS at, coalesce(prompt_tokens, 0) + coalesce(completion_tokens, 0) AS tokens
     FROM model_calls WHERE created_at >= ?${SCOPE_SQL[scope]} ORDER BY created_at, id`,
  ).all(since) as { at: number; tokens: number }[];
  return rows.map((row) => ({ at: row.at, tokens: row.tokens }));
}

/**
 * How many model calls of every session were made at or after `since` (ms), and the tokens
 * they used: {@linkcode modelUsageSince} summed, without reading each call.
 */
export function modelUsageTotalsSince(
  store: Store,
  since: number,
  scope: UsageScope = "all",
): { requests: number; tokens: number } {
  const row = store.statement(
    `SELECT count(*) AS requests,
       coalesce(sum(coalesce(prompt_tokens, 0) + coalesce(completion_tokens, 0)), 0) AS tokens
     FROM model_calls WHERE created_at >= ?${SCOPE_SQL[scope]}`,
  ).get(since) as { requests: number; tokens: number };
  return { requests: row.requests, tokens: row.tokens };
}

/** The `klbr_meta` key of the operator's last budget reset; this module is its only writer. */
const WINDOW_START_KEY = "budget_window_start";

/**
 * When the hourly budget windows begin at the earliest: the time (ms) of the operator's last
 * reset, or 0 when there was none. Calls made before it are not counted.
 */
export function budgetWindowStart(store: Store): number {
  const row = store.statement("SELECT value FROM klbr_meta WHERE key = ?").get(
    WINDOW_START_KEY,
  ) as { value: string } | undefined;
  return row === undefined ? 0 : Number(row.value);
}

/**
 * Starts the hourly budget windows again at the store's clock: the calls made before are no
 * longer counted by any budget. Returns that time (ms).
 *
 * When it returns the reset is committed, so a restart does not count those calls again.
 * Proven by "a reset starts the windows again, durably; a raise lasts for the run" in
 * `tests/runtime/jobs/budget.test.ts`.
 */
export function resetBudgetWindow(store: Store): number {
  return store.transaction(() => {
    const now = store.clock();
    store.statement(
      `INSERT INTO klbr_meta (key, value) VALUES (?, ?)
       ON CONFLICT (key) DO UPDATE SET value = excluded.value`,
    ).run(WINDOW_START_KEY, String(now));
    return now;
  });
}
