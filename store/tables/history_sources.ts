/**
 * Reads, never writes: the exact source text behind a history ref, and the lookups a summary
 * step needs (the cells of its tool calls, the sends and Discord rows of those cells). Each
 * lookup is served by an index, so its cost follows the step, not the history.
 *
 * @module
 */

import { KlbrError } from "../../runtime/core/mod.ts";
import { getCell } from "./cells.ts";
import { getSummary } from "./context_summaries.ts";
import { readEvents } from "./events.ts";
import { getInput } from "./inputs.ts";
import { getOutbox, type OutboxState } from "./outbox.ts";
import { getProviderItem } from "./provider_items.ts";
import type { Store } from "../store.ts";

/** The kinds a history ref names. */
export const REF_KINDS = [
  "input",
  "send",
  "outbox",
  "item",
  "cell",
  "output",
  "summary",
  "artifact",
] as const;

/** A parsed history ref. */
export interface HistoryRef {
  kind: (typeof REF_KINDS)[number];
  key: string;
}

/** The exact text behind a ref, with what else is known about it. */
export interface HistorySource {
  ref: string;
  kind: HistoryRef["kind"];
  text: string;
  meta: Record<string, unknown>;
}

const REF = /^(input|send|outbox|item|cell|output|summary|artifact):([A-Za-z0-9_-]{1,128})$/;

/**
 * Parses a history ref such as `input:in_01…` or `item:42`.
 *
 * @throws {KlbrError} `invalid_input` for anything else.
 */
export function parseHistoryRef(ref: string): HistoryRef {
  const match = typeof ref === "string" ? REF.exec(ref) : null;
  if (match === null) {
    throw new KlbrError(
      "invalid_input",
      `cannot read history: an id is <kind>:<key> with kind ${REF_KINDS.join(", ")} (got ${
        JSON.stringify(ref)
      })`,
    );
  }
  return { kind: match[1] as HistoryRef["kind"], key: match[2] };
}

/** The text a finished cell's output is indexed and read as (the same fields as the index). */
export function cellOutputText(result: unknown): string {
  const r = (result ?? {}) as Record<string, unknown>;
  const error = (r.error ?? {}) as Record<string, unknown>;
  return [r.stdout, r.stderr, r.value, error.type, error.message, r.interrupted]
    .filter((part) => part !== undefined && part !== null)
    .map(String).join("\n");
}

/**
 * The text of an input's body, as a turn's opening shows it and `history.read` reads it (so an
 * offset named under a cut opening reads on from the cut): a string body as it is; a body with
 * a `text` (a Discord message) as that text, then its details as JSON; any other as JSON.
 */
export function inputText(body: unknown): string {
  if (typeof body === "string") return body;
  const { text, ...details } = (body ?? {}) as { text?: unknown };
  return typeof text === "string" ? `${text}\n${JSON.stringify(details)}` : JSON.stringify(body);
}

function notFound(ref: string): never {
  throw new KlbrError("not_found", `cannot read history: nothing is recorded as ${ref}`);
}

function positiveInt(ref: string, key: string): number {
  const n = Number(key);
  if (!Number.isSafeInteger(n) || n < 1) notFound(ref);
  return n;
}

/** A source's text and what is known about it, read by one kind's reader. */
type SourceRead = [text: string, meta: Record<string, unknown>];

type Reader = (store: Store, session: string, ref: string, key: string) => SourceRead;

function readInput(store: Store, session: string, ref: string, key: string): SourceRead {
  const input = getInput(store, key);
  if (input?.session !== session) notFound(ref);
  return [inputText(input.body), {
    author: input.author,
    conversation: input.conversationId,
    source_kind: input.sourceKind,
    received_at: input.receivedAt,
    status: input.status,
    frame_id: input.frameId,
  }];
}

