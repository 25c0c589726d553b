/**
 * What each turn did and what went wrong, read from the records a turn leaves: the model and
 * route of its replies with their token counts, a failed or stalled model shown against the
 * inputs waiting on it (cleared once the model answers), and a draft the turn ended with
 * without sending it.
 *
 * Failure records are read field by field and tolerate fields this page does not know; the
 * ones it uses when a writer gives them are `url`, `attempt`, `of`, `next_in_ms` (or
 * `delay_ms`) and `config_path`. `model.failing` (typed) says all of them; `model.recovered`
 * clears the line.
 *
 * @module
 */

import { type LaneRecord, readRecord } from "../../runtime/core/mod.ts";
import { isObject, stringField } from "./json_value.ts";

/** Token counts of a turn; a count no reply reported is `undefined`, never 0. */
export interface TurnUsage {
  promptTokens: number | undefined;
  completionTokens: number | undefined;
  cacheReadTokens: number | undefined;
  cacheWriteTokens: number | undefined;
}

/** Why the inputs of a turn are still waiting on the model. */
export interface ModelTrouble {
  /** The failure in words, from the record. */
  reason: string;
  /** Which failed attempt this is, counted from 1. */
  attempt: number;
  /** How many attempts are made before the session stalls, when a record said. */
  of: number | undefined;
  /** When the next attempt is due (ms since the epoch), when a record said. */
  nextAt: number | undefined;
  /** The address of the model that did not answer, when a record said. */
  url: string | undefined;
  /** The configuration file to edit, when a record said. */
  configPath: string | undefined;
  /** Set once the session gave up retrying by itself. */
  stalled: boolean;
  at: number;
}

/** One turn (one frame's work), as the conversation shows it. */
export interface TurnInfo {
  frameId: string;
  number: number;
  inputIds: string[];
  routes: string[];
  models: string[];
  replies: number;
  usage: TurnUsage;
  /** Whether the turn reached a conversation (a local send or a Discord message). */
  sent: boolean;
  /** The last complete draft of the turn. */
  lastDraft: { seq: number; at: number; text: string } | undefined;
  /** Set when the turn ended (`turn.ended` or the frame's end). */
  ended: boolean;
  /** The step limit the turn stopped at, when it ran out of steps. */
  stepLimit: number | undefined;
}

/** A draft a turn ended with and never sent. */
export interface UnsentDraft {
  /** The `seq` of the scratchpad record (shown in the scratchpad lane). */
  seq: number;
  at: number;
  text: string;
  frameId: string;
  turn: number;
}

/** Every turn of a session and what waits on the model. */
export interface TurnView {
  turns: Map<string, TurnInfo>;
  /** The turn that consumed an input, last one wins. */
  turnOfInput: Map<string, string>;
  /** Model trouble by the id of the input that waits on it. */
  trouble: Map<string, ModelTrouble>;
  /** The latest model trouble of the session, until the model answers again. */
  current: ModelTrouble | undefined;
  /** Whether the session stalled and no turn has finished since. */
  stalled: boolean;
  /** Drafts of turns that consumed an input and ended without a send, by the input's id. */
  drafts: Map<string, UnsentDraft>;
}

const MODEL_FAILED = /^model failed:\s*/;

function num(data: Record<string, unknown>, key: string): number | undefined {
  const value = data[key];
  return typeof value === "number" && Number.isFinite(value) ? value : undefined;
}

function addCount(a: number | undefined, b: unknown): number | undefined {
  if (typeof b !== "number" || !Number.isFinite(b)) return a;
  return (a ?? 0) + b;
}

class TurnBuilder {
  readonly view: TurnView = {
    turns: new Map(),
    turnOfInput: new Map(),
    trouble: new Map(),
    current: undefined,
    stalled: false,
    drafts: new Map(),
  };

