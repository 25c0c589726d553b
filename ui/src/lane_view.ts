/**
 * Sorts durable records into the four lanes the page shows — conversation, scratchpad, cells
 * and runtime events — and derives each input's and send's state from later records.
 *
 * Every record lands in exactly one lane item (a `cell.finished` inside its cell's card), so
 * a page rendering this view shows each record once. Records are read through the shared
 * schemas of `runtime/core/`; an unknown type, or a body that does not match its type, lands in
 * the events lane as `unknown record <type>`, never dropped.
 *
 * @module
 */

import { type AttachedFile, attachedFiles } from "./attachments.ts";
import {
  type KnownRecord,
  type LaneRecord,
  readRecord,
  type RecordData,
} from "../../runtime/core/mod.ts";
import { type CellItem, finishCell, newCell, type Place } from "./cell_view.ts";
import { displayText } from "./json_value.ts";
import { describeReading, type Severity, shortId } from "./event_titles.ts";
import { authorName } from "./discord_names.ts";
import {
  applyOutboxStep,
  type OutboxStepRecord,
  pendingSend,
  type SendDelivery,
} from "./outbox_view.ts";

/** Where an input stands. */
export type InputDisposition =
  | { state: "pending" }
  | { state: "consumed"; frame: number | undefined; frameId: string; end: FrameEnd }
  | { state: "returned"; frame: number | undefined; frameId: string }
  | { state: "dismissed"; how: "ignored" | "expired"; reason: string };

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
  /** The files it carries (a composer's attachments, a Discord message's). */
  attachments: AttachedFile[];
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
  /** True for a reply's reasoning, shown folded; false for its text. */
  reasoning: boolean;
}

/** One runtime event. */
export interface EventItem {
  seq: number;
  at: number;
  type: string;
  title: string;
  detail: string;
  severity: Severity;
  data: LaneRecord["data"];
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

function inputItem(place: Place, d: RecordData<"input.admitted">): InputItem {
  return {
    lane: "input",
    ...place,
    inputId: d.input_id,
    conversation: d.conversation_id,
    author: d.author,
    authorName: authorName(d.author),
    text: displayText(d.body),
    attachments: attachedFiles(d.body),
    sourceKind: d.source_kind,
    clientMsgId: d.client_msg_id,
    disposition: { state: "pending" },
  };
}

type FrameRecord = Extract<KnownRecord, { type: `frame.${string}` }>;

/** Builds a {@linkcode LaneView} one record at a time, in `seq` order. */
class LaneBuilder {
  readonly view: LaneView = {
    conversation: [],
    scratchpad: [],
    cells: [],
    events: [],
    inputs: new Map(),
    inputsByMessage: new Map(),
    skillsRevision: undefined,
    activation: undefined,
  };
  #outbox = new Map<string, SendItem>();
  #openCells = new Map<string, CellItem>();

  add(record: LaneRecord): void {
    const read = readRecord(record.type, record.data);
    const place = { seq: record.seq, at: record.at };
    if (read.ok && this.#inLane(place, read.record)) return;
    // Everything else is a runtime event; some also move an input or a cell.
    this.view.events.push({
      ...place,
      type: record.type,
      data: record.data,
      ...describeReading(read),
    });
    if (read.ok) this.#effects(read.record);
  }

  /** Puts a record into its lane item; `false` when it belongs in the events lane. */
  #inLane(place: Place, r: KnownRecord): boolean {
    switch (r.type) {
      case "input.admitted": {
        const item = inputItem(place, r.data);
        this.view.conversation.push(item);
        this.view.inputs.set(item.inputId, item);
        if (item.clientMsgId !== undefined) this.view.inputsByMessage.set(item.clientMsgId, item);
        return true;
      }
      case "send": {
        const d = r.data;
        this.view.conversation.push({
          lane: "send",
          ...place,
          sendId: d.send_id,
          conversation: d.conversation,
          text: d.text,
          state: d.state,
          delivery: undefined,
        });
        return true;
      }
      case "outbox.pending": {
        // One message per outbox row; a repeated pending record gets its own, and later steps
        // move the latest one.
        const item: SendItem = { lane: "send", ...place, ...pendingSend(r.data) };
        this.view.conversation.push(item);
        this.#outbox.set(item.sendId, item);
        return true;
      }
      case "scratchpad":
      case "reasoning":
        this.view.scratchpad.push({
          ...place,
          text: r.data.text,
          partial: r.data.partial ?? false,
          turn: r.data.frame_id,
          reasoning: r.type === "reasoning",
        });
        return true;
      case "cell.started": {
        const cell = newCell(place, r.data.cell_id, r.data.code);
        this.view.cells.push(cell);
        this.#openCells.set(cell.cellId, cell);
        return true;
      }
      case "cell.finished":
        this.#cellFinished(place, r.data);
        return true;
      case "outbox.attempting":
      case "outbox.confirmed":
      case "outbox.failed":
      case "outbox.unknown":
      case "outbox.rate_limited":
        return this.#outboxStep(place, r);
    }
    return false;
  }