function readSend(store: Store, session: string, ref: string, key: string): SourceRead {
  const seq = positiveInt(ref, key);
  const event = readEvents(store, session, { since: seq - 1, limit: 1 })[0];
  if (event?.seq !== seq || event.kind !== "send") notFound(ref);
  const body = event.body as Record<string, unknown>;
  return [String(body.text ?? ""), {
    conversation: body.conversation,
    state: body.state ?? "delivered",
    send_id: body.send_id,
    frame_id: body.frame_id,
    cell_id: body.cell_id,
    at: event.at,
  }];
}

function readOutbox(store: Store, session: string, ref: string, key: string): SourceRead {
  const row = getOutbox(store, key);
  if (row?.session !== session) notFound(ref);
  return [row.body, {
    conversation: row.conversation,
    state: row.state,
    remote_id: row.remoteId,
    error: row.error,
    attempts: row.attempts,
    cell_id: row.cellId,
  }];
}

function readItem(store: Store, session: string, ref: string, key: string): SourceRead {
  const item = getProviderItem(store, session, positiveInt(ref, key)) ?? notFound(ref);
  const content = item.message.content;
  return [typeof content === "string" ? content : "", {
    role: item.role,
    frame_id: item.frameId,
    tool_call_id: item.toolCallId,
    tool_calls: item.message.tool_calls ?? null,
    at: item.at,
  }];
}

/** A cell's code (`cell:`) or its finished output (`output:`). */
function cellReader(part: "code" | "output"): Reader {
  return (store, session, ref, key) => {
    const cell = getCell(store, key);
    if (cell?.session !== session) notFound(ref);
    if (part === "output" && cell.outcome === null) notFound(ref);
    const result = (cell.result ?? {}) as Record<string, unknown>;
    return [part === "code" ? cell.code : cellOutputText(cell.result), {
      outcome: cell.outcome,
      frame_id: cell.frameId,
      tool_call_id: cell.toolCallId,
      stdout_artifact: result.stdout_artifact ?? null,
      stderr_artifact: result.stderr_artifact ?? null,
      started_at: cell.startedAt,
      ended_at: cell.endedAt,
    }];
  };
}

function readSummary(store: Store, session: string, ref: string, key: string): SourceRead {
  const summary = getSummary(store, session, positiveInt(ref, key)) ?? notFound(ref);
  return [summary.text, {
    covers_to_idx: summary.coversToIdx,
    source: summary.source,
    at: summary.at,
  }];
}

function refuseArtifact(_store: Store, _session: string, ref: string): SourceRead {
  throw new KlbrError(
    "invalid_input",
    `cannot read history: ${ref} is a file; read it with readArtifact`,
  );
}

const READERS: Record<HistoryRef["kind"], Reader> = {
  input: readInput,
  send: readSend,
  outbox: readOutbox,
  item: readItem,
  cell: cellReader("code"),
  output: cellReader("output"),
  summary: readSummary,
  artifact: refuseArtifact,
};

/**
 * Returns the exact source text of a ref of `session` (an artifact's bytes are read from its
 * file by the caller; here it is refused).
 *
 * @throws {KlbrError} `invalid_input` for a malformed ref or an artifact ref; `not_found` when
 * the session has nothing under it.
 */
export function readHistorySource(store: Store, session: string, ref: string): HistorySource {
  const { kind, key } = parseHistoryRef(ref);
  const [text, meta] = READERS[kind](store, session, ref, key);
  return { ref, kind, text, meta };
}

/** A cell as a summary step lists it. */
export interface StepCell {
  id: string;
  toolCallId: string;
  code: string;
  outcome: string | null;
  /**
   * What it showed, bounded: its error (type and message) or why it was cut short, its value,
   * the head and tail of its stdout and the head of its stderr, each at most a few hundred
   * characters; `""` for a cell that showed nothing.
   */
  output: string;
}

/** Characters of each part of a cell's output a summary step reads at most. */
const PART = 300;

/** A text field of a cell's result, cut in SQL to its head and tail when long. */
function part(path: string): string {
  const text = `COALESCE(json_extract(result, '${path}'), '')`;
  return `CASE WHEN length(${text}) <= ${2 * PART} THEN ${text}
    ELSE substr(${text}, 1, ${PART}) || ' … ' || substr(${text}, -${PART}) END`;
}

