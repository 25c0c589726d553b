/**
 * Which records of a session make up one conversation's older messages: for a page that opens
 * on a conversation whose newest messages lie behind a busier one's.
 *
 * A conversation's records are its inputs and, for each, the records of the frame that took
 * it up (from its `frame.accepted` to its `frame.finished` or `frame.abandoned`: the turn, its
 * cells and its sends). A frame's span is read whole, so records of other conversations
 * written meanwhile come along; a reader shows a conversation only from the `from` it was
 * given.
 *
 * @module
 */

import type { Store } from "../store.ts";

/** Records a frame's start or end is looked for among, after its input or its start. */
const FRAME_SCAN = 20_000;
/** Frames one page looks up at most, so a page's reading stays bounded whatever it is asked. */
const MAX_FRAMES = 200;

/** What {@linkcode conversationRanges} found. */
export interface ConversationRanges {
  /** Spans of seqs, `[first, last]` inclusive, in seq order and apart. */
  ranges: [number, number][];
  /** Every record of the conversation with `from <= seq < before` is in a span. */
  from: number;
  /** Whether the conversation has inputs before `from`. */
  more: boolean;
}

/**
 * The spans of records that hold conversation `conversation`'s newest inputs before `before`
 * and the frames that took them up, at most `limit` records and 200 frames in all (the newest
 * input's span is always given, cut at `limit`).
 *
 * @example
 * ```ts
 * const { ranges, from, more } = conversationRanges(store, "default", {
 *   conversation: "local:default", before: 90_001, limit: 300,
 * });
 * ```
 */
export function conversationRanges(
  store: Store,
  session: string,
  options: { conversation: string; before: number; limit: number },
): ConversationRanges {
  const { conversation, before, limit } = options;
  const inputs = store.statement(
    `SELECT admitted_seq AS seq, frame_id AS frame FROM inputs
     WHERE session_id = ? AND conversation_id = ? AND admitted_seq < ?
     ORDER BY admitted_seq DESC LIMIT ?`,
  ).all(session, conversation, before, limit) as { seq: number; frame: string | null }[];
  const spans: [number, number][] = [];
  const frames = new Set<string>();
  let total = 0;
  let from = before;
  for (const input of inputs) {
    if (
      total >= limit ||
      (input.frame !== null && !frames.has(input.frame) && frames.size >= MAX_FRAMES)
    ) {
      break;
    }
    const span = input.frame === null || frames.has(input.frame)
      ? undefined
      : frameSpan(store, session, { frame: input.frame, after: input.seq, before });
    if (input.frame !== null) frames.add(input.frame);
    const take = (first: number, last: number) => {
      const cut = Math.min(last, first + (limit - total) - 1);
      spans.push([first, cut]);
      total += cut - first + 1;
    };
    take(input.seq, input.seq);
    if (span !== undefined && total < limit) take(span[0], span[1]);
    from = input.seq;
  }
  const more = inputs.length > 0 &&
    store.statement(
        `SELECT 1 FROM inputs WHERE session_id = ? AND conversation_id = ? AND admitted_seq < ?
       LIMIT 1`,
      ).get(session, conversation, from) !== undefined;
  return { ranges: mergeSpans(spans), from: inputs.length === 0 ? 1 : from, more };
}

/** The seqs of a frame's start and end (or the last seq before `before` while it is open). */
function frameSpan(
  store: Store,
  session: string,
  at: { frame: string; after: number; before: number },
): [number, number] | undefined {
  const find = (kinds: string, after: number) =>
    (store.statement(
      `SELECT seq FROM events
       WHERE session_id = ? AND seq > ? AND seq < ? AND kind IN (${kinds})
         AND body ->> '$.frame_id' = ?
       ORDER BY seq LIMIT 1`,
    ).get(session, after, Math.min(at.before, after + FRAME_SCAN), at.frame) as
      | { seq: number }
      | undefined)?.seq;
  const start = find("'frame.accepted'", at.after);
  if (start === undefined) return undefined;
  const end = find("'frame.finished', 'frame.abandoned'", start);
  return [start, end ?? Math.min(at.before - 1, start + FRAME_SCAN)];
}

/** Sorts spans and joins those that touch or overlap. */
function mergeSpans(spans: [number, number][]): [number, number][] {
  const sorted = [...spans].sort((a, b) => a[0] - b[0]);
  const merged: [number, number][] = [];
  for (const [first, last] of sorted) {
    const top = merged.at(-1);
    if (top !== undefined && first <= top[1] + 1) top[1] = Math.max(top[1], last);
    else merged.push([first, last]);
  }
  return merged;
}