  #cellFinished(place: Place, d: RecordData<"cell.finished">): void {
    const open = this.#openCells.get(d.cell_id);
    if (open !== undefined && open.finishedAt === undefined) {
      finishCell(open, place, d, true);
      return;
    }
    // No start record to join: the finish stands as its own card.
    const cell = newCell(place, d.cell_id, "");
    finishCell(cell, place, d, false);
    this.view.cells.push(cell);
  }

  /** Moves the message of a step's outbox row, rendered inside it like a `cell.finished`. */
  #outboxStep(place: Place, record: OutboxStepRecord): boolean {
    const send = this.#outbox.get(record.data.outbox_id);
    if (send?.delivery === undefined) return false;
    send.state = applyOutboxStep(send.delivery, { ...place, record });
    return true;
  }

  #effects(r: KnownRecord): void {
    switch (r.type) {
      case "frame.accepted":
      case "frame.finished":
      case "frame.abandoned":
        return this.#frameMoves(r);
      case "kernel.reset":
        // A kernel reset ends every cell still running in the old generation; a later
        // `cell.finished` for one of them still joins its card.
        for (const cell of this.#openCells.values()) {
          if (cell.state === "running") cell.state = "interrupted";
        }
        this.view.skillsRevision = r.data.skills_revision;
        return;
      case "activation":
        this.view.activation = { release: r.data.release_id, epoch: r.data.epoch };
        return;
      case "input.ignored":
      case "input.expired": {
        // An input that ends without a frame: a plan left it, or it waited past its age.
        const input = this.view.inputs.get(r.data.input_id);
        if (input === undefined) return;
        const how = r.type === "input.ignored" ? "ignored" : "expired";
        input.disposition = { state: "dismissed", how, reason: r.data.reason };
        return;
      }
    }
  }

  /** A frame's acceptance consumes its inputs; its end moves those it still holds. */
  #frameMoves(r: Exclude<FrameRecord, { type: "frame.resumed" }>): void {
    const { frame_id: frameId, number: frame } = r.data;
    for (const id of r.data.input_ids) {
      const input = this.view.inputs.get(id);
      if (input === undefined) continue;
      if (r.type === "frame.accepted") {
        input.disposition = { state: "consumed", frame, frameId, end: "running" };
        continue;
      }
      // The end of a frame only moves inputs that this frame still holds.
      if (input.disposition.state !== "consumed" || input.disposition.frameId !== frameId) {
        continue;
      }
      input.disposition = r.type === "frame.abandoned"
        ? { state: "returned", frame, frameId }
        : { ...input.disposition, end: r.data.state };
    }
  }
}

/**
 * Builds every lane from records in `seq` order. Each record is read through the shared
 * record schemas; one of an unknown type, or whose body does not match its type, is shown in
 * the events lane as `unknown record <type>`.
 *
 * @example
 * ```ts
 * const view = deriveLanes(log.records());
 * view.conversation.length;
 * ```
 */
export function deriveLanes(records: readonly LaneRecord[]): LaneView {
  const builder = new LaneBuilder();
  for (const record of records) builder.add(record);
  return builder.view;
}

/**
 * The words an input's state badge shows; never colour alone. A frame is a "turn" here; its
 * technical id goes in the badge's `title`.
 */
export function dispositionLabel(disposition: InputDisposition): string {
  switch (disposition.state) {
    case "pending":
      return "pending";
    case "returned":
      return `pending again (turn ${disposition.frame ?? "?"} gave it back)`;
    case "dismissed":
      return `${disposition.how}${disposition.reason ? `: ${disposition.reason}` : ""}`;
    case "consumed": {
      const base = `taken up by turn ${disposition.frame ?? shortId(disposition.frameId)}`;
      return disposition.end === "running" ? base : `${base} · ${disposition.end}`;
    }
  }
}
