/**
 * The `frames` table: attention frames, the only way a turn consumes inputs. This module is the
 * table's only writer.
 *
 * Accepting a frame records which inputs it consumes, its routing handles, context epoch and
 * policy revision, and marks those inputs consumed, in one transaction. Only the daemon that
 * holds the store's owner lock accepts frames, so an open frame found at start belongs to a
 * dead owner: recovery continues it or abandons it, giving its inputs back.
 *
 * @module
 */

import { z } from "zod";
import { KlbrError, newId } from "../../runtime/core/mod.ts";
import { insertEvent } from "./events.ts";
import { linkTraceToFrame, traceRefsOfFrame } from "./behavior_diagnostics.ts";
import { claimInputs, unclaimInputs } from "./inputs.ts";
import { checkSessionId, requireSession } from "./sessions.ts";
import type { Store } from "../store.ts";
import { checkReason, fromRow, jsonColumn, type Row } from "./_rows.ts";
import { schemaError } from "../schema/_schema_error.ts";

const AcceptFrameSchema = z.object({
  session: z.string(),
  /** The inputs this frame consumes: 1–1000 distinct ids, all pending, all in `session`. */
  inputIds: z.array(z.string()).min(1).max(1000)
    .refine((ids) => new Set(ids).size === ids.length, "has a repeated id"),
  /** Routing handles (reply anchors, destinations): any JSON value. */
  routing: z.unknown().default({}),
  contextEpoch: z.number().int().nonnegative(),
  policyRevision: z.string().min(1).max(200),
  /** The trace of the `attention.plan` call that chose these inputs, when there is one. */
  attentionTrace: z.string().min(1).max(64).optional(),
}).strict();

/** What {@linkcode acceptFrame} takes. */
export type AcceptFrame = z.input<typeof AcceptFrameSchema>;

/** What {@linkcode acceptFrame} returns. */
export interface AcceptedFrame {
  frameId: string;
  /** 1, 2, 3, … within the session. */
  number: number;
  /** The seq of the `frame.accepted` event. */
  seq: number;
}

/** How a frame ended through {@linkcode finishFrame}. */
export type FrameEnd = "done" | "failed" | "abandoned";

/** A frame row. */
export interface FrameRecord {
  id: string;
  session: string;
  number: number;
  inputIds: string[];
  routing: unknown;
  contextEpoch: number;
  policyRevision: string;
  state: "open" | FrameEnd;
  createdAt: number;
  endedAt: number | null;
  endedReason: string | null;
}

function toRecord(row: Row): FrameRecord {
  // The lease columns are not part of a frame's record.
  const { lease_owner: _owner, lease_expires_at: _expires, ...columns } = row;
  return fromRow<FrameRecord>(columns, {
    inputIds: jsonColumn(row.input_ids),
    routing: jsonColumn(row.routing),
  });
}

/** Returns the frame `id`, or `undefined` when there is none. */
export function getFrame(store: Store, id: string): FrameRecord | undefined {
  const row = store.statement("SELECT * FROM frames WHERE id = ?").get(id);
  return row && toRecord(row);
}

function requireOpenFrame(store: Store, action: string, id: string): FrameRecord {
  const frame = getFrame(store, id);
  if (frame === undefined) {
    throw new KlbrError("not_found", `cannot ${action} ${id}: no such frame (got ${id})`);
  }
  if (frame.state !== "open") {
    throw new KlbrError(
      "invalid_input",
      `cannot ${action} ${id}: the frame has ended (got state ${frame.state})`,
    );
  }
  return frame;
}

/**
 * Accepts an attention frame: inserts it, marks its inputs consumed and appends `frame.accepted`,
 * in one transaction.
 *
 * When it returns the frame is committed and owns its inputs; they are no longer pending.
 * Proven by "`acceptFrame()` consumes its inputs and appends frame.accepted" and "`acceptFrame()`
 * writes nothing when one input is not pending".
 *
 * @throws {KlbrError} `invalid_input` when the request fails its schema or an input is missing,
 *   in another session or not pending (then nothing is written); `not_found` for an unknown
 *   session.
 */
