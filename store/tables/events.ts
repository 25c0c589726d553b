/**
 * The `events` table: each session's append-only log of durable records, numbered 1, 2, 3, …
 * This module is the table's only writer; triggers refuse every UPDATE and DELETE. Each record
 * it writes is noted with the store, so the commit that holds it announces its session to the
 * store's commit listeners (`Store.onCommit`): no caller wakes a reader by hand.
 *
 * A record's sequence number is taken from `sessions.next_seq` in the same transaction as the
 * record (and as the row it describes), so numbers have no gaps and a reader resuming with
 * `since=<seq>` gets every committed record after it, in order.
 *
 * The append is typed: a record type of the union in `runtime/core/_records.ts` takes a body of
 * that type's schema, and a body that does not match is refused before anything is written. A
 * kind outside the union is kept as it is (the log stays open to a newer writer's types; readers
 * show such a record as unknown).
 *
 * @module
 */

import {
  assert,
  describeIssues,
  isRecordType,
  KlbrError,
  recordDataSchema,
  type RecordInput,
  type RecordType,
  type StoredRecord,
} from "../../runtime/core/mod.ts";
import { RARE_KINDS, RARE_KINDS_TERM } from "../schema/migrations.ts";
import { allocateSeq, checkSessionId } from "./sessions.ts";
import type { Store } from "../store.ts";
import { checkLimit } from "./_rows.ts";

/** One durable record of a session. */
export interface EventRecord {
  session: string;
  seq: number;
  kind: string;
  /** When it was committed, in ms. */
  at: number;
  /** The JSON body, parsed. */
  body: unknown;
}

/** Options for {@linkcode readEvents}. */
export interface ReadEventsOptions {
  /** Return events with `seq` greater than this. @default 0 */
  since?: number;
  /** At most this many events, 1–10000. @default 1000 */
  limit?: number;
}

const KIND = /^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$/;

/** `K` itself unless it is a record type: such a kind must take its typed overload. */
type OtherKind<K extends string> = K & (K extends RecordType ? never : unknown);

/** Refuses a record type's body that does not match its schema. */
function checkBody(kind: string, body: unknown, text: string): void {
  if (!isRecordType(kind)) return;
  const parsed = recordDataSchema(kind).safeParse(body);
  if (parsed.success) return;
  const got = text.length > 200 ? `${text.slice(0, 200)}…` : text;
  throw new KlbrError(
    "invalid_input",
    `cannot append record ${kind}: ${describeIssues(parsed.error)} (got ${got})`,
  );
}

function encodeBody(kind: string, body: unknown): string {
  let text: string | undefined;
  try {
    text = JSON.stringify(body);
  } catch (error) {
    throw new KlbrError("invalid_input", `cannot append event ${kind}: body is not JSON`, {
      cause: error,
    });
  }
  if (text === undefined) {
    throw new KlbrError(
      "invalid_input",
      `cannot append event ${kind}: body is not JSON (got ${typeof body})`,
    );
  }
  return text;
}

/**
 * Appends one event inside the caller's open transaction and returns its sequence number; for
 * writer modules that record a row and its event together.
 *
 * @throws {KlbrError} `not_found` when the session does not exist; `invalid_input` for a
 *   malformed kind, a body that is not JSON, or a record type's body that does not match its
 *   schema ("cannot append record <type>: <field>: <problem> (got <body>)").
 */
export function insertEvent<T extends RecordType>(
  store: Store,
  session: string,
  type: T,
  body: RecordInput<T>,
): number;
/** Appends an event of a kind outside the record union; its body is any JSON value. */
export function insertEvent<K extends string>(
  store: Store,
  session: string,
  kind: OtherKind<K>,
  body: unknown,
): number;
export function insertEvent(store: Store, session: string, kind: string, body: unknown): number {
  assert(store.inTransaction, "insertEvent runs inside the writer's transaction");
  const text = checkedText(kind, body);
  const seq = allocateSeq(store, session);
  writeEvent(store, session, { seq, kind, at: store.clock(), body: text });
  return seq;
}

