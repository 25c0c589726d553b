/**
 * The `inputs` table, the inbox: every admitted input, once per source dedupe key. This module
 * is the table's only writer.
 *
 * An input's identity (source kind, dedupe key, conversation, author, body, timestamps) is fixed
 * at admission; triggers refuse changing it. Only `status` and `frame_id` move: `pending` →
 * `consumed` when an accepted frame takes it, and back to `pending` when that frame is abandoned;
 * `pending` → `dismissed` when no frame took it within the configured age, with an
 * `input.expired` record. So no input stays pending forever.
 *
 * @module
 */

import { KlbrError, SOURCE_KINDS } from "../../runtime/core/mod.ts";
import { type AdmitInput, type ParsedInput, parseInput } from "../schema/_input_schema.ts";
import { insertEvent } from "./events.ts";
import { writeInputs } from "./_input_writes.ts";
import type { Store } from "../store.ts";
import { checkLimit, checkReason } from "./_rows.ts";

export { type AdmitInput, MAX_INPUT_BODY_CHARS } from "../schema/_input_schema.ts";
export { claimInputs, type InputClaim, unclaimInputs } from "./_input_claims.ts";

/** What {@linkcode admitInput} returns: the input id and the seq of its `input.admitted` event. */
export interface AdmitResult {
  inputId: string;
  seq: number;
  /** `true` when the dedupe key was admitted before; nothing was written this time. */
  duplicate: boolean;
}

/** An admitted input. */
export interface InputRecord {
  id: string;
  session: string;
  sourceKind: (typeof SOURCE_KINDS)[number];
  dedupeKey: string;
  conversationId: string;
  author: string;
  body: unknown;
  receivedAt: number;
  admittedAt: number;
  /** The seq of the input's `input.admitted` event; admission order within its session. */
  seq: number;
  status: "pending" | "consumed" | "dismissed";
  frameId: string | null;
  /** Why a dismissed input ended without a frame; null otherwise. */
  disposition: InputDisposition | null;
  dispositionReason: string | null;
}

/** How an input ended without a frame. */
export type InputDisposition = "expired";

/** An `inputs` row as SQLite returns it. */
export interface InputRow {
  id: string;
  session_id: string;
  source_kind: InputRecord["sourceKind"];
  dedupe_key: string;
  conversation_id: string;
  author: string;
  body: string;
  received_at: number;
  admitted_at: number;
  admitted_seq: number;
  status: InputRecord["status"];
  frame_id: string | null;
  disposition: InputDisposition | null;
  disposition_reason: string | null;
}

/** The record of an `inputs` row. */
export function inputFromRow(row: InputRow): InputRecord {
  return {
    id: row.id,
    session: row.session_id,
    sourceKind: row.source_kind,
    dedupeKey: row.dedupe_key,
    conversationId: row.conversation_id,
    author: row.author,
    body: JSON.parse(row.body),
    receivedAt: row.received_at,
    admittedAt: row.admitted_at,
    seq: row.admitted_seq,
    status: row.status,
    frameId: row.frame_id,
    disposition: row.disposition,
    dispositionReason: row.disposition_reason,
  };
}

/**
 * Admits one input: inserts it and appends its `input.admitted` event in one transaction.
 *
 * When it returns the input is committed (at `synchronous=FULL`, on disk) and may be
 * acknowledged. A repeated `(sourceKind, dedupeKey)` writes nothing and returns the first
 * admission's id and seq with `duplicate: true`. Proven by "`admitInput()` keeps one row for a
 * repeated dedupe key" and "`admitInput()` loses no acknowledged input when its process is
 * SIGKILLed".
 *
 * @throws {KlbrError} `invalid_input` when the input fails its schema or its dedupe key does not
 *   start with `<sourceKind>:`; `not_found` when the session does not exist.
 * @example
 * ```ts
 * const { inputId, seq, duplicate } = admitInput(store, {
 *   session: "default", sourceKind: "local", dedupeKey: localDedupeKey("cl_1", "m1"),
 *   conversationId: "local:main", author: "owner", body: "hello",
 * });
 * ```
 */
export function admitInput(store: Store, input: AdmitInput): AdmitResult {
  const data = parseInput(input);
  return store.transaction(() => writeInputs(store, [data])[0]);
}

