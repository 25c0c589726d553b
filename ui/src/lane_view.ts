/**
 * Sorts durable records into the four lanes the page shows — conversation, scratchpad, cells
 * and runtime events — and derives each input's and send's state from later records.
 *
 * Every record lands in exactly one lane item (a `cell.finished` inside its cell's card), so
 * a page rendering this view shows each record once. Unknown record types land in the events
 * lane, rendered generically.
 *
 * @module
 */

import type { LaneRecord } from "../../runtime/core/mod.ts";
import { any, type Data, displayText, flag, num, strings, text } from "./_fields.ts";
import { describeEvent, isSendUpdate, type Severity, shortId } from "./event_titles.ts";
import { authorName } from "./discord_names.ts";
import { applyOutboxStep, outboxId, pendingSend, type SendDelivery } from "./outbox_view.ts";

/** Where an input stands. */
export type InputDisposition =
  | { state: "pending" }
  | { state: "consumed"; frame: number | undefined; frameId: string; end: FrameEnd }
  | { state: "returned"; frame: number | undefined; frameId: string };

/** How a frame that consumed inputs has ended so far. */
export type FrameEnd = "running" | "done" | "failed";

/** An admitted input. */
export interface InputItem {
  lane: "input";
  seq: number;
  at: number;
  inputId: string;
  conversation: string;
  author: string;
  /** The author as shown: the username of a Discord author, any other author as it is. */
  authorName: string;
  text: string;
  sourceKind: string;
  clientMsgId: string | undefined;
  disposition: InputDisposition;
}

/** An explicit send to a conversation. */
export interface SendItem {
  lane: "send";
  seq: number;
  at: number;
  sendId: string;
  conversation: string;
  text: string;
  /** `delivered` for a local send; an outbox state for a remote one. */
  state: string;
  /** The outbox delivery of a Discord send; `undefined` for a local send. */
  delivery: SendDelivery | undefined;
}

/** One item of the conversation lane. */
export type ConversationItem = InputItem | SendItem;

/** One scratchpad draft. */
export interface ScratchItem {
  seq: number;
  at: number;
  text: string;
  partial: boolean;
  turn: string | undefined;
}

/** A cell's error. */
export interface CellError {
  type: string;
  message: string;
  traceback: string;
}

/** Output spooled whole to an artifact; the cell shows an excerpt. */
export interface SpooledOutput {
  id: string;
  bytes: number | undefined;
}

/** One cell, from `cell.started` and its `cell.finished`. */
export interface CellItem {
  seq: number;
  at: number;
  cellId: string;
  code: string;
  /** `interrupted` when a kernel reset came before its end. */
  state: "running" | "finished" | "interrupted";
  outcome: string | undefined;
  stdout: string;
  stderr: string;
  /** Set when the whole stdout is in an artifact and `stdout` is an excerpt. */
  stdoutArtifact: SpooledOutput | undefined;
  stderrArtifact: SpooledOutput | undefined;
  value: string | undefined;
  error: CellError | undefined;
  durationMs: number | undefined;
  wait: string | undefined;
  /** The `seq` of `cell.finished`, when it is a separate record. */
  finishedSeq: number | undefined;
  finishedAt: number | undefined;
}

/** One runtime event. */
export interface EventItem {
  seq: number;
  at: number;
  type: string;
  title: string;
  detail: string;
  severity: Severity;
  data: Data;
}

/** Every lane of a session. */
export interface LaneView {
  conversation: ConversationItem[];
  scratchpad: ScratchItem[];
  cells: CellItem[];
  events: EventItem[];
  /** Inputs by id, for the composer's disposition line. */
  inputs: Map<string, InputItem>;
  /** Local inputs by their `client_msg_id`. */
  inputsByMessage: Map<string, InputItem>;
  /** The skills revision of the latest `kernel.reset`, when one said it. */
  skillsRevision: string | undefined;
  /** The release and epoch of the latest `activation`. */
  activation: { release: string | undefined; epoch: number | undefined } | undefined;
}

function isSend(type: string): boolean {
  return type === "send" || type === "local.send";
}

function cellError(value: unknown): CellError | undefined {
  if (typeof value === "string" && value !== "") {
    return { type: "Error", message: value, traceback: "" };
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) return undefined;
  const data = value as Data;
  return {
    type: text(data, "type", "name") ?? "Error",
    message: text(data, "message") ?? displayText(data),
    traceback: text(data, "traceback") ?? "",
  };
}