export function acceptFrame(store: Store, request: AcceptFrame): AcceptedFrame {
  const parsed = AcceptFrameSchema.safeParse(request);
  if (!parsed.success) throw schemaError("accept frame", parsed.error, request);
  const frame = parsed.data;
  checkSessionId(frame.session);
  const routing = JSON.stringify(frame.routing);
  if (routing === undefined) {
    throw new KlbrError(
      "invalid_input",
      "cannot accept frame: routing is not JSON (got undefined)",
    );
  }
  return store.transaction(() => {
    requireSession(store, frame.session);
    const now = store.clock();
    const frameId = newId("frame", now);
    const { number } = store.statement(
      "SELECT COALESCE(MAX(number), 0) + 1 AS number FROM frames WHERE session_id = ?",
    ).get(frame.session) as { number: number };
    store.statement(
      `INSERT INTO frames (id, session_id, number, input_ids, routing, context_epoch,
         policy_revision, state, created_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, 'open', ?)`,
    ).run(
      frameId,
      frame.session,
      number,
      JSON.stringify(frame.inputIds),
      routing,
      frame.contextEpoch,
      frame.policyRevision,
      now,
    );
    claimInputs(store, { session: frame.session, inputIds: frame.inputIds, frameId });
    if (frame.attentionTrace !== undefined) linkTraceToFrame(store, frame.attentionTrace, frameId);
    const seq = insertEvent(store, frame.session, "frame.accepted", {
      frame_id: frameId,
      number,
      input_ids: frame.inputIds,
      routing: frame.routing,
      context_epoch: frame.contextEpoch,
      policy_revision: frame.policyRevision,
      ...(frame.attentionTrace === undefined ? {} : { attention_trace: frame.attentionTrace }),
    });
    return { frameId, number, seq };
  });
}

function endFrame(store: Store, frame: FrameRecord, state: FrameEnd, reason: string): number {
  store.statement(
    "UPDATE frames SET state = ?, ended_at = ?, ended_reason = ? WHERE id = ? AND state = 'open'",
  ).run(state, store.clock(), reason, frame.id);
  if (state === "abandoned") unclaimInputs(store, frame.id);
  const traces = traceRefsOfFrame(store, frame.id);
  return insertEvent(
    store,
    frame.session,
    state === "abandoned" ? "frame.abandoned" : "frame.finished",
    {
      frame_id: frame.id,
      number: frame.number,
      state,
      reason,
      input_ids: frame.inputIds,
      // The hook calls of its turn, when it made any (`hooks.trace(frame)` reads them).
      ...(traces.count === 0 ? {} : { trace_ids: traces.ids, trace_count: traces.count }),
    },
  );
}

/**
 * Ends an open frame as `done`, `failed` or `abandoned` and appends its event; returns the seq.
 *
 * When it returns the end is committed. `done` and `failed` keep the inputs consumed (the turn
 * saw them); `abandoned` returns them to `pending` and appends `frame.abandoned` instead of
 * `frame.finished`. Proven by "`finishFrame()` refuses a frame that has already ended".
 *
 * @throws {KlbrError} `not_found` for an unknown frame; `invalid_input` when it has ended or
 *   `state`/`reason` are malformed.
 */
export function finishFrame(
  store: Store,
  frameId: string,
  state: FrameEnd,
  reason: string,
): number {
  if (!["done", "failed", "abandoned"].includes(state)) {
    throw new KlbrError(
      "invalid_input",
      `cannot finish frame ${frameId}: state must be done, failed or abandoned (got ${state})`,
    );
  }
  checkReason(reason, `finish frame ${frameId}`);
  return store.transaction(() => {
    const frame = requireOpenFrame(store, "finish frame", frameId);
    return endFrame(store, frame, state, reason);
  });
}

/**
 * Returns the session's newest `limit` frames, newest first (by the `(session_id, number)`
 * index): what an operator reads to find a frame id for `klbr trace`.
 */
export function recentFrames(store: Store, session: string, limit: number): FrameRecord[] {
  return store.statement(
    "SELECT * FROM frames WHERE session_id = ? ORDER BY number DESC LIMIT ?",
  ).all(session, limit).map(toRecord);
}

/** Returns the session's open frames, oldest first. */
export function openFrames(store: Store, session: string): FrameRecord[] {
  return store.statement(
    "SELECT * FROM frames WHERE session_id = ? AND state = 'open' ORDER BY number",
  ).all(session).map(toRecord);
}

/**
 * Continues an open frame of a dead owner in this daemon: appends `frame.resumed`.
 *
 * The caller holds the store's owner lock, which proves the previous owner is gone. Proven by
 * "`adoptFrame()` records that an open frame is continued".
 *
 * @throws {KlbrError} `not_found` for an unknown frame; `invalid_input` when it has ended.
 */
export function adoptFrame(store: Store, frameId: string): void {
  store.transaction(() => {
    const frame = requireOpenFrame(store, "adopt frame", frameId);
    insertEvent(store, frame.session, "frame.resumed", {
      frame_id: frameId,
      number: frame.number,
    });
  });
}
