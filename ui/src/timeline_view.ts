/**
 * One timeline per conversation: the owner's messages and the agent's sends in `seq` order,
 * and under the last message a turn took up, that turn's work — its reasoning and drafts,
 * its cells, the timers and jobs it set — as one block, folded once it is done.
 *
 * Built from the four lanes {@linkcode deriveLanes} makes (each record still lands in exactly
 * one item), the turns of {@linkcode deriveTurns} and the frame id each record names.
 *
 * @module
 */

import type { LaneRecord } from "../../runtime/core/mod.ts";
import type { CellItem } from "./cell_view.ts";
import { duration, tokenCount } from "./format.ts";
import { stringField } from "./json_value.ts";
import type { InputItem, LaneView, ScratchItem, SendItem } from "./lane_view.ts";
import type { TurnInfo, TurnView, UnsentDraft } from "./turn_view.ts";

/** The conversation local inputs go to. */
export const LOCAL_CONVERSATION = "local:default";

/** The prefix of the id of work that names no turn (a cell run outside one). */
export const LOOSE = "loose:";

/** How a turn stands. */
export type TurnState = "running" | "done" | "failed" | "abandoned";

/** One turn's work, shown under the message it took up. */
export interface TurnBlock {
  frameId: string;
  /** The turn's number, when its `frame.accepted` was seen. */
  number: number | undefined;
  /** The `seq` of the record that started the turn (or of its first work). */
  seq: number;
  startedAt: number | undefined;
  endedAt: number | undefined;
  state: TurnState;
  info: TurnInfo | undefined;
  /** Reasoning and drafts, in order. */
  drafts: ScratchItem[];
  cells: CellItem[];
  /** Timers and jobs the turn set: their ids and what they are, in words. */
  set: { id: string; label: string }[];
  /** The conversations the turn's inputs came from and its sends went to. */
  conversations: Set<string>;
  inputIds: string[];
}

/** One row of a conversation's timeline. */
export type TimelineRow =
  | { kind: "input"; seq: number; item: InputItem; turns: TurnBlock[] }
  | { kind: "send"; seq: number; item: SendItem }
  | { kind: "draft"; seq: number; draft: UnsentDraft }
  | { kind: "turn"; seq: number; turn: TurnBlock };

/** One conversation of the list beside the timeline. */
export interface ConversationEntry {
  id: string;
  /** How many messages (inputs and sends) the page holds of it. */
  messages: number;
  /** The `seq` of its newest message. */
  lastSeq: number;
}

/** Every conversation's timeline. */
export interface TimelineView {
  conversations: ConversationEntry[];
  rows: Map<string, TimelineRow[]>;
  turns: Map<string, TurnBlock>;
}

/** Builds the turns from the records and the lanes. */
class TurnCollector {
  readonly turns = new Map<string, TurnBlock>();
  /** The frame each record names, by seq. */
  readonly frameOfSeq = new Map<number, string>();
  #turnView: TurnView;

  constructor(records: readonly LaneRecord[], turnView: TurnView) {
    this.#turnView = turnView;
    for (const record of records) this.#add(record);
  }

  /**
   * The turn of `frameId`, made on first use. Work that names no turn is shown as work of its
   * own, so no record goes unshown.
   */
  turn(frameId: string | undefined, seq: number): TurnBlock {
    if (frameId === undefined) {
      const loose = this.turn(`${LOOSE}${seq}`, seq);
      loose.state = "done";
      return loose;
    }
    let turn = this.turns.get(frameId);
    if (turn === undefined) {
      const info = this.#turnView.turns.get(frameId);
      turn = {
        frameId,
        number: info?.number,
        seq,
        startedAt: undefined,
        endedAt: undefined,
        state: "running",
        info,
        drafts: [],
        cells: [],
        set: [],
        conversations: new Set(),
        inputIds: info?.inputIds ?? [],
      };
      this.turns.set(frameId, turn);
    }
    return turn;
  }

