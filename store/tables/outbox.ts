/**
 * The `outbox` table: every message the agent asked to send to Discord, with an honest state.
 * This module is the table's only writer.
 *
 * A row moves `pending` → `attempting` → `confirmed` | `failed` | `unknown`, and every move is
 * committed together with its `outbox.<state>` event. `attempting` is written before the
 * request leaves. A 429 returns the row to `pending` (Discord did not process it). A request
 * whose outcome is not known ends `unknown`: it is never blindly resent, only reconciled by
 * the Discord sender through its nonce, and may end `confirmed` on evidence. `confirmed`
 * and `failed` are final; a confirmed reply consumes its input's reply state
 * (`input.replied`).
 *
 * @module
 */

import { z } from "zod";
import { KlbrError, newId } from "../../runtime/core/mod.ts";
import { schemaError } from "../schema/_schema_error.ts";
import { effectByKey, recordEffect } from "./effects.ts";
import { insertEvent } from "./events.ts";
import {
  nonceOf,
  OutboxDestination,
  type OutboxRecord,
  type OutboxState,
  type OutboxTry,
  requireOutbox,
} from "./outbox_rows.ts";
import { requireSession } from "./sessions.ts";
import type { Store } from "../store.ts";

export * from "./outbox_rows.ts";

const EnqueueSchema = z.strictObject({
  session: z.string(),
  conversation: z.string().min(1).max(512),
  destination: OutboxDestination,
  body: z.string().min(1).max(2000),
  kind: z.enum(["message", "reaction"]).default("message"),
  /** The input this message answers: its reply state is consumed when the row is confirmed. */
  inputId: z.string().nullable().default(null),
  frameId: z.string().nullable().default(null),
  cellId: z.string().nullable().default(null),
  /** The idempotency key: a second row of the same key and kind in the session is not written. */
  key: z.string().min(1).max(200).optional(),
});

/** What {@linkcode enqueueOutbox} takes. */
export type EnqueueOutbox = z.input<typeof EnqueueSchema>;

/**
 * Writes a `pending` row, its `outbox.pending` event and its entry among its cell's effects
 * (kind `discord.send`, or `discord.react` for a reaction), in one transaction. With `key`, a
 * row already written under that key (and kind) in the session is returned instead, marked
 * `duplicate`, and nothing is written: one key is one row, one nonce, one message.
 *
 * When it returns the row is committed; the sender may take it from then on. Proven by
 * "`enqueueOutbox()` commits a pending row with its event" and "`discord.send` and
 * `discord.react` queue the same thing once per frame; a key holds across frames".
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
export function enqueueOutbox(
  store: Store,
  input: EnqueueOutbox,
): OutboxRecord & { duplicate: boolean } {
  const parsed = EnqueueSchema.safeParse(input);
  if (!parsed.success) throw schemaError("enqueue outbox message", parsed.error, input);
  const data = parsed.data;
  requireSession(store, data.session);
  const kind = data.kind === "reaction" ? "discord.react" : "discord.send";
  return store.transaction(() => {
    const first = data.key === undefined
      ? undefined
      : effectByKey(store, data.session, kind, data.key);
    if (first !== undefined) return { ...requireOutbox(store, first.refId), duplicate: true };
    const now = store.clock();
    const id = newId("outbox", now);
    const ordinal = recordEffect(store, {
      session: data.session,
      cellId: data.cellId,
      kind,
      key: data.key,
      refId: id,
      summary: `${
        data.kind === "message" ? "to" : "reaction on"
      } ${data.conversation}: ${data.body}`,
    });
    store.statement(
      `INSERT INTO outbox (id, session_id, conversation, destination, body, kind, nonce, input_id,
         state, attempts, frame_id, cell_id, ordinal, created_at, updated_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'pending', 0, ?, ?, ?, ?, ?)`,
    ).run(
      id,
      data.session,
      data.conversation,
      JSON.stringify(data.destination),
      data.body,
      data.kind,
      nonceOf(id),
      data.inputId,
      data.frameId,
      data.cellId,
      ordinal,
      now,
      now,
    );
    insertEvent(store, data.session, "outbox.pending", {
      outbox_id: id,
      state: "pending",
      conversation: data.conversation,
      destination: data.destination,
      body: data.body,
      kind: data.kind,
      nonce: nonceOf(id),
      input_id: data.inputId,
      frame_id: data.frameId,
      cell_id: data.cellId,
      ordinal,
    });
    return { ...requireOutbox(store, id), duplicate: false };
  });
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
  /** For `unknown`: when reconciliation is due (default now). */
  notBefore?: number;
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
    const row = requireState(store, id, { from: FROM[state], to: state });
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
    const now = store.clock();
    store.statement(
      `UPDATE outbox SET state = ?, attempts = attempts + ?, remote_id = ?, error = ?,
         not_before = ?, first_attempt_at = COALESCE(first_attempt_at, ?), updated_at = ?
       WHERE id = ?`,
    ).run(
      state,
      state === "attempting" ? 1 : 0,
      state === "confirmed" ? move.remoteId ?? null : null,
      state === "failed" || state === "unknown" ? move.error ?? null : null,
      // An `unknown` row is due for reconciliation at once (or when the caller says).
      state === "unknown" ? move.notBefore ?? now : null,
      state === "attempting" ? now : null,
      now,
      id,
    );
    return recordMove(store, row, id, state);
  });
}

