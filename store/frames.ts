/**
 * The `frames` table: attention frames, the only way a turn consumes inputs. This module is the
 * table's only writer.
 *
 * Accepting a frame records which inputs it consumes, its routing handles, context epoch and
 * policy revision, and marks those inputs consumed, in one transaction. A frame is leased to a
 * worker; a frame whose lease runs out is abandoned and its inputs become pending again.
 *
 * @module
 */

import { z } from "zod";
import { KlbrError } from "../runtime/core/mod.ts";
import { newId } from "../runtime/core/mod.ts";
import { insertEvent } from "./events.ts";
import { claimInputs, unclaimInputs } from "./inputs.ts";
import { checkSessionId, requireSession } from "./sessions.ts";
import type { Store } from "./store.ts";
import { schemaError } from "./_schema_error.ts";

const Owner = z.string().min(1).max(200);
const LeaseMs = z.number().int().min(1).max(86_400_000);

const AcceptFrameSchema = z.object({
  session: z.string(),
  /** The inputs this frame consumes: 1–1000 distinct ids, all pending, all in `session`. */
  inputIds: z.array(z.string()).min(1).max(1000)
    .refine((ids) => new Set(ids).size === ids.length, "has a repeated id"),
  /** Routing handles (reply anchors, destinations): any JSON value. */
  routing: z.unknown().default({}),
  contextEpoch: z.number().int().nonnegative(),
  policyRevision: z.string().min(1).max(200),
  leaseOwner: Owner,
  leaseMs: LeaseMs,
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
  leaseExpiresAt: number;
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
  leaseOwner: string | null;
  leaseExpiresAt: number | null;
  createdAt: number;
  endedAt: number | null;
  endedReason: string | null;
}

interface FrameRow {
  id: string;
  session_id: string;
  number: number;
  input_ids: string;
  routing: string;
  context_epoch: number;
  policy_revision: string;
  state: FrameRecord["state"];
  lease_owner: string | null;
  lease_expires_at: number | null;
  created_at: number;
  ended_at: number | null;
  ended_reason: string | null;
}

function toRecord(row: FrameRow): FrameRecord {
  return {
    id: row.id,
    session: row.session_id,
    number: row.number,
    inputIds: JSON.parse(row.input_ids),
    routing: JSON.parse(row.routing),
    contextEpoch: row.context_epoch,
    policyRevision: row.policy_revision,
    state: row.state,
    leaseOwner: row.lease_owner,
    leaseExpiresAt: row.lease_expires_at,
    createdAt: row.created_at,
    endedAt: row.ended_at,
    endedReason: row.ended_reason,
  };
}

/** Returns the frame `id`, or `undefined` when there is none. */
export function getFrame(store: Store, id: string): FrameRecord | undefined {
  const row = store.statement("SELECT * FROM frames WHERE id = ?").get(id) as FrameRow | undefined;
  return row ? toRecord(row) : undefined;
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
    const leaseExpiresAt = now + frame.leaseMs;
    store.statement(
      `INSERT INTO frames (id, session_id, number, input_ids, routing, context_epoch,
         policy_revision, state, lease_owner, lease_expires_at, created_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, 'open', ?, ?, ?)`,
    ).run(
      frameId,
      frame.session,
      number,
      JSON.stringify(frame.inputIds),
      routing,
      frame.contextEpoch,
      frame.policyRevision,
      frame.leaseOwner,
      leaseExpiresAt,
      now,
    );
    claimInputs(store, { session: frame.session, inputIds: frame.inputIds, frameId });
    const seq = insertEvent(store, frame.session, "frame.accepted", {
      frame_id: frameId,
      number,
      input_ids: frame.inputIds,
      routing: frame.routing,
      context_epoch: frame.contextEpoch,
      policy_revision: frame.policyRevision,
    });
    return { frameId, number, seq, leaseExpiresAt };
  });
}

function endFrame(store: Store, frame: FrameRecord, state: FrameEnd, reason: string): number {
  store.statement(
    `UPDATE frames SET state = ?, ended_at = ?, ended_reason = ?, lease_owner = NULL,
       lease_expires_at = NULL WHERE id = ? AND state = 'open'`,
  ).run(state, store.clock(), reason, frame.id);
  if (state === "abandoned") unclaimInputs(store, frame.id);
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
  if (typeof reason !== "string" || reason.length === 0 || reason.length > 1000) {
    throw new KlbrError(
      "invalid_input",
      `cannot finish frame ${frameId}: reason must be 1-1000 characters (got ${
        JSON.stringify(reason)
      })`,
    );
  }
  return store.transaction(() => {
    const frame = requireOpenFrame(store, "finish frame", frameId);
    return endFrame(store, frame, state, reason);
  });
}

