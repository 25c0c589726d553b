/**
 * The `provider_items` table: a session's provider sequence (user, assistant and tool
 * messages in the chat-completions shape). This module is the table's only writer; the
 * schema's triggers keep `open_tool_calls` (the calls still waiting for a result) and
 * the history index in step with it, in the same transaction.
 *
 * The sequence is kept valid across crashes: an assistant message with tool calls is written
 * before any of its cells run, a cell's outcome commits with its call's result, and
 * {@linkcode closeDanglingToolCalls} gives every tool call left without a result one.
 *
 * Each item carries its raw token estimate ({@linkcode estimateTokens} of its JSON), so a
 * request is sized from the primary key alone, without reading or parsing a message.
 *
 * @module
 */

import { KlbrError } from "../../runtime/core/mod.ts";
import type { Store } from "../store.ts";
import { fromRow, jsonColumn, type Row } from "./_rows.ts";

/** One stored provider message. */
export interface ProviderItem {
  idx: number;
  frameId: string | null;
  role: "user" | "assistant" | "tool";
  toolCallId: string | null;
  /** The message in the chat-completions shape. */
  message: Record<string, unknown>;
  /** Its raw token estimate ({@linkcode estimateTokens} of the message's JSON). */
  tokens: number;
  at: number;
}

/** An item's size without its message: what request sizing and compaction cuts read. */
export interface ItemSize {
  idx: number;
  role: ProviderItem["role"];
  tokens: number;
}

const COLUMNS = "idx, frame_id, role, tool_call_id, message, tokens, at";

/** Returns the UTF-8 length of `text` in bytes, without encoding it. */
export function utf8Length(text: string): number {
  let bytes = 0;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code < 0x80) bytes += 1;
    else if (code < 0x800) bytes += 2;
    else if (code >= 0xd800 && code < 0xdc00 && i + 1 < text.length) {
      bytes += 4;
      i++;
    } else bytes += 3;
  }
  return bytes;
}

/**
 * The raw token estimate of one message's text: UTF-8 bytes / 4, plus 4 for the message's
 * framing. The context domain multiplies it by the route's calibration.
 *
 * @example
 * ```ts
 * estimateTokens(JSON.stringify({ role: "user", content: "hi" })); // 11
 * ```
 */
export function estimateTokens(text: string): number {
  return Math.floor((utf8Length(text) + 3) / 4) + 4;
}

function toItem(row: Row): ProviderItem {
  return fromRow<ProviderItem>(row, { message: jsonColumn(row.message) });
}

function checkMessage(store: Store, session: string, message: Record<string, unknown>): void {
  const role = message.role;
  if (role !== "user" && role !== "assistant" && role !== "tool") {
    throw new KlbrError(
      "invalid_input",
      `cannot append provider item: role must be user, assistant or tool (got ${
        JSON.stringify(role)
      })`,
    );
  }
  if (role !== "tool") return;
  if (typeof message.tool_call_id !== "string") {
    throw new KlbrError(
      "invalid_input",
      "cannot append provider item: a tool message needs tool_call_id (got none)",
    );
  }
  if (
    store.statement(
      "SELECT 1 FROM provider_items WHERE session_id = ? AND role = 'tool' AND tool_call_id = ?",
    ).get(session, message.tool_call_id) !== undefined
  ) {
    throw new KlbrError(
      "invalid_input",
      `cannot append provider item: tool call ${message.tool_call_id} already has its result`,
    );
  }
}

/**
 * Appends messages to a session's provider sequence in one transaction; returns their indexes.
 *
 * When it returns every message is committed, in order, with its token estimate, and the
 * history index and the open tool calls include it.
 *
 * @throws {KlbrError} `invalid_input` for a message without a known role, or a tool message
 * without `tool_call_id`, or a second result for the same tool call.
 */
