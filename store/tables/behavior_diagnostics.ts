/**
 * The `hook_traces` and `behavior_candidates` tables: what each hook invocation did, and the
 * diagnostics of each behaviour candidate that failed the host's test. This module is their
 * only writer.
 *
 * Both are bounded. A trace keeps its inputs and output whole up to
 * {@linkcode TRACE_FIELD_MAX_CHARS} characters of JSON each, and its error up to
 * {@linkcode TRACE_ERROR_MAX_CHARS}; a larger field is kept as
 * `{truncated: true, chars, head}` and the trace is marked truncated. A session keeps its
 * newest {@linkcode MAX_TRACES} traces that succeeded and, apart, its newest
 * {@linkcode MAX_TRACES} that failed, so a burst of good calls never pushes out the
 * diagnostics of a failure; and its newest {@linkcode MAX_CANDIDATES} failed candidates.
 * Older rows are deleted when a new one is written: a record that names a pruned trace
 * still says what failed, and reading the trace says it is gone.
 *
 * @module
 */

import { z } from "zod";
import { newId } from "../../runtime/core/mod.ts";
import { insertEvent } from "./events.ts";
import { checkSessionId } from "./sessions.ts";
import type { Store } from "../store.ts";
import { schemaError } from "../schema/_schema_error.ts";
import { checkLimit, fromRow, jsonColumn, type Row } from "./_rows.ts";

/** The longest JSON text of a trace's inputs or output kept whole. */
export const TRACE_FIELD_MAX_CHARS = 32_768;
/** The longest JSON text of a trace's error kept whole. */
export const TRACE_ERROR_MAX_CHARS = 8_192;
/** Traces a session keeps of each kind (succeeded, failed). */
export const MAX_TRACES = 500;
/** Failed candidates a session keeps. */
export const MAX_CANDIDATES = 200;
/** Trace ids a frame record names at most. */
export const MAX_FRAME_TRACE_REFS = 200;

/** Where a hook call came from. */
export const TRACE_ORIGINS = ["attention", "turn", "test", "candidate"] as const;

const HookError = z.object({
  code: z.string(),
  message: z.string(),
  traceback: z.string().nullable().optional(),
});
/** How a hook call failed. */
export type HookError = z.infer<typeof HookError>;

const RecordTraceSchema = z.object({
  session: z.string(),
  /** The frame whose turn made the call; null for an attention plan (linked on accept) or a test. */
  frameId: z.string().nullable(),
  hook: z.string().min(1).max(64),
  /** The release the hook came from (or `draft-<tree hash>` for a draft). */
  releaseId: z.string().min(1).max(200),
  origin: z.enum(TRACE_ORIGINS),
  inputs: z.unknown(),
  /** What the hook returned; absent when it returned nothing readable. */
  output: z.unknown().optional(),
  error: HookError.nullable(),
  durationMs: z.number().nonnegative(),
}).strict();

/** What {@linkcode recordTrace} takes. */
export type RecordTrace = z.input<typeof RecordTraceSchema>;

/** One hook invocation, as kept. */
export interface HookTrace {
  id: string;
  session: string;
  frameId: string | null;
  hook: string;
  releaseId: string;
  origin: (typeof TRACE_ORIGINS)[number];
  /** The arguments, or `{truncated: true, chars, head}` when over the bound. */
  inputs: unknown;
  /** The result, null when there was none, or the truncated form. */
  output: unknown;
  error: HookError | null;
  truncated: boolean;
  durationMs: number;
  at: number;
}

function bounded(value: unknown, max: number): { text: string; cut: boolean } | null {
  const text = JSON.stringify(value);
  return text === undefined ? null : cutText(text, max);
}

function cutText(text: string, max: number): { text: string; cut: boolean } {
  if (text.length <= max) return { text, cut: false };
  return {
    text: JSON.stringify({ truncated: true, chars: text.length, head: text.slice(0, max) }),
    cut: true,
  };
}

function boundedError(error: HookError | null): string | null {
  if (error === null) return null;
  const text = JSON.stringify(error);
  if (text.length <= TRACE_ERROR_MAX_CHARS) return text;
  // Keep the message and the end of the traceback, where the failing line is.
  const traceback = error.traceback ?? "";
  return JSON.stringify({
    code: error.code,
    message: error.message.slice(0, 2000),
    traceback: traceback.slice(-(TRACE_ERROR_MAX_CHARS - 2500)),
  });
}

function toTrace(row: Row): HookTrace {
  return fromRow<HookTrace>(row, {
    inputs: jsonColumn(row.inputs),
    output: jsonColumn(row.output),
    error: jsonColumn(row.error),
    truncated: row.truncated === 1,
  });
}