  add(record: LaneRecord): void {
    const data = isObject(record.data) ? record.data : {};
    const frameId = stringField(data, "frame_id");
    const turn = frameId === undefined ? undefined : this.view.turns.get(frameId);
    switch (record.type) {
      case "frame.accepted":
        return this.#accepted(record);
      case "model.reply":
        if (turn !== undefined) this.#reply(turn, record);
        return this.#recovered(turn);
      case "scratchpad":
        if (turn !== undefined && data.partial === false && typeof data.text === "string") {
          turn.lastDraft = { seq: record.seq, at: record.at, text: data.text };
        }
        if (data.partial === false) this.#recovered(turn);
        return;
      case "cell.started":
        return this.#recovered(turn);
      case "send":
      case "outbox.pending":
        if (turn !== undefined) turn.sent = true;
        return;
      case "turn.ended": {
        const reason = stringField(data, "reason") ?? "";
        if (turn === undefined) return;
        // A failed model request is retried: the turn has not said its last word yet.
        if (MODEL_FAILED.test(reason)) this.#failed(turn, record, data);
        else this.#ended(turn);
        if (typeof data.step_limit === "number") turn.stepLimit = data.step_limit;
        return;
      }
      case "turn.started":
        if (turn !== undefined) this.#started(turn);
        return;
      case "turn.retrying":
        if (turn !== undefined) this.#retrying(turn, record, data);
        return;
      case "model.failing":
        return this.#modelFailing(record);
      case "model.recovered":
        return this.#recovered(turn);
      case "frame.abandoned":
      case "frame.finished":
        if (turn !== undefined) this.#frameEnd(turn, record, data);
        return;
      case "session.stalled":
        return this.#stalled(data);
    }
  }

  #accepted(record: LaneRecord): void {
    const read = readRecord(record.type, record.data);
    if (!read.ok || read.record.type !== "frame.accepted") return;
    const d = read.record.data;
    this.view.turns.set(d.frame_id, {
      frameId: d.frame_id,
      number: d.number,
      inputIds: d.input_ids,
      routes: [],
      models: [],
      replies: 0,
      usage: {
        promptTokens: undefined,
        completionTokens: undefined,
        cacheReadTokens: undefined,
        cacheWriteTokens: undefined,
      },
      sent: false,
      lastDraft: undefined,
      ended: false,
      stepLimit: undefined,
    });
    for (const id of d.input_ids) this.view.turnOfInput.set(id, d.frame_id);
  }

  #reply(turn: TurnInfo, record: LaneRecord): void {
    const read = readRecord(record.type, record.data);
    if (!read.ok || read.record.type !== "model.reply") return;
    const d = read.record.data;
    turn.replies++;
    if (!turn.routes.includes(d.route)) turn.routes.push(d.route);
    if (d.model !== undefined && !turn.models.includes(d.model)) turn.models.push(d.model);
    const u = turn.usage;
    u.promptTokens = addCount(u.promptTokens, d.usage.prompt_tokens);
    u.completionTokens = addCount(u.completionTokens, d.usage.completion_tokens);
    u.cacheReadTokens = addCount(u.cacheReadTokens, d.usage.cache_read_tokens);
    u.cacheWriteTokens = addCount(u.cacheWriteTokens, d.usage.cache_write_tokens);
  }

  /** The model answered: what waited on it no longer does. */
  #recovered(turn: TurnInfo | undefined): void {
    this.view.current = undefined;
    this.view.stalled = false;
    for (const id of turn?.inputIds ?? []) this.view.trouble.delete(id);
  }

  #failed(turn: TurnInfo, record: LaneRecord, data: Record<string, unknown>): void {
    const reason = (stringField(data, "reason") ?? "").replace(MODEL_FAILED, "");
    const previous = turn.inputIds.map((id) => this.view.trouble.get(id)?.attempt ?? 0);
    const trouble: ModelTrouble = {
      reason,
      attempt: num(data, "attempt") ?? Math.max(0, ...previous) + 1,
      of: num(data, "of"),
      nextAt: this.#nextAt(record, data),
      url: stringField(data, "url"),
      configPath: stringField(data, "config_path"),
      stalled: false,
      at: record.at,
    };
    this.#set(turn.inputIds, trouble);
  }

  /** The session's own account of a failed request: every field the line needs, typed. */
  #modelFailing(record: LaneRecord): void {
    const read = readRecord(record.type, record.data);
    if (!read.ok || read.record.type !== "model.failing") return;
    const d = read.record.data;
    const trouble: ModelTrouble = {
      reason: d.error,
      attempt: d.attempt,
      of: d.of,
      nextAt: d.next_retry_ms === null ? undefined : record.at + d.next_retry_ms,
      url: d.url,
      configPath: d.config_path ?? undefined,
      stalled: d.next_retry_ms === null,
      at: record.at,
    };
    this.#set(d.input_ids, trouble);
    if (trouble.stalled) this.view.stalled = true;
  }

  #retrying(turn: TurnInfo, record: LaneRecord, data: Record<string, unknown>): void {
    const known = turn.inputIds.map((id) => this.view.trouble.get(id)).find(Boolean);
    const reason = (stringField(data, "reason") ?? known?.reason ?? "").replace(MODEL_FAILED, "");
    this.#set(turn.inputIds, {
      reason,
      attempt: num(data, "attempt") ?? (known?.attempt ?? 0) + 1,
      of: num(data, "of") ?? known?.of,
      nextAt: this.#nextAt(record, data),
      url: stringField(data, "url") ?? known?.url,
      configPath: stringField(data, "config_path") ?? known?.configPath,
      stalled: false,
      at: record.at,
    });
  }

  #frameEnd(turn: TurnInfo, record: LaneRecord, data: Record<string, unknown>): void {
    this.#ended(turn);
    if (record.type === "frame.finished" && data.state === "done") {
      for (const id of turn.inputIds) this.view.trouble.delete(id);
      this.view.stalled = false;
      return;
    }
    // A writer may say more about the failure on the frame's end: keep what it adds.
    for (const id of turn.inputIds) {
      const trouble = this.view.trouble.get(id);
      if (trouble === undefined) continue;
      trouble.of = num(data, "of") ?? trouble.of;
      trouble.nextAt = this.#nextAt(record, data) ?? trouble.nextAt;
      trouble.url = stringField(data, "url") ?? trouble.url;
      trouble.configPath = stringField(data, "config_path") ?? trouble.configPath;
    }
  }

  /** A continued turn may still send: its earlier end is not its last. */
  #started(turn: TurnInfo): void {
    turn.ended = false;
    const last = turn.inputIds.at(-1);
    if (last !== undefined && this.view.drafts.get(last)?.frameId === turn.frameId) {
      this.view.drafts.delete(last);
    }
  }

  #ended(turn: TurnInfo): void {
    if (turn.ended) return;
    turn.ended = true;
    // A turn that consumed inputs and ended with a draft but no send: the draft was not said.
    const draft = turn.lastDraft;
    if (turn.sent || draft === undefined || draft.text.trim() === "") return;
    const last = turn.inputIds.at(-1);
    if (last === undefined) return;
    this.view.drafts.set(last, {
      ...draft,
      frameId: turn.frameId,
      turn: turn.number,
    });
  }

  #stalled(data: Record<string, unknown>): void {
    this.view.stalled = true;
    for (const trouble of this.view.trouble.values()) {
      trouble.stalled = true;
      trouble.nextAt = undefined;
      trouble.of = trouble.of ?? num(data, "failures");
    }
    if (this.view.current !== undefined) {
      this.view.current.stalled = true;
      this.view.current.nextAt = undefined;
    }
  }

  #set(inputIds: readonly string[], trouble: ModelTrouble): void {
    for (const id of inputIds) this.view.trouble.set(id, { ...trouble });
    this.view.current = { ...trouble };
  }

  #nextAt(record: LaneRecord, data: Record<string, unknown>): number | undefined {
    const wait = num(data, "next_in_ms") ?? num(data, "delay_ms");
    return wait === undefined ? undefined : record.at + wait;
  }
}