/**
 * Appends one record at a sequence number the caller took with `allocateSeqs` (`sessions.ts`)
 * in the same transaction: for a writer that numbers a batch of records with one bump. Every
 * number taken must get its record before the transaction commits, or the log has a gap.
 *
 * @throws {KlbrError} `invalid_input` for a body that does not match its record type's schema.
 * @example
 * ```ts
 * const first = allocateSeqs(store, "default", bodies.length);
 * bodies.forEach((body, i) => insertEventAt(store, "default", first + i, "input.admitted", body));
 * ```
 */
export function insertEventAt<T extends RecordType>(
  store: Store,
  session: string,
  seq: number,
  type: T,
  body: RecordInput<T>,
): void {
  assert(store.inTransaction, "insertEventAt runs inside the writer's transaction");
  const text = checkedText(type, body);
  writeEvent(store, session, { seq, kind: type, at: store.clock(), body: text });
}

/** Inserts one checked record and notes it with the store, so its commit announces it. */
function writeEvent(store: Store, session: string, record: StoredRecord): void {
  store.statement("INSERT INTO events (session_id, seq, kind, at, body) VALUES (?, ?, ?, ?, ?)")
    .run(session, record.seq, record.kind, record.at, record.body);
  store.recordWritten(session, record);
}

/** The JSON text of an event's body, after its kind and its record type's schema are checked. */
function checkedText(kind: string, body: unknown): string {
  if (!KIND.test(kind)) {
    throw new KlbrError(
      "invalid_input",
      `cannot append event: kind must be dotted lowercase words (got ${JSON.stringify(kind)})`,
    );
  }
  const text = encodeBody(kind, body);
  checkBody(kind, body, text);
  return text;
}

/**
 * Appends one event to `session`'s log and returns its sequence number.
 *
 * When it returns the event is committed with the next number of the session; a refused body
 * writes nothing. Proven by "`appendEvent()` numbers a session's events 1, 2, 3 without gaps"
 * and "`appendEvent()` refuses a record body that does not match its type and writes nothing".
 *
 * @throws {KlbrError} `not_found` when the session does not exist; `invalid_input` for a
 *   malformed kind, a body that is not JSON, or a record type's body that does not match its
 *   schema ("cannot append record <type>: <field>: <problem> (got <body>)").
 * @example
 * ```ts
 * const seq = appendEvent(store, "default", "session.stalled", {
 *   failures: 6,
 *   message: "gave up retrying after 6 failed attempts; the inputs stay pending",
 * });
 * ```
 */
export function appendEvent<T extends RecordType>(
  store: Store,
  session: string,
  type: T,
  body: RecordInput<T>,
): number;
/** Appends an event of a kind outside the record union; its body is any JSON value. */
export function appendEvent<K extends string>(
  store: Store,
  session: string,
  kind: OtherKind<K>,
  body: unknown,
): number;
export function appendEvent(store: Store, session: string, kind: string, body: unknown): number {
  checkSessionId(session);
  return store.transaction(() => insertEvent(store, session, kind, body));
}

/** One durable record with its body as the JSON text the log holds, unparsed. */
export type EventText = StoredRecord;

/**
 * Returns `session`'s events with `seq > since`, in sequence order, at most `limit` of them.
 *
 * @throws {KlbrError} `invalid_input` for a negative `since` or a `limit` outside 1–10000.
 */
export function readEvents(
  store: Store,
  session: string,
  options: ReadEventsOptions = {},
): EventRecord[] {
  return readEventTexts(store, session, options).map((text) => parsedEvent(session, text));
}

/** The record of `session` that `text` holds, its body parsed. */
function parsedEvent(session: string, text: EventText): EventRecord {
  return { session, ...text, body: JSON.parse(text.body) };
}

/**
 * Returns what {@linkcode readEvents} returns with each body left as its stored JSON text: for
 * a reader that passes bodies on as JSON (a lane catch-up) and need not parse them.
 *
 * @throws {KlbrError} `invalid_input` for a negative `since` or a `limit` outside 1–10000.
 * @example
 * ```ts
 * const page = readEventTexts(store, "default", { since: 0, limit: 1000 });
 * ```
 */
