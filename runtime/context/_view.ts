/**
 * What the agent remembers, for a person: the request the next turn would send, built by
 * {@linkcode buildRequest} itself (not a second copy of its rules) and described — the active
 * summary, each item carried with its token estimate, what is left out and why, and how much
 * of the route's budget it uses.
 *
 * @module
 */

import type { Store } from "../../store/store.ts";
import type { ContextResult } from "../core/mod.ts";
import { buildRequest, type RequestParts } from "./_request.ts";
import { messagesTokens } from "./_budget.ts";

/** The longest preview of one item. */
const PREVIEW_CHARS = 200;

/**
 * Builds the next request of `session` for `parts.route` (with no new input) and describes it.
 *
 * @example
 * ```ts
 * const view = contextView(store, "default", { route: "main", budget, system, opening: [] });
 * view.items.map((i) => `#${i.idx} ${i.role} ${i.tokens}`);
 * ```
 */
export function contextView(store: Store, session: string, parts: RequestParts): ContextResult {
  const built = buildRequest(store, session, parts);
  const ratio = built.limits.ratio;
  const provider = (raw: number) => Math.round(raw * ratio);
  const first = built.messages.length - parts.opening.length - built.carried.length;
  const items = built.carried.map((size, i) => ({
    idx: size.idx,
    role: size.role,
    tokens: provider(size.tokens),
    preview: previewOf(built.messages[first + i]),
  }));
  const { summary, omitted } = built;
  const leftOut: ContextResult["left_out"] = [];
  if (summary !== undefined) {
    leftOut.push({
      from_idx: 1,
      to_idx: summary.coversToIdx,
      count: summary.coversToIdx,
      reason: `covered by the summary of context epoch ${summary.epoch}; ` +
        `history.read("item:N") reaches each one`,
    });
  }
  if (omitted !== null) {
    leftOut.push({
      from_idx: omitted.fromIdx,
      to_idx: omitted.toIdx,
      count: omitted.count,
      reason: `left out to keep the request within ${parts.budget.contextTokens} tokens; ` +
        `history.search and history.read reach them`,
    });
  }
  return {
    session,
    route: parts.route,
    budget: {
      context_tokens: parts.budget.contextTokens,
      compact_at_tokens: Math.floor(parts.budget.contextTokens * parts.budget.compactAt),
      used_tokens: provider(built.rawTokens),
      ratio,
    },
    system_tokens: provider(messagesTokens([{ role: "system", content: parts.system }])),
    summary: summary === undefined ? null : {
      epoch: summary.epoch,
      covers_to_idx: summary.coversToIdx,
      source: summary.source,
      tokens: provider(summary.tokens),
      text: summary.text,
      at: summary.at,
    },
    items,
    left_out: leftOut,
    over_compact: built.overCompact,
  };
}

/** The start of one message: its text, else its tool calls' code or names. */
function previewOf(message: Record<string, unknown> | undefined): string {
  if (message === undefined) return "";
  const content = typeof message.content === "string" ? message.content : "";
  const calls = Array.isArray(message.tool_calls)
    ? message.tool_calls.map((call) => callText(call)).join("\n")
    : "";
  const text = [content, calls].filter((part) => part !== "").join("\n").trim();
  return text.length > PREVIEW_CHARS ? `${text.slice(0, PREVIEW_CHARS - 1)}…` : text;
}

/** A tool call's code (its `code` argument) or its name. */
function callText(call: unknown): string {
  const fn = (call as { function?: { name?: unknown; arguments?: unknown } }).function;
  if (typeof fn?.arguments === "string") {
    try {
      const args = JSON.parse(fn.arguments) as { code?: unknown };
      if (typeof args.code === "string") return args.code;
    } catch {
      // Not JSON: its name says enough.
    }
  }
  return `${String(fn?.name ?? "tool")}(…)`;
}