/**
 * Reads every turn of a session from its records in `seq` order.
 *
 * @example
 * ```ts
 * const turns = deriveTurns(log.records());
 * turns.trouble.get(inputId)?.reason; // "cannot stream from llm \"main\": …"
 * ```
 */
export function deriveTurns(records: readonly LaneRecord[]): TurnView {
  const builder = new TurnBuilder();
  for (const record of records) builder.add(record);
  return builder.view;
}

/**
 * The sentence shown under a message that waits on a failing model.
 *
 * @example
 * ```ts
 * troubleText(trouble, now);
 * // "The model at http://127.0.0.1:9/v1 is not answering (attempt 3 of 6, next in 4 s) — see config.kdl"
 * ```
 */
export function troubleText(trouble: ModelTrouble, now: number): string {
  const who = trouble.url === undefined ? "The model" : `The model at ${trouble.url}`;
  const parts = [
    `attempt ${trouble.attempt}${trouble.of === undefined ? "" : ` of ${trouble.of}`}`,
  ];
  if (trouble.stalled) parts.push("retries stopped until the next message, a reset or a restart");
  else if (trouble.nextAt !== undefined) {
    const s = Math.max(0, Math.ceil((trouble.nextAt - now) / 1000));
    parts.push(s === 0 ? "retrying now" : `next in ${s} s`);
  }
  const see = trouble.configPath === undefined ? "" : ` — see ${trouble.configPath}`;
  return `${who} is not answering (${parts.join(", ")})${see}`;
}