/**
 * Extends the lease of an open frame held by `leaseOwner` to `now + leaseMs`; returns the new
 * expiry.
 *
 * When it returns the new expiry is committed. A lease that has already run out cannot be
 * renewed: the frame is due to be abandoned. Proven by "`renewLease()` refuses an expired lease, another owner and an ended frame".
 *
 * @throws {KlbrError} `not_found` for an unknown frame; `invalid_input` when the frame has ended,
 *   the owner differs, the lease has run out or the options are malformed.
 */
export function renewLease(
  store: Store,
  frameId: string,
  options: { leaseOwner: string; leaseMs: number },
): number {
  const parsed = z.object({ leaseOwner: Owner, leaseMs: LeaseMs }).strict().safeParse(options);
  if (!parsed.success) throw schemaError(`renew lease of ${frameId}`, parsed.error, options);
  return store.transaction(() => {
    const frame = requireOpenFrame(store, "renew lease of", frameId);
    const now = store.clock();
    if (frame.leaseOwner !== parsed.data.leaseOwner) {
      throw new KlbrError(
        "invalid_input",
        `cannot renew lease of ${frameId}: it is held by ${frame.leaseOwner} (got ${parsed.data.leaseOwner})`,
      );
    }
    if (frame.leaseExpiresAt !== null && frame.leaseExpiresAt <= now) {
      throw new KlbrError(
        "invalid_input",
        `cannot renew lease of ${frameId}: it expired at ${frame.leaseExpiresAt} (got now ${now})`,
      );
    }
    const expires = now + parsed.data.leaseMs;
    store.statement("UPDATE frames SET lease_expires_at = ? WHERE id = ?").run(expires, frameId);
    return expires;
  });
}

/**
 * Abandons every open frame whose lease expired at or before `now`; returns their ids.
 *
 * At most 1000 frames per call (call again while it returns 1000 ids). When it returns, each
 * such frame is `abandoned` with reason `lease_expired`, its inputs are
 * `pending` again (without a frame) and a `frame.abandoned` event is appended, all in one
 * transaction. Proven by "`releaseExpiredFrames()` returns the inputs of an expired frame to
 * pending".
 */
export function releaseExpiredFrames(store: Store, now: number = store.clock()): string[] {
  return store.transaction(() => {
    const rows = store.statement(
      "SELECT * FROM frames WHERE state = 'open' AND lease_expires_at <= ? ORDER BY created_at LIMIT 1000",
    ).all(now) as unknown as FrameRow[];
    for (const row of rows) endFrame(store, toRecord(row), "abandoned", "lease_expired");
    return rows.map((row) => row.id);
  });
}

/** Returns the session's open frames, oldest first. */
export function openFrames(store: Store, session: string): FrameRecord[] {
  const rows = store.statement(
    "SELECT * FROM frames WHERE session_id = ? AND state = 'open' ORDER BY number",
  ).all(session) as unknown as FrameRow[];
  return rows.map(toRecord);
}

/**
 * Gives an open frame of a dead owner to `leaseOwner` with a fresh lease and appends
 * `frame.resumed`; returns the new expiry.
 *
 * The caller holds the store's owner lock, which proves the previous lease owner is gone.
 * When it returns the new lease and the event are committed together. Proven by
 * "`adoptFrame()` moves an open frame's lease to the new owner".
 *
 * @throws {KlbrError} `not_found` for an unknown frame; `invalid_input` when it has ended or
 *   the options are malformed.
 */
export function adoptFrame(
  store: Store,
  frameId: string,
  options: { leaseOwner: string; leaseMs: number },
): number {
  const parsed = z.object({ leaseOwner: Owner, leaseMs: LeaseMs }).strict().safeParse(options);
  if (!parsed.success) throw schemaError(`adopt frame ${frameId}`, parsed.error, options);
  return store.transaction(() => {
    const frame = requireOpenFrame(store, "adopt frame", frameId);
    const expires = store.clock() + parsed.data.leaseMs;
    store.statement("UPDATE frames SET lease_owner = ?, lease_expires_at = ? WHERE id = ?").run(
      parsed.data.leaseOwner,
      expires,
      frameId,
    );
    insertEvent(store, frame.session, "frame.resumed", {
      frame_id: frameId,
      number: frame.number,
      previous_owner: frame.leaseOwner,
    });
    return expires;
  });
}