  #add(record: LaneRecord): void {
    const frameId = stringField(record.data, "frame_id");
    if (frameId === undefined) return;
    this.frameOfSeq.set(record.seq, frameId);
    const turn = this.turn(frameId, record.seq);
    const data = record.data;
    switch (record.type) {
      case "frame.accepted":
        turn.startedAt = record.at;
        turn.seq = Math.min(turn.seq, record.seq);
        return;
      case "frame.finished":
        turn.endedAt = record.at;
        turn.state = stringField(data, "state") === "failed" ? "failed" : "done";
        return;
      case "frame.abandoned":
        turn.endedAt = record.at;
        turn.state = "abandoned";
        return;
      case "timer.set": {
        const id = stringField(data, "timer_id") ?? `timer #${record.seq}`;
        const note = stringField(data, "note");
        turn.set.push({ id, label: `timer${note === undefined ? "" : `: ${note}`}` });
        return;
      }
      case "job.state": {
        const id = stringField(data, "job_id") ?? `job #${record.seq}`;
        if (turn.set.some((item) => item.id === id)) return;
        turn.set.push({ id, label: `job ${stringField(data, "name") ?? ""}`.trim() });
        return;
      }
    }
  }
}

function pushRow(rows: Map<string, TimelineRow[]>, conversation: string, row: TimelineRow): void {
  const list = rows.get(conversation);
  if (list === undefined) rows.set(conversation, [row]);
  else list.push(row);
}

/**
 * Builds every conversation's timeline. A turn sits under the last of its inputs the page
 * holds; a turn that took up none (a timer or a job woke it) is a row of its own at its start,
 * in the conversations it sent to, or the local one when it sent nowhere.
 *
 * @example
 * ```ts
 * const timeline = deriveTimeline(records, deriveLanes(records), deriveTurns(records));
 * timeline.rows.get("local:default");
 * ```
 */
export function deriveTimeline(
  records: readonly LaneRecord[],
  lanes: LaneView,
  turnView: TurnView,
): TimelineView {
  const collector = new TurnCollector(records, turnView);
  const { turns, frameOfSeq } = collector;
  for (const draft of lanes.scratchpad) {
    collector.turn(draft.turn ?? frameOfSeq.get(draft.seq), draft.seq).drafts.push(draft);
  }
  for (const cell of lanes.cells) {
    const frameId = frameOfSeq.get(cell.seq) ?? frameOfSeq.get(cell.finishedSeq ?? -1);
    collector.turn(frameId, cell.seq).cells.push(cell);
  }
  const rows = new Map<string, TimelineRow[]>();
  const placed = new Set<string>();
  const lastInputOf = new Map<string, string>();
  for (const item of lanes.conversation) {
    if (item.lane !== "input") continue;
    const frameId = turnView.turnOfInput.get(item.inputId);
    const d = item.disposition;
    const owner = d.state === "consumed" || d.state === "returned" ? d.frameId : frameId;
    if (owner !== undefined) lastInputOf.set(owner, item.inputId);
  }
  const byInput = new Map<string, TurnBlock[]>();
  for (const [frameId, inputId] of lastInputOf) {
    const turn = turns.get(frameId);
    if (turn === undefined) continue;
    placed.add(frameId);
    byInput.set(inputId, [...(byInput.get(inputId) ?? []), turn]);
  }
  const sentBy = new Map<string, Set<string>>();
  const shownInputs = new Set<string>();
  for (const item of lanes.conversation) {
    if (item.lane === "input") {
      shownInputs.add(item.inputId);
      const attached = byInput.get(item.inputId) ?? [];
      for (const turn of attached) turn.conversations.add(item.conversation);
      pushRow(rows, item.conversation, { kind: "input", seq: item.seq, item, turns: attached });
      continue;
    }
    pushRow(rows, item.conversation, { kind: "send", seq: item.seq, item });
    const frameId = frameOfSeq.get(item.seq);
    if (frameId !== undefined) {
      sentBy.set(frameId, (sentBy.get(frameId) ?? new Set()).add(item.conversation));
    }
  }
  for (const turn of turns.values()) {
    if (placed.has(turn.frameId)) continue;
    // It took up inputs the page does not hold (another conversation's page brought it along,
    // or they were trimmed): it belongs under them, not on a row of its own.
    const took = turnView.turns.get(turn.frameId)?.inputIds ?? [];
    if (took.length > 0 && !took.some((id) => lanes.inputs.has(id))) continue;
    // A search hides its message: only its drafts or cells that match show it, not what it set.
    const hidden = took.length > 0 && !took.some((id) => shownInputs.has(id));
    if (turn.drafts.length === 0 && turn.cells.length === 0 && (hidden || turn.set.length === 0)) {
      continue;
    }
    const to = sentBy.get(turn.frameId) ?? new Set([LOCAL_CONVERSATION]);
    for (const conversation of to) {
      turn.conversations.add(conversation);
      pushRow(rows, conversation, { kind: "turn", seq: turn.seq, turn });
    }
  }
  // An unsent draft is shown when its scratchpad item is (a search may hide it).
  const shownDrafts = new Set(lanes.scratchpad.map((draft) => draft.seq));
  for (const [inputId, draft] of turnView.drafts) {
    const input = lanes.inputs.get(inputId);
    if (input !== undefined && shownDrafts.has(draft.seq)) {
      pushRow(rows, input.conversation, { kind: "draft", seq: draft.seq, draft });
    }
  }
  const conversations: ConversationEntry[] = [];
  for (const [id, list] of rows) {
    list.sort((a, b) => a.seq - b.seq);
    const messages = list.filter((row) => row.kind === "input" || row.kind === "send");
    conversations.push({ id, messages: messages.length, lastSeq: list.at(-1)?.seq ?? 0 });
  }
  if (!rows.has(LOCAL_CONVERSATION)) {
    conversations.push({ id: LOCAL_CONVERSATION, messages: 0, lastSeq: 0 });
  }
  conversations.sort((a, b) =>
    a.id === LOCAL_CONVERSATION ? -1 : b.id === LOCAL_CONVERSATION ? 1 : b.lastSeq - a.lastSeq
  );
  return { conversations, rows, turns };
}