export function appendProviderItems(
  store: Store,
  session: string,
  frameId: string | null,
  messages: Record<string, unknown>[],
): number[] {
  return store.transaction(() => {
    let idx = lastItemIdx(store, session);
    const now = store.clock();
    return messages.map((message) => {
      checkMessage(store, session, message);
      const toolCallId = message.role === "tool" ? message.tool_call_id as string : null;
      const text = JSON.stringify(message);
      idx++;
      store.statement(
        `INSERT INTO provider_items (session_id, idx, frame_id, role, tool_call_id, message, tokens, at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
      ).run(
        session,
        idx,
        frameId,
        message.role as string,
        toolCallId,
        text,
        estimateTokens(text),
        now,
      );
      return idx;
    });
  });
}

/**
 * Returns the items with `after < idx <= through`, in order. Items never change once written,
 * so the parsed items of recent reads are kept per store and session (about
 * {@linkcode ITEM_CACHE_CHARS} characters of messages, the newest kept): building the next
 * request parses only the items it has not read before. The messages returned are frozen.
 */
export function readProviderRange(
  store: Store,
  session: string,
  range: { after: number; through: number },
): ProviderItem[] {
  const cache = itemCache(store, session);
  let missingFrom = 0;
  let missingTo = 0;
  for (let idx = range.after + 1; idx <= range.through; idx++) {
    if (cache.items.has(idx)) continue;
    if (missingFrom === 0) missingFrom = idx;
    missingTo = idx;
  }
  if (missingFrom !== 0) {
    const rows = store.statement(
      `SELECT ${COLUMNS} FROM provider_items WHERE session_id = ? AND idx >= ? AND idx <= ?
       ORDER BY idx`,
    ).all(session, missingFrom, missingTo);
    // What an open transaction reads may still roll back: only committed items are kept.
    const keep = !store.inTransaction;
    for (const row of rows) {
      const item = toItem(row);
      deepFreeze(item.message);
      if (keep) remember(cache, item, (row.message as string).length);
      else cache.pending.set(item.idx, item);
    }
  }
  const out: ProviderItem[] = [];
  for (let idx = range.after + 1; idx <= range.through; idx++) {
    const item = cache.items.get(idx) ?? cache.pending.get(idx);
    if (item !== undefined) out.push(item);
  }
  cache.pending.clear();
  return out;
}

/** The message characters of parsed items kept per session. */
export const ITEM_CACHE_CHARS = 4_000_000;

interface ItemCache {
  items: Map<number, ProviderItem>;
  itemChars: Map<number, number>;
  chars: number;
  /** Items read inside a transaction, returned once and not kept. */
  pending: Map<number, ProviderItem>;
}

const itemCaches = new WeakMap<Store, Map<string, ItemCache>>();

function itemCache(store: Store, session: string): ItemCache {
  let sessions = itemCaches.get(store);
  if (sessions === undefined) itemCaches.set(store, sessions = new Map());
  let cache = sessions.get(session);
  if (cache === undefined) {
    cache = { items: new Map(), itemChars: new Map(), chars: 0, pending: new Map() };
    sessions.set(session, cache);
  }
  return cache;
}

function remember(cache: ItemCache, item: ProviderItem, chars: number): void {
  cache.items.set(item.idx, item);
  cache.itemChars.set(item.idx, chars);
  cache.chars += chars;
  if (cache.chars <= ITEM_CACHE_CHARS) return;
  // Drop the oldest items until the rest fit.
  for (const idx of [...cache.items.keys()].sort((a, b) => a - b)) {
    if (cache.chars <= ITEM_CACHE_CHARS * 0.75) break;
    cache.chars -= cache.itemChars.get(idx) ?? 0;
    cache.items.delete(idx);
    cache.itemChars.delete(idx);
  }
}

function deepFreeze(value: unknown): void {
  if (typeof value !== "object" || value === null || Object.isFrozen(value)) return;
  Object.freeze(value);
  for (const inner of Object.values(value)) deepFreeze(inner);
}

/** Returns item `idx`, or `undefined` when the session has none. */
export function getProviderItem(
  store: Store,
  session: string,
  idx: number,
): ProviderItem | undefined {
  const row = store.statement(
    `SELECT ${COLUMNS} FROM provider_items WHERE session_id = ? AND idx = ?`,
  ).get(session, idx);
  return row ? toItem(row) : undefined;
}

/**
 * Yields the sizes of the items with `idx > after`, newest first, read lazily from the
 * primary key in pages: a caller that stops after a budget's worth reads only about that much.
 */
export function* itemSizesNewestFirst(
  store: Store,
  session: string,
  after: number,
): Generator<ItemSize> {
  let below = Number.MAX_SAFE_INTEGER;
  while (below > after + 1) {
    const rows = store.statement(
      `SELECT idx, role, tokens FROM provider_items
       WHERE session_id = ? AND idx > ? AND idx < ? ORDER BY idx DESC LIMIT ${SIZE_PAGE}`,
    ).all(session, after, below) as unknown as ItemSize[];
    for (const row of rows) yield { idx: row.idx, role: row.role, tokens: row.tokens };
    if (rows.length < SIZE_PAGE) return;
    below = rows[rows.length - 1].idx;
  }
}

const SIZE_PAGE = 256;

/** Returns the newest item's idx, or 0 for an empty sequence. */
export function lastItemIdx(store: Store, session: string): number {
  return (store.statement(
    "SELECT COALESCE(MAX(idx), 0) AS idx FROM provider_items WHERE session_id = ?",
  ).get(session) as { idx: number }).idx;
}

/** A tool call without a result, and the cell it started if it started one. */
export interface DanglingCall {
  id: string;
  cell?: { id: string };
}

/** Whether any provider item of `frameId` was persisted: the model had answered in it. */
export function frameHasItems(store: Store, frameId: string): boolean {
  return store.statement("SELECT 1 FROM provider_items WHERE frame_id = ? LIMIT 1").get(
    frameId,
  ) !== undefined;
}

/**
 * Gives every tool call that has no result one, `resultOf(call)`, so the next request is a
 * valid sequence. Returns the tool call ids it closed, in the order of the sequence. It reads
 * only `open_tool_calls`, which holds the calls still waiting, so its cost does not grow with
 * history. When it returns, every assistant tool call in the session has exactly one tool
 * message. Proven by "`closeDanglingToolCalls()` gives each waiting call one result, naming the
 * cell it started".
 */
export function closeDanglingToolCalls(
  store: Store,
  session: string,
  options: { resultOf: (call: DanglingCall) => string },
): string[] {
  return store.transaction(() => {
    const open = store.statement(
      "SELECT call_id, idx FROM open_tool_calls WHERE session_id = ? ORDER BY idx, pos",
    ).all(session) as { call_id: string; idx: number }[];
    if (open.length === 0) return [];
    const messages = open.map(({ call_id: callId }) => {
      const cell = store.statement(
        "SELECT id FROM cells WHERE session_id = ? AND tool_call_id = ?",
      ).get(session, callId) as { id: string } | undefined;
      const content = options.resultOf({ id: callId, ...(cell ? { cell } : {}) });
      return { role: "tool", tool_call_id: callId, content };
    });
    const frameId = getProviderItem(store, session, open[open.length - 1].idx)?.frameId ?? null;
    appendProviderItems(store, session, frameId, messages);
    return open.map((call) => call.call_id);
  });
}
