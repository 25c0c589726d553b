/**
 * The `outbox` table's rows as records, and every read of them. `outbox.ts` is the table's only
 * writer and re-exports these.
 *
 * @module
 */

import { z } from "zod";
import { KlbrError, OUTBOX_STATES } from "../../runtime/core/mod.ts";
import type { Store } from "../store.ts";

/** One of `OUTBOX_STATES` (`runtime/core/_records.ts`): an outbox row's state. */
export type OutboxState = (typeof OUTBOX_STATES)[number];

const Snowflake = z.string().regex(/^[0-9]{1,20}$/, "expected a snowflake of 1-20 digits");

/** Where a Discord message goes: a channel and, optionally, the message it answers. */
export const OutboxDestination = z.strictObject({
  channel_id: Snowflake,
  reply_to: Snowflake.optional(),
  /** For a reaction: the message reacted to. */
  message_id: Snowflake.optional(),
});

/** What a row sends: a message (`body` is its text) or a reaction (`body` is the emoji). */
export type OutboxKind = "message" | "reaction";

/** One reconciliation (or rate-limit) try, recorded on the row. */
export interface OutboxTry {
  at: number;
  /** `repost` (same nonce), `history` (recent messages), `gateway` (our own echo), `reput`. */
  how: "repost" | "history" | "gateway" | "reput" | "rate_limit";
  outcome: string;
}

/** A validated destination. */
export type OutboxDestination = z.infer<typeof OutboxDestination>;

/** One outbox row. */
export interface OutboxRecord {
  id: string;
  session: string;
  conversation: string;
  destination: OutboxDestination;
  body: string;
  kind: OutboxKind;
  /** What the request carries as Discord's `nonce`: the id's last 25 characters. */
  nonce: string;
  inputId: string | null;
  state: OutboxState;
  attempts: number;
  remoteId: string | null;
  error: string | null;
  /** Not tried before this time (ms); on an `unknown` row, `null` leaves it to the operator. */
  notBefore: number | null;
  /** When the first request left, for the nonce window. */
  firstAttemptAt: number | null;
  tries: OutboxTry[];
  frameId: string | null;
  cellId: string | null;
  /** The row's place among its cell's effects (1, 2, …); null for rows written before it. */
  ordinal: number | null;
  createdAt: number;
  updatedAt: number;
}

interface OutboxRow {
  id: string;
  session_id: string;
  conversation: string;
  destination: string;
  body: string;
  kind: OutboxKind;
  nonce: string | null;
  input_id: string | null;
  state: OutboxState;
  attempts: number;
  remote_id: string | null;
  error: string | null;
  not_before: number | null;
  first_attempt_at: number | null;
  tries: string;
  frame_id: string | null;
  cell_id: string | null;
  ordinal: number | null;
  created_at: number;
  updated_at: number;
}

/**
 * The nonce of outbox row `id`: its last 25 characters (Discord takes at most 25), 9 of time
 * and 16 of randomness, so the same identity as the id.
 *
 * @example
 * ```ts
 * nonceOf("ob_01J0000000AAAAAAAAAAAAAAAA"); // "1J0000000AAAAAAAAAAAAAAAA"
 * ```
 */
export function nonceOf(id: string): string {
  return id.slice(-25);
}

function toRecord(row: OutboxRow): OutboxRecord {
  return {
    id: row.id,
    session: row.session_id,
    conversation: row.conversation,
    destination: JSON.parse(row.destination),
    body: row.body,
    kind: row.kind,
    nonce: row.nonce ?? nonceOf(row.id),
    inputId: row.input_id,
    state: row.state,
    attempts: row.attempts,
    remoteId: row.remote_id,
    error: row.error,
    notBefore: row.not_before,
    firstAttemptAt: row.first_attempt_at,
    tries: JSON.parse(row.tries),
    frameId: row.frame_id,
    cellId: row.cell_id,
    ordinal: row.ordinal,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

/** Returns the outbox row `id`, or `undefined` when there is none. */
export function getOutbox(store: Store, id: string): OutboxRecord | undefined {
  const row = store.statement("SELECT * FROM outbox WHERE id = ?").get(id) as
    | OutboxRow
    | undefined;
  return row ? toRecord(row) : undefined;
}

export function requireOutbox(store: Store, id: string): OutboxRecord {
  const row = getOutbox(store, id);
  if (row === undefined) {
    throw new KlbrError("not_found", `cannot find outbox message: no row ${id} (got ${id})`);
  }
  return row;
}

/**
 * The next row the sender works on: the oldest open row of each channel (`pending`, or
 * `unknown` and due for reconciliation), the earliest due first. Rows of one channel are
 * therefore taken strictly in the order they were written. The caller waits until the row's
 * `notBefore` when it is in the future.
 */
export function nextOutboxWork(store: Store): OutboxRecord | undefined {
  const row = store.statement(
    `SELECT * FROM outbox o
     WHERE (o.state = 'pending' OR (o.state = 'unknown' AND o.not_before IS NOT NULL))
       AND NOT EXISTS (SELECT 1 FROM outbox p
         WHERE (p.state = 'pending' OR (p.state = 'unknown' AND p.not_before IS NOT NULL))
           AND json_extract(p.destination, '$.channel_id') = json_extract(o.destination, '$.channel_id')
           AND (p.created_at, p.id) < (o.created_at, o.id))
     ORDER BY COALESCE(o.not_before, 0), o.created_at, o.id LIMIT 1`,
  ).get() as OutboxRow | undefined;
  return row ? toRecord(row) : undefined;
}

/** The `unknown` or `attempting` row carrying `nonce`, if any: for evidence seen on the gateway. */
export function openOutboxByNonce(store: Store, nonce: string): OutboxRecord | undefined {
  const row = store.statement(
    "SELECT * FROM outbox WHERE nonce = ? AND state IN ('unknown', 'attempting')",
  ).get(nonce) as OutboxRow | undefined;
  return row ? toRecord(row) : undefined;
}

/** Whether `remoteId` is a message the bot posted (a confirmed row), for "replied to the bot". */
export function isOwnMessage(store: Store, remoteId: string): boolean {
  return store.statement(
    "SELECT 1 FROM outbox WHERE remote_id = ? AND kind = 'message' LIMIT 1",
  ).get(remoteId) !== undefined;
}