/** One input's outcome in {@linkcode admitInputs}: its admission, or why it alone was refused. */
export type AdmitOutcome = AdmitResult | KlbrError;

/**
 * Admits several inputs in one transaction — the caller's when one is open — with one outcome
 * per input: a refused one (a bad field, a malformed dedupe key, a missing session) is answered
 * with its error and writes nothing, the others are admitted as {@linkcode admitInput} would.
 *
 * Every input is checked before anything is written, and the valid ones are written together
 * in one savepoint, the new ones of each session numbered by one bump of its sequence
 * (`next_seq + n`), in the order given. A savepoint per input would let a refused write roll back alone, but it
 * copies each page an input touches once more; so only when a write is refused after its
 * checks passed are the inputs written again, each in its own savepoint. When it returns in
 * its own transaction, every admitted input is committed. Proven by "`admitInputs()` refuses a
 * bad input alone and admits the rest with their own seqs" and "`admitInputs()` answers a write
 * refused after its checks alone".
 *
 * @throws {KlbrError} `store_unavailable` or `store_corrupt` when the store cannot write: the
 *   caller's transaction must then roll back, and none of the inputs is admitted.
 * @example
 * ```ts
 * const [first, second] = admitInputs(store, [input, { ...input, author: "" }]);
 * // first: { inputId, seq, duplicate: false }; second: KlbrError invalid_input
 * ```
 */
export function admitInputs(store: Store, inputs: AdmitInput[]): AdmitOutcome[] {
  const checked = inputs.map((input) => refusedAlone(() => parseInput(input)));
  const valid = checked.filter((item): item is ParsedInput => !(item instanceof KlbrError));
  let written: AdmitResult[];
  try {
    written = store.transaction(() => writeInputs(store, valid));
  } catch (error) {
    if (isStoreFailure(error)) throw error;
    return checked.map((data) =>
      data instanceof KlbrError
        ? data
        : refusedAlone(() => store.transaction(() => writeInputs(store, [data])[0]))
    );
  }
  let next = 0;
  return checked.map((data) => data instanceof KlbrError ? data : written[next++]);
}

/** `fn`'s result, or the refusal it threw; a store failure or any other error is rethrown. */
function refusedAlone<T>(fn: () => T): T | KlbrError {
  try {
    return fn();
  } catch (error) {
    if (error instanceof KlbrError && !isStoreFailure(error)) return error;
    throw error;
  }
}

function isStoreFailure(error: unknown): boolean {
  return error instanceof KlbrError &&
    (error.code === "store_unavailable" || error.code === "store_corrupt");
}

/** Returns the input `id`, or `undefined` when there is none. */
export function getInput(store: Store, id: string): InputRecord | undefined {
  const row = store.statement("SELECT * FROM inputs WHERE id = ?").get(id) as InputRow | undefined;
  return row ? inputFromRow(row) : undefined;
}

/**
 * Returns the inputs `ids` in the order given, in one query (a frame holds up to 1,000); an id
 * with no input is left out.
 *
 * @example
 * ```ts
 * const inputs = getInputs(store, frame.inputIds);
 * ```
 */
export function getInputs(store: Store, ids: readonly string[]): InputRecord[] {
  const rows = store.statement(
    "SELECT * FROM inputs WHERE id IN (SELECT value FROM json_each(?))",
  ).all(JSON.stringify(ids)) as unknown as InputRow[];
  const byId = new Map(rows.map((row) => [row.id, inputFromRow(row)]));
  return ids.flatMap((id) => byId.get(id) ?? []);
}

/** Returns the input admitted under `(sourceKind, dedupeKey)`, or `undefined`. */
export function inputByDedupeKey(
  store: Store,
  sourceKind: InputRecord["sourceKind"],
  dedupeKey: string,
): InputRecord | undefined {
  const row = store.statement("SELECT * FROM inputs WHERE source_kind = ? AND dedupe_key = ?")
    .get(sourceKind, dedupeKey) as InputRow | undefined;
  return row ? inputFromRow(row) : undefined;
}

/**
 * Returns `session`'s pending inputs in admission order, at most `limit` (1–10000, default 1000).
 *
 * @throws {KlbrError} `invalid_input` for a `limit` outside 1–10000.
 */