/**
 * Records one hook invocation and prunes the session's oldest traces of the same kind past
 * {@linkcode MAX_TRACES}; returns the new trace's id.
 *
 * When it returns the trace is committed. Proven by "`recordTrace()` bounds each field and
 * the count of traces" in `tests/store/behavior_diagnostics.test.ts`.
 *
 * @throws {KlbrError} `invalid_input` when the trace fails its schema or its inputs are not
 * JSON; `not_found` for an unknown session.
 */
export function recordTrace(store: Store, trace: RecordTrace): string {
  const { id, write } = preparedTrace(store, trace);
  write();
  return id;
}

/**
 * Records one hook invocation with the store's next commit, not one of its own (`store.defer`):
 * checked, encoded and named now; durable with the next transaction (the frame its plan made,
 * the reply its request got) or when a reader of traces asks. A write that fails then goes to
 * `failed` and changes nothing else.
 *
 * @throws {KlbrError} `invalid_input` when the trace fails its schema or its inputs are not JSON.
 */
export function deferTrace(store: Store, trace: RecordTrace, failed?: (e: unknown) => void) {
  const { id, write } = preparedTrace(store, trace);
  store.defer(write, failed);
  return id;
}

function preparedTrace(store: Store, trace: RecordTrace): { id: string; write: () => void } {
  const parsed = RecordTraceSchema.safeParse(trace);
  if (!parsed.success) throw schemaError("record hook trace", parsed.error, trace);
  const t = parsed.data;
  checkSessionId(t.session);
  const { inputs, output } = encodedFields(t.inputs ?? null, t.output);
  const id = newId("trace", store.clock());
  const at = store.clock();
  const write = () =>
    store.transaction(() => {
      store.statement(
        `INSERT INTO hook_traces (id, session_id, frame_id, hook, release_id, origin, inputs,
         output, error, truncated, duration_ms, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      ).run(
        id,
        t.session,
        t.frameId,
        t.hook,
        t.releaseId,
        t.origin,
        inputs.text,
        output?.text ?? null,
        boundedError(t.error),
        inputs.cut || output?.cut ? 1 : 0,
        Math.round(t.durationMs * 1000) / 1000,
        at,
      );
      store.statement(
        `DELETE FROM hook_traces WHERE id IN (
         SELECT id FROM hook_traces WHERE session_id = ? AND (error IS NULL) = ?
         ORDER BY id DESC LIMIT -1 OFFSET ?)`,
      ).run(t.session, t.error === null ? 1 : 0, MAX_TRACES);
    });
  return { id, write };
}

/** The bounded JSON of inputs and output; an output that is the inputs' one field is encoded once. */
function encodedFields(inputs: unknown, output: unknown) {
  const fields = typeof inputs === "object" && inputs !== null ? Object.entries(inputs) : [];
  if (output === undefined || fields.length !== 1 || fields[0][1] !== output) {
    const out = output === undefined ? null : bounded(output, TRACE_FIELD_MAX_CHARS);
    return { inputs: bounded(inputs, TRACE_FIELD_MAX_CHARS)!, output: out };
  }
  const inner = JSON.stringify(output);
  return {
    inputs: cutText(`{${JSON.stringify(fields[0][0])}:${inner}}`, TRACE_FIELD_MAX_CHARS),
    output: cutText(inner, TRACE_FIELD_MAX_CHARS),
  };
}

/** Returns the trace `id`, or `undefined` when there is none (never recorded, or pruned). */
export function getTrace(store: Store, id: string): HookTrace | undefined {
  store.flush(); // a deferred trace is visible to every reader
  const row = store.statement("SELECT * FROM hook_traces WHERE id = ?").get(id);
  return row && toTrace(row);
}

/** Returns the traces of a frame's turn (its attention plan first), oldest first, at most `limit`. */
export function tracesOfFrame(store: Store, frameId: string, limit = 1000): HookTrace[] {
  store.flush();
  return store.statement(
    "SELECT * FROM hook_traces WHERE frame_id = ? ORDER BY id LIMIT ?",
  ).all(frameId, limit).map(toTrace);
}

/**
 * The ids of a frame's traces for its record: the first {@linkcode MAX_FRAME_TRACE_REFS},
 * and how many there are in all.
 */
export function traceRefsOfFrame(store: Store, frameId: string): { ids: string[]; count: number } {
  store.flush();
  const ids = (store.statement(
    "SELECT id FROM hook_traces WHERE frame_id = ? ORDER BY id LIMIT ?",
  ).all(frameId, MAX_FRAME_TRACE_REFS) as { id: string }[]).map((r) => r.id);
  const { count } = store.statement(
    "SELECT COUNT(*) AS count FROM hook_traces WHERE frame_id = ?",
  ).get(frameId) as { count: number };
  return { ids, count };
}

/**
 * Gives an attention plan's trace the frame it produced; runs inside the caller's
 * transaction (`acceptFrame`). A pruned or unknown trace is left alone.
 */
export function linkTraceToFrame(store: Store, traceId: string, frameId: string): void {
  store.statement("UPDATE hook_traces SET frame_id = ? WHERE id = ? AND frame_id IS NULL")
    .run(frameId, traceId);
}

/** One hook's result in a candidate's test, with what is needed to reproduce it. */
export const CandidateCheck = z.object({
  hook: z.string(),
  ok: z.boolean(),
  detail: z.string(),
  /** The arguments the hook was called with. */
  fixture: z.unknown(),
  error: HookError.nullable(),
  trace_id: z.string().nullable(),
});
/** One check of a candidate. */
export type CandidateCheck = z.infer<typeof CandidateCheck>;

const RecordCandidateSchema = z.object({
  session: z.string(),
  draftId: z.string().min(1).max(64),
  /** The tree hash of the draft as tested. */
  revision: z.string().min(1).max(200),
  action: z.enum(["test", "publish"]),
  checks: z.array(CandidateCheck).min(1).max(64),
}).strict();

/** What {@linkcode recordFailedCandidate} takes. */
export type RecordCandidate = z.input<typeof RecordCandidateSchema>;

/** A failed candidate, as kept. */
export interface FailedCandidate {
  id: string;
  session: string;
  draftId: string;
  revision: string;
  action: "test" | "publish";
  /** Every check of the test, passing ones too. */
  checks: CandidateCheck[];
  /** The hooks that failed. */
  failing: string[];
  at: number;
}

/**
 * Keeps a failed candidate's diagnostics and appends `candidate.failed`, in one transaction;
 * prunes the session's oldest candidates past {@linkcode MAX_CANDIDATES}.
 *
 * When it returns both are committed. Proven by "`recordFailedCandidate()` keeps the
 * diagnostics and a record naming them".
 *
 * @throws {KlbrError} `invalid_input` when the candidate fails its schema; `not_found` for an
 * unknown session.
 */
export function recordFailedCandidate(
  store: Store,
  candidate: RecordCandidate,
): { candidateId: string; seq: number } {
  const parsed = RecordCandidateSchema.safeParse(candidate);
  if (!parsed.success) throw schemaError("record failed candidate", parsed.error, candidate);
  const c = parsed.data;
  checkSessionId(c.session);
  const checks = c.checks.map((check) => ({
    ...check,
    detail: check.detail.slice(0, 2000),
    fixture: JSON.parse(bounded(check.fixture ?? null, TRACE_FIELD_MAX_CHARS)!.text),
    error: check.error === null ? null : JSON.parse(boundedError(check.error)!),
  }));
  const id = newId("candidate", store.clock());
  return store.transaction(() => {
    store.statement(
      `INSERT INTO behavior_candidates (id, session_id, draft_id, revision, action, checks, at)
       VALUES (?, ?, ?, ?, ?, ?, ?)`,
    ).run(id, c.session, c.draftId, c.revision, c.action, JSON.stringify(checks), store.clock());
    store.statement(
      `DELETE FROM behavior_candidates WHERE id IN (
         SELECT id FROM behavior_candidates WHERE session_id = ?
         ORDER BY id DESC LIMIT -1 OFFSET ?)`,
    ).run(c.session, MAX_CANDIDATES);
    const seq = insertEvent(store, c.session, "candidate.failed", {
      candidate_id: id,
      draft_id: c.draftId,
      revision: c.revision,
      action: c.action,
      failing: checks.filter((check) => !check.ok).map((check) => ({
        hook: check.hook,
        message: (check.error?.message ?? check.detail).slice(0, 500),
        trace_id: check.trace_id,
      })),
    });
    return { candidateId: id, seq };
  });
}

/**
 * Returns a session's failed candidates, newest first: all of them, or one draft's.
 *
 * @throws {KlbrError} `invalid_input` for a `limit` outside 1–1000.
 */
export function listFailedCandidates(
  store: Store,
  session: string,
  options: { draftId?: string; limit?: number } = {},
): FailedCandidate[] {
  const limit = options.limit ?? 50;
  checkLimit(limit, { action: "list candidates", max: 1000 });
  const rows = (options.draftId === undefined
    ? store.statement(
      "SELECT * FROM behavior_candidates WHERE session_id = ? ORDER BY id DESC LIMIT ?",
    ).all(session, limit)
    : store.statement(
      "SELECT * FROM behavior_candidates WHERE session_id = ? AND draft_id = ? ORDER BY id DESC LIMIT ?",
    ).all(session, options.draftId, limit)) as {
      id: string;
      session_id: string;
      draft_id: string;
      revision: string;
      action: "test" | "publish";
      checks: string;
      at: number;
    }[];
  return rows.map((row) => {
    const checks = JSON.parse(row.checks) as CandidateCheck[];
    return {
      id: row.id,
      session: row.session_id,
      draftId: row.draft_id,
      revision: row.revision,
      action: row.action,
      checks,
      failing: checks.filter((c) => !c.ok).map((c) => c.hook),
      at: row.at,
    };
  });
}