function spooled(data: Data, name: string): SpooledOutput | undefined {
  const id = text(data, `${name}_artifact.id`, `result.${name}_artifact.id`);
  if (id === undefined) return undefined;
  return { id, bytes: num(data, `${name}_artifact.bytes`, `result.${name}_artifact.bytes`) };
}

function finishCell(cell: CellItem, record: LaneRecord, separate: boolean): void {
  const d = record.data;
  cell.state = "finished";
  cell.outcome = text(d, "outcome", "result.outcome") ?? "finished";
  cell.stdout = text(d, "stdout", "result.stdout") ?? "";
  cell.stderr = text(d, "stderr", "result.stderr") ?? "";
  cell.stdoutArtifact = spooled(d, "stdout");
  cell.stderrArtifact = spooled(d, "stderr");
  const value = any(d, "value", "result.value");
  cell.value = value === undefined ? undefined : displayText(value);
  cell.error = cellError(any(d, "error", "result.error"));
  cell.durationMs = num(d, "duration_ms", "result.duration_ms");
  cell.wait = text(d, "wait.reason", "result.wait.reason");
  cell.finishedSeq = separate ? record.seq : undefined;
  cell.finishedAt = record.at;
}

/** The `client_msg_id` inside a local dedupe key `local:<client>:<client_msg_id>`. */
export function localMessageId(dedupeKey: string | undefined): string | undefined {
  return dedupeKey?.match(/^local:[^:]+:(.+)$/)?.[1];
}

function inputItem(record: LaneRecord): InputItem {
  const d = record.data;
  const conversation = text(d, "conversation_id", "conversation") ?? "local:default";
  const author = text(d, "author") ?? "unknown";
  return {
    lane: "input",
    seq: record.seq,
    at: record.at,
    inputId: text(d, "input_id", "id") ?? `seq ${record.seq}`,
    conversation,
    author,
    authorName: authorName(author),
    text: displayText(any(d, "body", "text")),
    sourceKind: text(d, "source_kind", "source") ?? conversation.split(":")[0],
    clientMsgId: text(d, "client_msg_id") ?? localMessageId(text(d, "dedupe_key")),
    disposition: { state: "pending" },
  };
}

function sendItem(record: LaneRecord): SendItem {
  const d = record.data;
  const conversation = text(d, "conversation", "conversation_id") ?? "local:default";
  return {
    lane: "send",
    seq: record.seq,
    at: record.at,
    sendId: text(d, "send_id", "id") ?? `seq ${record.seq}`,
    conversation,
    text: displayText(any(d, "text", "body")),
    state: text(d, "state") ?? (conversation.startsWith("local:") ? "delivered" : "pending"),
    delivery: undefined,
  };
}

/**
 * Builds every lane from records in `seq` order.
 *
 * @example
 * ```ts
 * const view = deriveLanes(log.records());
 * view.conversation.length;
 * ```
 */
