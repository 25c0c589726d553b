/**
 * The `outbox` table: every message the agent asked to send to Discord, with an honest state.
 * This module is the table's only writer.
 *
 * A row moves `pending` → `attempting` → `confirmed` | `failed` | `unknown`, and every move is
 * committed together with its `outbox.<state>` event. `attempting` is written before the
 * request leaves; a request whose outcome is not known ends `unknown` and is never retried,
 * because a retry could post the message twice.
 *
 * @module
 */

import { z } from "zod";
import { KlbrError, newId, OUTBOX_STATES } from "../runtime/core/mod.ts";
import { schemaError } from "./_schema_error.ts";
import { insertEvent } from "./events.ts";
import { requireSession } from "./sessions.ts";
import type { Store } from "./store.ts";

/** One of `OUTBOX_STATES` (`runtime/core/_records.ts`): an outbox row's state. */
export type OutboxState = (typeof OUTBOX_STATES)[number];

const Snowflake = z.string().regex(/^[0-9]{1,20}$/, "expected a snowflake of 1-20 digits");

/** Where a Discord message goes: a channel and, optionally, the message it answers. */
export const OutboxDestination = z.strictObject({
  channel_id: Snowflake,
  reply_to: Snowflake.optional(),
});

/** A validated destination. */
export type OutboxDestination = z.infer<typeof OutboxDestination>;

const EnqueueSchema = z.strictObject({
  session: z.string(),
  conversation: z.string().min(1).max(512),
  destination: OutboxDestination,
  body: z.string().min(1).max(2000),
  frameId: z.string().nullable().default(null),
  cellId: z.string().nullable().default(null),
});

/** What {@linkcode enqueueOutbox} takes. */
export type EnqueueOutbox = z.input<typeof EnqueueSchema>;

/** One outbox row. */
export interface OutboxRecord {
  id: string;
  session: string;
  conversation: string;
  destination: OutboxDestination;
  body: string;
  state: OutboxState;
  attempts: number;
  remoteId: string | null;
  error: string | null;
  frameId: string | null;
  cellId: string | null;
  createdAt: number;
  updatedAt: number;
}

interface OutboxRow {
  id: string;
  session_id: string;
  conversation: string;
  destination: string;
  body: string;
  state: OutboxState;
  attempts: number;
  remote_id: string | null;
  error: string | null;
  frame_id: string | null;
  cell_id: string | null;
  created_at: number;
  updated_at: number;
}

