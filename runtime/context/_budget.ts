/**
 * A route's token budget and the sizes derived from it, in calibrated tokens: the provider's
 * own count as far as its reported `prompt_tokens` taught us, never a raw character count.
 *
 * @module
 */

import { estimateTokens } from "../../store/tables/provider_items.ts";
import { readCalibration, UNCALIBRATED_RATIO } from "../../store/tables/token_counts.ts";
import type { Store } from "../../store/store.ts";
import type { Route } from "../config/mod.ts";
import { PYTHON_TOOL } from "../model/mod.ts";

/** What one route allows a request (the route fields `context_tokens`, `compact_at`, `summary_share`). */
export interface ContextBudget {
  /** The largest request, in tokens; no request passes it. */
  contextTokens: number;
  /** The fraction of `contextTokens` past which the next request compacts first. */
  compactAt: number;
  /** The fraction of `contextTokens` a summary stays under. */
  summaryShare: number;
}

/** Returns the budget a route's configuration declares. */
export function budgetOf(route: Route): ContextBudget {
  return {
    contextTokens: route.context_tokens,
    compactAt: route.compact_at,
    summaryShare: route.summary_share,
  };
}

/**
 * `budget` within what its server holds (`held` tokens, learned from the server; undefined when
 * it said nothing): the smaller context wins, the shares stay.
 *
 * @example
 * ```ts
 * heldBy(budgetOf(route), 6000).contextTokens; // 6000 for a route of 32,768
 * ```
 */
export function heldBy(budget: ContextBudget, held: number | undefined): ContextBudget {
  return held !== undefined && held < budget.contextTokens
    ? { ...budget, contextTokens: held }
    : budget;
}

/** A budget in raw estimated tokens for one session and route: what sizing compares against. */
export interface RawLimits {
  /** Provider tokens per raw token (1.25 before the route reported anything). */
  ratio: number;
  /** No request's raw estimate passes this. */
  request: number;
  /** A request whose raw estimate passes this compacts first. */
  compact: number;
  /** A compaction keeps at most this much of the newest items whole. */
  keep: number;
  /** A summary's text stays under this. */
  summary: number;
  /** The inputs a turn opens with are rendered within this. */
  opening: number;
}

/** The raw estimate of the one tool's schema, which every request carries. */
export const TOOLS_TOKENS: number = estimateTokens(JSON.stringify([PYTHON_TOOL])) + 8;

/** The raw limits of `budget` for `route` in `session`, after the route's calibration. */
export function rawLimits(
  store: Store,
  session: string,
  route: string,
  budget: ContextBudget,
): RawLimits {
  const ratio = readCalibration(store, session, route)?.ratio ?? UNCALIBRATED_RATIO;
  const raw = (share: number) => Math.max(1, Math.floor((budget.contextTokens * share) / ratio));
  return {
    ratio,
    request: raw(1),
    compact: raw(budget.compactAt),
    keep: raw(budget.compactAt / 2),
    summary: raw(budget.summaryShare),
    opening: raw(0.25),
  };
}

/** The raw estimate of a list of chat messages plus the tool schema. */
export function messagesTokens(messages: readonly unknown[]): number {
  let total = TOOLS_TOKENS;
  for (const message of messages) total += estimateTokens(JSON.stringify(message));
  return total;
}

/**
 * Returns the longest prefix of `text` whose raw estimate fits `tokens` (at least ""), never
 * ending between the two halves of a character outside the BMP: a lone surrogate goes on the
 * wire as `\ud83d`, which servers refuse.
 */
export function clipToTokens(text: string, tokens: number): string {
  if (estimateTokens(text) <= tokens) return text;
  let low = 0;
  let high = text.length;
  while (low < high) {
    const mid = Math.ceil((low + high) / 2);
    if (estimateTokens(text.slice(0, mid)) <= tokens) low = mid;
    else high = mid - 1;
  }
  return text.slice(0, wholeCharacters(text, low));
}

/**
 * `end`, or one less when the unit before it is the first half of a surrogate pair, so that
 * `text.slice(0, end)` keeps only whole characters.
 */
export function wholeCharacters(text: string, end: number): number {
  const last = text.charCodeAt(end - 1);
  return end > 0 && end < text.length && last >= 0xd800 && last < 0xdc00 ? end - 1 : end;
}