export function deriveLanes(records: readonly LaneRecord[]): LaneView {
  const view: LaneView = {
    conversation: [],
    scratchpad: [],
    cells: [],
    events: [],
    inputs: new Map(),
    inputsByMessage: new Map(),
    skillsRevision: undefined,
    activation: undefined,
  };
  const sends = new Map<string, SendItem>();
  const outbox = new Map<string, SendItem>();
  const openCells = new Map<string, CellItem>();
  const frameInputs = new Map<string, string[]>();
  for (const record of records) {
    const d = record.data;
    const type = record.type;
    if (type === "input.admitted") {
      const item = inputItem(record);
      view.conversation.push(item);
      view.inputs.set(item.inputId, item);
      if (item.clientMsgId !== undefined) view.inputsByMessage.set(item.clientMsgId, item);
      continue;
    }
    if (isSend(type)) {
      const item = sendItem(record);
      view.conversation.push(item);
      sends.set(item.sendId, item);
      continue;
    }
    if (type === "outbox.pending") {
      // One message per outbox row; a repeated pending record gets its own, and later steps
      // move the latest one.
      const item: SendItem = {
        lane: "send",
        seq: record.seq,
        at: record.at,
        ...pendingSend(record),
      };
      view.conversation.push(item);
      outbox.set(item.sendId, item);
      continue;
    }
    const outboxSend = type.startsWith("outbox.") ? outbox.get(outboxId(record) ?? "") : undefined;
    if (outboxSend?.delivery !== undefined) {
      // Rendered inside its message, like a `cell.finished` inside its cell.
      outboxSend.state = applyOutboxStep(outboxSend.delivery, record);
      continue;
    }
    if (type === "scratchpad" || type.startsWith("scratchpad.")) {
      view.scratchpad.push({
        seq: record.seq,
        at: record.at,
        text: displayText(any(d, "text", "body", "content")),
        partial: flag(d, "partial") ?? false,
        turn: text(d, "turn_id", "turn", "frame_id"),
      });
      continue;
    }
    if (type === "cell.started") {
      const cell: CellItem = {
        seq: record.seq,
        at: record.at,
        cellId: text(d, "cell_id", "cell") ?? `seq ${record.seq}`,
        code: text(d, "code") ?? "",
        state: "running",
        outcome: undefined,
        stdout: "",
        stderr: "",
        stdoutArtifact: undefined,
        stderrArtifact: undefined,
        value: undefined,
        error: undefined,
        durationMs: undefined,
        wait: undefined,
        finishedSeq: undefined,
        finishedAt: undefined,
      };
      view.cells.push(cell);
      openCells.set(cell.cellId, cell);
      continue;
    }
    if (type === "cell.finished") {
      const cellId = text(d, "cell_id", "cell") ?? `seq ${record.seq}`;
      const open = openCells.get(cellId);
      if (open !== undefined && open.finishedAt === undefined) {
        finishCell(open, record, true);
      } else {
        // No start record to join: the finish stands as its own card.
        const cell: CellItem = {
          seq: record.seq,
          at: record.at,
          cellId,
          code: text(d, "code") ?? "",
          state: "finished",
          outcome: undefined,
          stdout: "",
          stderr: "",
          stdoutArtifact: undefined,
          stderrArtifact: undefined,
          value: undefined,
          error: undefined,
          durationMs: undefined,
          wait: undefined,
          finishedSeq: undefined,
          finishedAt: undefined,
        };
        finishCell(cell, record, false);
        view.cells.push(cell);
      }
      continue;
    }
    // Everything else is a runtime event; some also move an input, a send or a cell.
    view.events.push({ seq: record.seq, at: record.at, type, data: d, ...describeEvent(record) });
    if (type.startsWith("frame.")) {
      const frameId = text(d, "frame_id") ?? "";
      const ids = strings(d, "input_ids", "inputs");
      const consumed = ids.length > 0 ? ids : frameInputs.get(frameId) ?? [];
      if (type === "frame.accepted") frameInputs.set(frameId, consumed);
      // A resumed frame keeps its inputs; only an end moves them.
      if (type === "frame.resumed") continue;
      const frame = num(d, "number", "frame_number");
      for (const id of consumed) {
        const input = view.inputs.get(id);
        if (input === undefined) continue;
        if (type === "frame.accepted") {
          input.disposition = { state: "consumed", frame, frameId, end: "running" };
          continue;
        }
        // The end of a frame only moves inputs that this frame still holds.
        if (input.disposition.state !== "consumed" || input.disposition.frameId !== frameId) {
          continue;
        }
        if (type === "frame.abandoned") {
          input.disposition = { state: "returned", frame, frameId };
        } else {
          const state = text(d, "state") ?? "done";
          input.disposition = { ...input.disposition, end: state === "done" ? "done" : "failed" };
        }
      }
    } else if (type === "kernel.reset") {
      // A kernel reset ends every cell still running in the old generation; a later
      // `cell.finished` for one of them still joins its card.
      for (const cell of openCells.values()) {
        if (cell.state === "running") cell.state = "interrupted";
      }
      view.skillsRevision = text(d, "skills_revision", "skills.revision") ?? view.skillsRevision;
    } else if (type === "activation") {
      view.activation = { release: text(d, "release_id", "release"), epoch: num(d, "epoch") };
    } else if (isSendUpdate(type, d)) {
      const send = sends.get(text(d, "send_id") ?? "");
      const state = text(d, "state") ?? type.split(".").pop();
      if (send !== undefined && state !== undefined) send.state = state;
    }
  }
  return view;
}

/** The words an input's state badge shows; never colour alone. */
export function dispositionLabel(disposition: InputDisposition): string {
  switch (disposition.state) {
    case "pending":
      return "pending";
    case "returned":
      return `pending again (frame ${disposition.frame ?? "?"} abandoned)`;
    case "consumed": {
      const base = `consumed by frame ${disposition.frame ?? shortId(disposition.frameId)}`;
      if (disposition.end === "done") return `${base} · done`;
      if (disposition.end === "failed") return `${base} · failed`;
      return base;
    }
  }
}