function toRecord(row: OutboxRow): OutboxRecord {
  return {
    id: row.id,
    session: row.session_id,
    conversation: row.conversation,
    destination: JSON.parse(row.destination),
    body: row.body,
    state: row.state,
    attempts: row.attempts,
    remoteId: row.remote_id,
    error: row.error,
    frameId: row.frame_id,
    cellId: row.cell_id,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

/**
 * Writes a `pending` row and its `outbox.pending` event in one transaction.
 *
 * When it returns the row is committed; the sender may take it from then on. Proven by
 * "`enqueueOutbox()` commits a pending row with its event".
 *
 * @throws {KlbrError} `invalid_input` when a field fails its schema; `not_found` when the
 *   session does not exist.
 * @example
 * ```ts
 * const row = enqueueOutbox(store, {
 *   session: "default", conversation: "discord:123", destination: { channel_id: "123" }, body: "hi",
 * });
 * ```
 */
export function enqueueOutbox(store: Store, input: EnqueueOutbox): OutboxRecord {
  const parsed = EnqueueSchema.safeParse(input);
  if (!parsed.success) throw schemaError("enqueue outbox message", parsed.error, input);
  const data = parsed.data;
  requireSession(store, data.session);
  return store.transaction(() => {
    const now = store.clock();
    const id = newId("outbox", now);
    store.statement(
      `INSERT INTO outbox (id, session_id, conversation, destination, body, state, attempts,
         frame_id, cell_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?, 'pending', 0, ?, ?, ?, ?)`,
    ).run(
      id,
      data.session,
      data.conversation,
      JSON.stringify(data.destination),
      data.body,
      data.frameId,
      data.cellId,
      now,
      now,
    );
    insertEvent(store, data.session, "outbox.pending", {
      outbox_id: id,
      state: "pending",
      conversation: data.conversation,
      destination: data.destination,
      body: data.body,
      frame_id: data.frameId,
      cell_id: data.cellId,
    });
    return requireOutbox(store, id);
  });
}

/** Returns the outbox row `id`, or `undefined` when there is none. */
export function getOutbox(store: Store, id: string): OutboxRecord | undefined {
  const row = store.statement("SELECT * FROM outbox WHERE id = ?").get(id) as
    | OutboxRow
    | undefined;
  return row ? toRecord(row) : undefined;
}

function requireOutbox(store: Store, id: string): OutboxRecord {
  const row = getOutbox(store, id);
  if (row === undefined) {
    throw new KlbrError("not_found", `cannot find outbox message: no row ${id} (got ${id})`);
  }
  return row;
}

/** Returns the oldest `pending` row of any session, or `undefined` when none waits. */
export function nextPendingOutbox(store: Store): OutboxRecord | undefined {
  const row = store.statement(
    "SELECT * FROM outbox WHERE state = 'pending' ORDER BY created_at, id LIMIT 1",
  ).get() as OutboxRow | undefined;
  return row ? toRecord(row) : undefined;
}

/** The state a move starts from, for each target state. */
const FROM: Record<Exclude<OutboxState, "pending">, OutboxState> = {
  attempting: "pending",
  confirmed: "attempting",
  failed: "attempting",
  unknown: "attempting",
};

/** What a move records besides the state. */
export interface OutboxMove {
  /** The Discord message id; required for `confirmed`. */
  remoteId?: string;
  /** Why the send failed or its outcome is unknown; required for `failed` and `unknown`. */
  error?: string;
}

/**
 * Moves row `id` to `state` and appends its `outbox.<state>` event, in one transaction.
 *
 * Allowed moves: `pending` → `attempting` (counts an attempt) and `attempting` →
 * `confirmed` (with `remoteId`), `failed` or `unknown` (with `error`). When it returns the move
 * is committed; `attempting` is therefore durable before the caller sends the request. Proven by
 * "`moveOutbox()` records every allowed move with its event" and "`moveOutbox()` refuses a
 * move from a final state".
 *
 * @throws {KlbrError} `not_found` for a missing row; `invalid_input` for a move the state
 *   machine refuses, or a missing `remoteId` / `error`.
 * @example
 * ```ts
 * moveOutbox(store, row.id, "attempting");
 * moveOutbox(store, row.id, "confirmed", { remoteId: "1234" });
 * ```
 */
export function moveOutbox(
  store: Store,
  id: string,
  state: Exclude<OutboxState, "pending">,
  move: OutboxMove = {},
): OutboxRecord {
  return store.transaction(() => {
    const row = requireOutbox(store, id);
    const from = FROM[state];
    if (row.state !== from) {
      throw new KlbrError(
        "invalid_input",
        `cannot mark outbox message ${id} ${state}: it is ${row.state}, not ${from} (got ${row.state})`,
      );
    }
    if (state === "confirmed" && !move.remoteId) {
      throw new KlbrError(
        "invalid_input",
        `cannot mark outbox message ${id} confirmed: a remote id is required (got ${
          JSON.stringify(move.remoteId)
        })`,
      );
    }
    if ((state === "failed" || state === "unknown") && !move.error) {
      throw new KlbrError(
        "invalid_input",
        `cannot mark outbox message ${id} ${state}: a reason is required (got ${
          JSON.stringify(move.error)
        })`,
      );
    }
    store.statement(
      `UPDATE outbox SET state = ?, attempts = attempts + ?, remote_id = ?, error = ?,
         updated_at = ? WHERE id = ?`,
    ).run(
      state,
      state === "attempting" ? 1 : 0,
      state === "confirmed" ? move.remoteId ?? null : null,
      state === "failed" || state === "unknown" ? move.error ?? null : null,
      store.clock(),
      id,
    );
    const moved = requireOutbox(store, id);
    insertEvent(store, row.session, `outbox.${state}`, {
      outbox_id: id,
      state,
      attempts: moved.attempts,
      remote_id: moved.remoteId,
      error: moved.error,
    });
    return moved;
  });
}

/**
 * Marks every `attempting` row of `session` `unknown`: at start, after a restart, nobody knows
 * whether those requests reached Discord. Returns the ids marked.
 *
 * When it returns, no row of the session is `attempting`. Proven by "`recoverOutbox()` marks
 * attempting rows unknown and leaves the others".
 *
 * @throws {KlbrError} `not_found` when the session does not exist.
 */
export function recoverOutbox(store: Store, session: string): string[] {
  return store.transaction(() => {
    const ids = (store.statement(
      "SELECT id FROM outbox WHERE session_id = ? AND state = 'attempting' ORDER BY created_at, id",
    ).all(session) as unknown as { id: string }[]).map((row) => row.id);
    for (const id of ids) {
      moveOutbox(store, id, "unknown", {
        error: "the daemon restarted during the request; it may or may not have been posted",
      });
    }
    return ids;
  });
}

/** Returns the outbox rows written by the turns of `frameIds`, oldest first. */
export function outboxOfFrames(store: Store, frameIds: readonly string[]): OutboxRecord[] {
  if (frameIds.length === 0) return [];
  const rows = store.statement(
    `SELECT * FROM outbox WHERE frame_id IN (SELECT value FROM json_each(?)) ORDER BY created_at, id`,
  ).all(JSON.stringify(frameIds)) as unknown as OutboxRow[];
  return rows.map(toRecord);
}