/** Appends the row's `outbox.<state>` event (and `input.replied` on a confirmed reply). */
function recordMove(
  store: Store,
  row: OutboxRecord,
  id: string,
  state: OutboxState,
  type: `outbox.${OutboxState}` | "outbox.rate_limited" = `outbox.${state}`,
): OutboxRecord {
  const moved = requireOutbox(store, id);
  const body = {
    outbox_id: id,
    state,
    kind: moved.kind,
    attempts: moved.attempts,
    remote_id: moved.remoteId,
    error: moved.error,
    not_before: moved.notBefore,
    tries: moved.tries,
  };
  const step = type === "outbox.rate_limited" ? "rate_limited" : state;
  insertEvent(store, row.session, `outbox.${step}` as "outbox.unknown", body as never);
  if (state === "confirmed" && moved.inputId !== null) {
    insertEvent(store, row.session, "input.replied", {
      input_id: moved.inputId,
      outbox_id: id,
      remote_id: moved.remoteId,
    });
  }
  return moved;
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

/**
 * Returns `attempting` row `id` to `pending` after a 429: Discord did not process the request.
 * The attempt stays counted, the try is recorded, and the row is not taken before `notBefore`.
 *
 * @throws {KlbrError} `not_found` for a missing row; `invalid_input` unless it is `attempting`.
 */
export function deferOutbox(
  store: Store,
  id: string,
  defer: { notBefore: number; error: string },
): OutboxRecord {
  return store.transaction(() => {
    const row = requireState(store, id, { from: "attempting", to: "pending" });
    const now = store.clock();
    const tries = [...row.tries, { at: now, how: "rate_limit", outcome: defer.error }];
    store.statement(
      "UPDATE outbox SET state = 'pending', error = ?, not_before = ?, tries = ?, updated_at = ? WHERE id = ?",
    ).run(defer.error, defer.notBefore, JSON.stringify(tries), now, id);
    return recordMove(store, row, id, "pending", "outbox.rate_limited");
  });
}

/**
 * Records one reconciliation try on `unknown` row `id`: with `remoteId` (evidence that the
 * message exists) the row becomes `confirmed`; without, it stays `unknown`, due again at
 * `notBefore`, or left to the operator when `notBefore` is `null`. `counted` adds an attempt
 * (a request that could have posted, i.e. a re-post).
 *
 * @throws {KlbrError} `not_found` for a missing row; `invalid_input` unless it is `unknown`.
 */
export function reconcileOutbox(
  store: Store,
  id: string,
  result: {
    try: Omit<OutboxTry, "at">;
    remoteId?: string;
    notBefore: number | null;
    counted?: boolean;
  },
): OutboxRecord {
  return store.transaction(() => {
    const state = result.remoteId ? "confirmed" : "unknown";
    const row = requireState(store, id, { from: "unknown", to: state });
    const now = store.clock();
    const tries = [...row.tries, { at: now, ...result.try }];
    store.statement(
      `UPDATE outbox SET state = ?, remote_id = ?, error = ?, not_before = ?, tries = ?,
         attempts = attempts + ?, updated_at = ? WHERE id = ?`,
    ).run(
      state,
      result.remoteId ?? null,
      result.remoteId ? null : row.error,
      result.remoteId ? null : result.notBefore,
      JSON.stringify(tries),
      result.counted ? 1 : 0,
      now,
      id,
    );
    return recordMove(store, row, id, state);
  });
}

/** Row `id`, refused unless it is in `move.from`; `move.to` is where the caller moves it. */
function requireState(store: Store, id: string, move: { from: OutboxState; to: OutboxState }) {
  const { from, to } = move;
  const row = requireOutbox(store, id);
  if (row.state !== from) {
    throw new KlbrError(
      "invalid_input",
      `cannot mark outbox message ${id} ${to}: it is ${row.state}, not ${from} (got ${row.state})`,
    );
  }
  return row;
}