export function pendingInputs(
  store: Store,
  session: string,
  options: { limit?: number } = {},
): InputRecord[] {
  const { limit = 1000 } = options;
  checkLimit(limit, { action: "list pending inputs", max: 10_000 });
  const rows = store.statement(
    "SELECT * FROM inputs WHERE session_id = ? AND status = 'pending' ORDER BY admitted_seq LIMIT ?",
  ).all(session, limit) as unknown as InputRow[];
  return rows.map(inputFromRow);
}

/** How many inputs of `session` are pending, and when the oldest was admitted (ms). */
export function pendingSummary(
  store: Store,
  session: string,
): { count: number; oldestAdmittedAt: number | null } {
  const row = store.statement(
    "SELECT count(*) AS count, min(admitted_at) AS oldest FROM inputs WHERE session_id = ? AND status = 'pending'",
  ).get(session) as { count: number; oldest: number | null };
  return { count: row.count, oldestAdmittedAt: row.oldest };
}

/**
 * Ends pending inputs that no frame took within the configured age: each gets status
 * `dismissed`, disposition `expired` with its reason, and an `input.expired` record, in one
 * transaction. An input that is no longer pending is left alone; returns the ids that expired.
 * (An input a plan ignores is taken by a frame with its reason, not here.)
 *
 * Proven by "`expireInputs()` ends pending inputs with their disposition and leaves the rest"
 * in `tests/store/effects.test.ts`.
 *
 * @throws {KlbrError} `invalid_input` for an empty or over-long reason.
 */
export function expireInputs(
  store: Store,
  request: { session: string; inputIds: readonly string[]; reason: string },
): string[] {
  const { session, inputIds, reason } = request;
  const disposition: InputDisposition = "expired";
  checkReason(reason, "expire inputs");
  return store.transaction(() => {
    const now = store.clock();
    const done: string[] = [];
    for (const id of inputIds) {
      const changed = store.statement(
        `UPDATE inputs SET status = 'dismissed', disposition = ?, disposition_reason = ?,
           disposed_at = ? WHERE id = ? AND session_id = ? AND status = 'pending'`,
      ).run(disposition, reason, now, id, session).changes;
      if (changed !== 1) continue;
      const { admitted_at } = store.statement("SELECT admitted_at FROM inputs WHERE id = ?")
        .get(id) as { admitted_at: number };
      insertEvent(store, session, "input.expired", {
        input_id: id,
        reason,
        waited_ms: now - admitted_at,
      });
      done.push(id);
    }
    return done;
  });
}

/**
 * The pending inputs of `session` admitted before `admittedBefore` (ms), oldest first, at most
 * `limit`, and how many there are in all: what `status` shows as waiting too long, and what
 * expiry ends.
 */
export function pendingBefore(
  store: Store,
  session: string,
  admittedBefore: number,
  limit = 20,
): { count: number; inputs: InputRecord[] } {
  const { count } = store.statement(
    "SELECT count(*) AS count FROM inputs WHERE session_id = ? AND status = 'pending' AND admitted_at < ?",
  ).get(session, admittedBefore) as { count: number };
  const rows = count === 0 ? [] : store.statement(
    `SELECT * FROM inputs WHERE session_id = ? AND status = 'pending' AND admitted_at < ?
     ORDER BY admitted_seq LIMIT ?`,
  ).all(session, admittedBefore, limit) as unknown as InputRow[];
  return { count, inputs: rows.map(inputFromRow) };
}

/**
 * The pending inputs of `session` with `admitted_seq <= maxSeq`, oldest first, at most `limit`:
 * a bounded index range (with `waitingInputs`' mark, the inputs waiting too long).
 */
export function pendingUpTo(
  store: Store,
  session: string,
  maxSeq: number,
  limit: number,
): InputRecord[] {
  const rows = store.statement(
    `SELECT * FROM inputs WHERE session_id = ? AND status = 'pending' AND admitted_seq <= ?
     ORDER BY admitted_seq LIMIT ?`,
  ).all(session, maxSeq, limit) as unknown as InputRow[];
  return rows.map(inputFromRow);
}
