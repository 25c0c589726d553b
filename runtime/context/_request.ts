/**
 * A request within its route's budget: the contract message, the summary standing in for the
 * items it covers, the newest uncovered items that fit (never starting inside a tool group),
 * and the turn's opening. Items are sized from the primary key (`itemSizesNewestFirst`), so
 * building reads only what the request can hold, however long the history.
 *
 * @module
 */

import { type ContextSummary, latestSummary } from "../../store/tables/context_summaries.ts";
import {
  estimateTokens,
  type ItemSize,
  itemSizesNewestFirst,
  readProviderRange,
} from "../../store/tables/provider_items.ts";
import type { Store } from "../../store/store.ts";
import {
  clipToTokens,
  type ContextBudget,
  messagesTokens,
  type RawLimits,
  rawLimits,
  TOOLS_TOKENS,
} from "./_budget.ts";
import { withoutReasoning } from "./_route_shape.ts";

/** A built request. */
export interface BuiltRequest {
  messages: Record<string, unknown>[];
  /** The raw token estimate of `messages` and the tool schema. */
  rawTokens: number;
  limits: RawLimits;
  /** Uncovered items left out to stay within the budget (`history.read` reaches them). */
  omitted: { count: number; fromIdx: number; toIdx: number } | null;
  /** Whether the request, with every uncovered item, passes the compaction threshold. */
  overCompact: boolean;
  /** The summary standing in for the items up to its `coversToIdx`, when there is one. */
  summary: ContextSummary | undefined;
  /** The items the request carries, oldest first, with their raw token estimates. */
  carried: ItemSize[];
}

/** What a request is built from. */
export interface RequestParts {
  route: string;
  budget: ContextBudget;
  system: string;
  /** The turn's opening message(s), sent last. */
  opening: Record<string, unknown>[];
  /**
   * The turn's frame. Reasoning goes back on its own assistant messages and on every earlier
   * one that made tool calls, and is dropped from earlier replies without calls: DeepSeek's
   * thinking mode refuses (400) a history whose tool-call turns lost their `reasoning_content`,
   * and ignores it on replies without calls (api-docs.deepseek.com/guides/thinking_mode).
   */
  frameId?: string;
}

/** Room kept for the note that names omitted items. */
const NOTE_TOKENS = 80;

/** Room kept, besides {@linkcode NOTE_TOKENS}, for the note that names the cut items. */
const CUT_NOTE_TOKENS = 40;

/** The newest items that fit `room`, oldest first, never starting with a tool result. */
function fittingTail(
  store: Store,
  session: string,
  after: number,
  room: number,
): { tail: ItemSize[]; over: boolean; newest: number; used: number } {
  const tail: ItemSize[] = [];
  let used = 0;
  let over = false;
  let newest = after;
  for (const size of itemSizesNewestFirst(store, session, after)) {
    if (newest === after) newest = size.idx;
    if (used + size.tokens > room) {
      over = true;
      break;
    }
    used += size.tokens;
    tail.push(size);
  }
  // A tool result whose call was left out would make the sequence invalid: drop it too.
  while (over && tail.length > 0 && tail[tail.length - 1].role === "tool") {
    used -= tail.pop()!.tokens;
  }
  return { tail: tail.reverse(), over, newest, used };
}

/**
 * Builds the request for `route`: at most the route's `context_tokens` (calibrated), with the
 * newest uncovered items that fit and a note naming those left out.
 *
 * @example
 * ```ts
 * const built = buildRequest(store, "default", { route: "main", budget, system, opening });
 * if (built.overCompact) await compactContext(...);
 * ```
 */