/** Returns the cells of `session` that ran the given tool calls. */
export function cellsOfToolCalls(
  store: Store,
  session: string,
  toolCallIds: readonly string[],
): StepCell[] {
  if (toolCallIds.length === 0) return [];
  const rows = store.statement(
    `SELECT id, tool_call_id, code, outcome, ${part("$.error.type")} AS error_type,
       ${part("$.error.message")} AS error, ${part("$.interrupted")} AS interrupted,
       ${part("$.value")} AS value, ${part("$.stdout")} AS stdout, ${part("$.stderr")} AS stderr
     FROM cells WHERE session_id = ? AND tool_call_id IN (SELECT value FROM json_each(?))`,
  ).all(session, JSON.stringify(toolCallIds)) as unknown as CellRow[];
  return rows.map((row) => ({
    id: row.id,
    toolCallId: row.tool_call_id,
    code: row.code,
    outcome: row.outcome,
    output: [
      row.error_type && `${row.error_type}: ${row.error}`,
      row.interrupted && `cut short: ${row.interrupted}`,
      row.value && `value: ${row.value}`,
      row.stdout && `stdout: ${row.stdout}`,
      row.stderr && `stderr: ${row.stderr}`,
    ].filter(Boolean).join(" | "),
  }));
}

interface CellRow {
  id: string;
  tool_call_id: string;
  code: string;
  outcome: string | null;
  error_type: string;
  error: string;
  interrupted: string;
  value: string;
  stdout: string;
  stderr: string;
}

/** A message a cell delivered: a local send or a Discord outbox row with its state. */
export interface StepSend {
  ref: string;
  cellId: string;
  conversation: string;
  text: string;
  /** `delivered` for a local send; the outbox row's state for Discord. */
  state: "delivered" | OutboxState;
}

/** Returns the local sends of the cells (cell by cell, by seq), then their Discord outbox rows. */
export function sendsOfCells(
  store: Store,
  session: string,
  cellIds: readonly string[],
): StepSend[] {
  if (cellIds.length === 0) return [];
  const ids = JSON.stringify(cellIds);
  // One lookup per cell: the planner uses the expression index for an equality, not for IN.
  const bySend = store.statement(
    `SELECT seq, body FROM events WHERE kind = 'send' AND json_extract(body, '$.cell_id') = ?
       AND session_id = ? ORDER BY seq`,
  );
  const local = cellIds.flatMap((cellId) =>
    bySend.all(cellId, session) as { seq: number; body: string }[]
  ).map((row): StepSend => {
    const body = JSON.parse(row.body) as Record<string, unknown>;
    return {
      ref: `send:${row.seq}`,
      cellId: String(body.cell_id),
      conversation: String(body.conversation ?? ""),
      text: String(body.text ?? ""),
      state: "delivered",
    };
  });
  const discord = (store.statement(
    `SELECT id, cell_id, conversation, body, state, created_at FROM outbox
     WHERE cell_id IN (SELECT value FROM json_each(?)) AND session_id = ? AND kind = 'message'
     ORDER BY created_at, id`,
  ).all(ids, session) as {
    id: string;
    cell_id: string;
    conversation: string;
    body: string;
    state: OutboxState;
    created_at: number;
  }[]).map((row): StepSend => ({
    ref: `outbox:${row.id}`,
    cellId: row.cell_id,
    conversation: row.conversation,
    text: row.body,
    state: row.state,
  }));
  return [...local, ...discord];
}

/** Returns the current state of Discord outbox rows by id (for refreshing a summary). */
export function outboxStates(store: Store, ids: readonly string[]): Map<string, OutboxState> {
  const states = new Map<string, OutboxState>();
  for (const id of ids) {
    const row = getOutbox(store, id);
    if (row !== undefined) states.set(id, row.state);
  }
  return states;
}