/** How long a turn worked, in ms, when its start and end (or `now`) are known. */
export function turnWorked(turn: TurnBlock, now: number): number | undefined {
  if (turn.startedAt === undefined) return undefined;
  return Math.max(0, (turn.endedAt ?? now) - turn.startedAt);
}

/**
 * The one line a turn folds to: how long it worked, its cells and its tokens.
 *
 * @example
 * ```ts
 * turnSummary(turn, Date.now()); // "worked 14 s · 3 cells · 2,048 tokens"
 * ```
 */
export function turnSummary(turn: TurnBlock, now: number): string {
  const worked = turnWorked(turn, now);
  const parts: string[] = [];
  const verb = turn.state === "running"
    ? "working"
    : turn.state === "abandoned"
    ? "gave the message back"
    : turn.state === "failed"
    ? "failed"
    : "worked";
  parts.push(worked === undefined ? verb : `${verb} ${duration(worked)}`);
  const cells = turn.cells.length;
  if (cells > 0) parts.push(`${cells} ${cells === 1 ? "cell" : "cells"}`);
  const u = turn.info?.usage;
  if (u !== undefined && (u.promptTokens !== undefined || u.completionTokens !== undefined)) {
    parts.push(`${tokenCount((u.promptTokens ?? 0) + (u.completionTokens ?? 0))} tokens`);
  }
  if (turn.set.length > 0) {
    parts.push(
      `set ${turn.set.length} ${turn.set.length === 1 ? "timer or job" : "timers or jobs"}`,
    );
  }
  return parts.join(" · ");
}

/**
 * The rows of a conversation the page holds whole: those at or after `held.conversation`, the
 * lowest seq from which every record of the conversation is held. Rows below it came along with
 * another conversation's page and would show a gap as if it were the conversation's start. While
 * the page does not hold the session from its start (`held.session` above 1), a turn whose
 * `frame.accepted` it lacks began before the oldest record held: its inputs are unknown, so it
 * is no row of its own either.
 *
 * @example
 * ```ts
 * heldRows(timeline.rows.get(id), {
 *   conversation: client.log.completeFrom(id),
 *   session: client.log.completeFrom(),
 * });
 * ```
 */
export function heldRows(
  rows: readonly TimelineRow[] | undefined,
  held: { conversation: number; session: number },
): readonly TimelineRow[] {
  if (rows === undefined) return [];
  const begunBefore = (row: TimelineRow) =>
    held.session > 1 && row.kind === "turn" && row.turn.number === undefined &&
    !row.turn.frameId.startsWith(LOOSE);
  return rows.filter((row) => row.seq >= held.conversation && !begunBefore(row));
}
