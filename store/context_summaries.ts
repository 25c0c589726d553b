/**
 * The `context_summaries` table: compaction of a session's provider sequence. This module is
 * the table's only writer.
 *
 * Compaction is extractive and needs no model: the oldest provider items (up to a user
 * message, so no tool group is split) are replaced in requests by a summary that lists what
 * the person said, what was delivered to them and what stayed scratchpad, and which cells ran
 * with which outcome. A draft is never presented as a sent message. The items themselves are
 * kept; the summary and the new context epoch commit together.
 *
 * @module
 */

import { KlbrError } from "../runtime/core/mod.ts";
import { insertEvent, readEventsOfKind } from "./events.ts";
import { outboxOfFrames } from "./outbox.ts";
import { type ProviderItem, readProviderItems } from "./provider_items.ts";
import { bumpContextEpoch, requireSession } from "./sessions.ts";
import type { Store } from "./store.ts";

/** A session's current summary. */
export interface ContextSummary {
  epoch: number;
  /** Provider items with `idx` up to this are replaced by `text` in requests. */
  coversToIdx: number;
  text: string;
  at: number;
}

/** What {@linkcode compactContext} did. */
export interface Compaction {
  epoch: number;
  coversToIdx: number;
  /** How many provider items this compaction newly covered. */
  summarizedItems: number;
}

const EXCERPT = 400;

/** Returns the session's newest summary, or `undefined` before the first compaction. */
export function latestSummary(store: Store, session: string): ContextSummary | undefined {
  const row = store.statement(
    "SELECT epoch, covers_to_idx, text, at FROM context_summaries WHERE session_id = ? ORDER BY epoch DESC LIMIT 1",
  ).get(session) as { epoch: number; covers_to_idx: number; text: string; at: number } | undefined;
  return row && { epoch: row.epoch, coversToIdx: row.covers_to_idx, text: row.text, at: row.at };
}

/**
 * Covers the oldest uncovered provider items with a summary, keeping at least `keepItems`
 * items after the cut, which falls just before a user message; returns `undefined` when there
 * is nothing to cover.
 *
 * When it returns, the summary row, the session's new context epoch and a `context.compacted`
 * event are committed together. Proven by "`compactContext()` covers old items, keeps the
 * difference between sent and scratchpad, and moves the epoch".
 *
 * @throws {KlbrError} `invalid_input` for `keepItems` outside 1–100000; `not_found` for an
 * unknown session.
 */
export function compactContext(
  store: Store,
  session: string,
  options: { keepItems: number },
): Compaction | undefined {
  const { keepItems } = options;
  if (!Number.isSafeInteger(keepItems) || keepItems < 1 || keepItems > 100_000) {
    throw new KlbrError(
      "invalid_input",
      `cannot compact context: keepItems must be an integer in 1-100000 (got ${keepItems})`,
    );
  }
  return store.transaction(() => {
    const row = requireSession(store, session);
    const previous = latestSummary(store, session);
    const items = readProviderItems(store, session, previous?.coversToIdx ?? 0);
    // Cut before the last user message that still leaves `keepItems` items after it.
    let cut = -1;
    for (let i = items.length - keepItems; i > 0; i--) {
      if (items[i].role === "user") {
        cut = i;
        break;
      }
    }
    if (cut <= 0) return undefined;
    const covered = items.slice(0, cut);
    const text = [previous?.text, summarize(store, session, covered)].filter(Boolean).join("\n\n");
    const coversToIdx = covered[covered.length - 1].idx;
    if (!bumpContextEpoch(store, session, row.contextEpoch)) {
      throw new KlbrError("epoch_moved", `cannot compact context of ${session}: the epoch moved`);
    }
    const epoch = row.contextEpoch + 1;
    store.statement(
      "INSERT INTO context_summaries (session_id, epoch, covers_to_idx, text, at) VALUES (?, ?, ?, ?, ?)",
    ).run(session, epoch, coversToIdx, text, store.clock());
    insertEvent(store, session, "context.compacted", {
      epoch,
      covers_to_idx: coversToIdx,
      summarized_items: covered.length,
      summary_chars: text.length,
    });
    return { epoch, coversToIdx, summarizedItems: covered.length };
  });
}

function excerpt(text: string): string {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length > EXCERPT ? `${flat.slice(0, EXCERPT)}…` : flat;
}

/** The summary of `items`: said, delivered, scratchpad, cells — each kept apart. */
function summarize(store: Store, session: string, items: ProviderItem[]): string {
  const frames = new Set(items.map((i) => i.frameId).filter((f): f is string => f !== null));
  const said: string[] = [];
  const drafts: string[] = [];
  const cells: string[] = [];
  const results = new Map<string, string>();
  for (const item of items) {
    if (item.role === "tool" && item.toolCallId !== null) {
      results.set(item.toolCallId, String(item.message.content ?? "").split("\n")[0]);
    }
  }
  for (const item of items) {
    const content = typeof item.message.content === "string" ? item.message.content : "";
    if (item.role === "user") said.push(`- ${excerpt(content)}`);
    if (item.role === "assistant") {
      if (content !== "") drafts.push(`- ${excerpt(content)}`);
      const calls = (item.message.tool_calls ?? []) as {
        id: string;
        function?: { arguments?: string };
      }[];
      for (const call of calls) {
        let code = "";
        try {
          code = String(JSON.parse(call.function?.arguments ?? "{}").code ?? "");
        } catch { /* a malformed call is listed without its code */ }
        cells.push(
          `- ${excerpt(code.split("\n")[0] ?? "")} → ${results.get(call.id) ?? "no result"}`,
        );
      }
    }
  }
  const delivered = [
    ...readEventsOfKind(store, session, "send")
      .filter((e) => frames.has(String((e.body as { frame_id?: unknown }).frame_id)))
      .map((e) => {
        const body = e.body as { text?: unknown; conversation?: unknown };
        return `- to ${body.conversation}: ${excerpt(String(body.text ?? ""))} (delivered)`;
      }),
    ...outboxOfFrames(store, [...frames]).map((row) =>
      `- to ${row.conversation}: ${excerpt(row.body)} (${row.state})`
    ),
  ];
  const section = (title: string, lines: string[]) =>
    lines.length ? `${title}\n${lines.join("\n")}` : `${title}\n- (none)`;
  return [
    `[summary of ${items.length} earlier items, #${items[0].idx}–#${items[items.length - 1].idx}]`,
    section("Inputs you received:", said),
    section("Messages you sent (these reached the conversation):", delivered),
    section("Your scratchpad notes (never delivered to anyone):", drafts),
    section("Cells you ran:", cells),
  ].join("\n");
}