export function buildRequest(store: Store, session: string, parts: RequestParts): BuiltRequest {
  const limits = rawLimits(store, session, parts.route, parts.budget);
  const summary = latestSummary(store, session);
  const after = summary?.coversToIdx ?? 0;
  const system = { role: "system", content: parts.system };
  const head = summary === undefined ? undefined : `[runtime] ${summary.text}`;
  const fixed = messagesTokens([system, ...parts.opening]) +
    (head === undefined ? 0 : estimateTokens(JSON.stringify({ role: "user", content: head })));
  const room = limits.request - fixed - NOTE_TOKENS;
  const fitted = fittingTail(store, session, after, room);
  const { over, newest } = fitted;
  // The newest group alone larger than the request: it goes cut rather than not at all.
  const cut = fitted.tail.length === 0 && newest > after
    ? cutNewestGroup(store, session, {
      after,
      newest,
      room: room - CUT_NOTE_TOKENS,
      frameId: parts.frameId,
    })
    : undefined;
  const tail = cut?.sizes ?? fitted.tail;
  const used = cut?.used ?? fitted.used;
  const first = tail[0]?.idx ?? newest + 1;
  const omitted = first - 1 > after
    ? { count: first - 1 - after, fromIdx: after + 1, toIdx: first - 1 }
    : null;
  const items = cut?.messages ?? (tail.length === 0 ? [] : readProviderRange(store, session, {
    after: first - 1,
    through: tail[tail.length - 1].idx,
  }).map((item) =>
    keepsReasoning(item, parts.frameId) ? item.message : withoutReasoning(item.message)
  ));
  const notes = [
    omitted === null ? undefined : `[runtime] ${omitted.count} older items ` +
      `(#${omitted.fromIdx}–#${omitted.toIdx}) are left out of this request to keep it within ` +
      `${parts.budget.contextTokens} tokens; await history.search("words") and ` +
      `await history.read("item:N") reach them.`,
    cut === undefined ? undefined : `[runtime] the newest items (#${first}–#${newest}) are ` +
      `cut to fit this request; await history.read("item:N") reads each one whole.`,
  ].filter((part) => part !== undefined);
  const note = notes.length === 0 ? undefined : notes.join("\n");
  const runtime = [head, note].filter((part) => part !== undefined).join("\n\n");
  const messages = [
    system,
    ...(runtime === "" ? [] : [{ role: "user", content: runtime }]),
    ...items,
    ...parts.opening,
  ];
  // The items' sizes are stored; only the note is new.
  const rawTokens = fixed + used +
    (runtime === "" ? 0 : estimateTokens(JSON.stringify({ role: "user", content: runtime }))) -
    (head === undefined ? 0 : estimateTokens(JSON.stringify({ role: "user", content: head })));
  return {
    messages,
    rawTokens,
    limits,
    omitted,
    overCompact: over || rawTokens > limits.compact,
    summary,
    carried: tail,
  };
}

/**
 * The newest group (a user item, or an assistant item and its tool results) with its longest
 * contents cut to fit `room` raw tokens, for when it alone is larger than that: left out, the
 * turn's own call and result would be missing, and the model would run the cell again.
 * Undefined when the uncovered items hold no group start, or cutting cannot fit it.
 */
function cutNewestGroup(
  store: Store,
  session: string,
  at: { after: number; newest: number; room: number; frameId?: string },
): { sizes: ItemSize[]; messages: Record<string, unknown>[]; used: number } | undefined {
  let start: number | undefined;
  for (const size of itemSizesNewestFirst(store, session, at.after)) {
    if (size.role === "tool") continue;
    start = size.idx;
    break;
  }
  if (start === undefined) return undefined;
  const group = readProviderRange(store, session, { after: start - 1, through: at.newest });
  const whole = group.map((item) =>
    keepsReasoning(item, at.frameId) ? item.message : withoutReasoning(item.message)
  );
  const messages = fitMessages(whole, at.room + TOOLS_TOKENS);
  if (messages === undefined) return undefined;
  const sizes = group.map((item, i) => ({
    idx: item.idx,
    role: item.role,
    tokens: estimateTokens(JSON.stringify(messages[i])),
  }));
  return { sizes, messages, used: sizes.reduce((sum, size) => sum + size.tokens, 0) };
}

/** Whether an item goes out with its reasoning: the turn's own, or a reply that made calls. */
function keepsReasoning(
  item: { frameId: string | null; message: Record<string, unknown> },
  frameId: string | undefined,
): boolean {
  return item.frameId === frameId || Array.isArray(item.message.tool_calls);
}

/** The marker a cut message content ends with. */
const CUT = "\n[… cut here to keep the request within its context budget]";

/** How {@linkcode fitMessages} cuts. */
export interface FitOptions {
  /**
   * Never cut a `system` message (the contract: cut, the model loses the end of its
   * instructions); other contents are cut instead, and the fit fails when they cannot make room.
   * @default {false}
   */
  keepSystem?: boolean;
}

/**
 * Returns `messages` within `limit` raw tokens, cutting the longest string contents (never
 * dropping a message, so tool pairs stay whole); `undefined` when even that cannot fit.
 */
export function fitMessages(
  messages: readonly Record<string, unknown>[],
  limit: number,
  options: FitOptions = {},
): Record<string, unknown>[] | undefined {
  const out = messages.map((message) => ({ ...message }));
  for (let round = 0; round < 16; round++) {
    const excess = messagesTokens(out) - limit;
    if (excess <= 0) return out;
    let longest = -1;
    for (let i = 0; i < out.length; i++) {
      const content = out[i].content;
      if (options.keepSystem && out[i].role === "system") continue;
      if (typeof content !== "string" || content.length <= CUT.length) continue;
      if (longest < 0 || content.length > (out[longest].content as string).length) longest = i;
    }
    if (longest < 0) return undefined;
    const content = out[longest].content as string;
    const keep = Math.max(0, estimateTokens(content) - excess - estimateTokens(CUT) - 8);
    out[longest].content = clipToTokens(content, keep) + CUT;
  }
  return messagesTokens(out) <= limit ? out : undefined;
}