export function readEventTexts(
  store: Store,
  session: string,
  options: ReadEventsOptions = {},
): EventText[] {
  const { since = 0, limit = 1000 } = options;
  if (!Number.isSafeInteger(since) || since < 0) {
    throw new KlbrError(
      "invalid_input",
      `cannot read events: since must be an integer >= 0 (got ${since})`,
    );
  }
  checkLimit(limit, { action: "read events", max: 10_000 });
  return store.statement(
    "SELECT seq, kind, at, body FROM events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?",
  ).all(session, since, limit) as unknown as EventText[];
}

/**
 * A query's `FROM … WHERE session_id = ?` for records of `kinds`: through the index of the rare
 * record types (`RARE_KINDS`) when each of them is one (SQLite would rather walk the log in seq
 * order, so the index is named), else the log itself.
 */
function eventsOfKinds(kinds: readonly string[]): string {
  const rare = kinds.every((kind) => (RARE_KINDS as readonly string[]).includes(kind));
  return rare
    ? `events INDEXED BY events_rare_kinds WHERE ${RARE_KINDS_TERM} AND session_id = ?`
    : "events WHERE session_id = ?";
}

/**
 * Returns a session's events of one kind, oldest first, at most `limit` (default 10,000). A
 * rare kind (`RARE_KINDS`) is found through its index; any other is looked for in the log.
 */
export function readEventsOfKind(
  store: Store,
  session: string,
  kind: string,
  limit = 10_000,
): EventRecord[] {
  const texts = store.statement(
    `SELECT seq, kind, at, body FROM ${eventsOfKinds([kind])} AND kind = ? ORDER BY seq LIMIT ?`,
  ).all(session, kind, limit) as unknown as EventText[];
  return texts.map((text) => parsedEvent(session, text));
}

/**
 * Counts `session`'s events of `kind` after `since` whose body names `frameId` as its
 * `frame_id`: e.g. the sends a turn made since it started.
 *
 * @example
 * ```ts
 * countFrameEvents(store, "default", "send", "fr_01…", startedSeq); // 0: nothing was said
 * ```
 */
export function countFrameEvents(
  store: Store,
  session: string,
  kind: string,
  frameId: string,
  since: number,
): number {
  const row = store.statement(
    "SELECT COUNT(*) AS n FROM events WHERE session_id = ? AND seq > ? AND kind = ? " +
      "AND json_extract(body, '$.frame_id') = ?",
  ).get(session, since, kind, frameId) as { n: number };
  return row.n;
}

/**
 * Returns `session`'s newest event whose kind is one of `kinds`, or `undefined`: e.g. whether
 * the last word on the model was a failure or a recovery. Rare kinds only (`RARE_KINDS`) are
 * found through their index; with any other the log is read back from its end until one is met.
 */
export function lastEventOfKinds(
  store: Store,
  session: string,
  kinds: readonly string[],
): EventRecord | undefined {
  const marks = kinds.map(() => "?").join(", ");
  const row = store.statement(
    `SELECT seq, kind, at, body FROM ${eventsOfKinds(kinds)} AND kind IN (${marks}) ` +
      "ORDER BY seq DESC LIMIT 1",
  ).get(session, ...kinds) as EventText | undefined;
  return row && parsedEvent(session, row);
}

/**
 * Returns `session`'s newest event of `options.kind` after seq `options.since` whose body names
 * `options.inputId` as its `input_id`, or `undefined`: e.g. the last edit recorded on an input
 * (`since` its admission).
 */
export function lastInputEvent(
  store: Store,
  session: string,
  options: { kind: string; inputId: string; since: number },
): EventRecord | undefined {
  const row = store.statement(
    "SELECT seq, kind, at, body FROM events WHERE session_id = ? AND seq > ? AND kind = ? " +
      "AND json_extract(body, '$.input_id') = ? ORDER BY seq DESC LIMIT 1",
  ).get(session, options.since, options.kind, options.inputId) as EventText | undefined;
  return row && parsedEvent(session, row);
}
