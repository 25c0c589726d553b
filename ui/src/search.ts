/**
 * The search over the lanes: a query matches an item when every word of it appears in the
 * item's text (case-insensitive) — a message's text and author, a draft, a cell's code and
 * output, an event's title, detail and type.
 *
 * @module
 */

import type { CellItem } from "./cell_view.ts";
import type { ConversationItem, EventItem, LaneView, ScratchItem } from "./lane_view.ts";

/** The words of a query, lower-cased; empty for a blank query. */
export function queryWords(query: string): string[] {
  return query.toLowerCase().split(/\s+/).filter((word) => word !== "");
}

function matches(words: string[], ...texts: (string | undefined)[]): boolean {
  const haystack = texts.filter((t) => t !== undefined).join("\n").toLowerCase();
  return words.every((word) => haystack.includes(word));
}

function conversationText(item: ConversationItem): string[] {
  return item.lane === "input"
    ? [item.text, item.authorName, item.conversation, item.inputId]
    : [item.text, item.conversation, item.sendId];
}

function cellText(cell: CellItem): (string | undefined)[] {
  return [
    cell.code,
    cell.stdout,
    cell.stderr,
    cell.value,
    cell.error?.type,
    cell.error?.message,
    cell.cellId,
  ];
}

/** The lanes' items that match a query, and how many of each there were. */
export interface SearchResult {
  conversation: ConversationItem[];
  scratchpad: ScratchItem[];
  cells: CellItem[];
  events: EventItem[];
  /** Items that match, over all lanes. */
  matched: number;
  /** Items there are, over all lanes. */
  total: number;
}

/**
 * Filters every lane of `view` by `query`; a blank query keeps everything.
 *
 * @example
 * ```ts
 * searchLanes(view, "deno check").cells.length;
 * ```
 */
export function searchLanes(view: LaneView, query: string): SearchResult {
  const words = queryWords(query);
  const total = view.conversation.length + view.scratchpad.length + view.cells.length +
    view.events.length;
  if (words.length === 0) {
    const { conversation, scratchpad, cells, events } = view;
    return { conversation, scratchpad, cells, events, matched: total, total };
  }
  const conversation = view.conversation.filter((i) => matches(words, ...conversationText(i)));
  const scratchpad = view.scratchpad.filter((i) => matches(words, i.text));
  const cells = view.cells.filter((c) => matches(words, ...cellText(c)));
  const events = view.events.filter((e) => matches(words, e.title, e.detail, e.type));
  const matched = conversation.length + scratchpad.length + cells.length + events.length;
  return { conversation, scratchpad, cells, events, matched, total };
}
