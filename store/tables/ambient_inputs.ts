/**
 * Ambient talk: the inputs of a conversation that a plan read without answering (its frame
 * lists them as ignored), so a later turn that does answer in that conversation can read what
 * was said meanwhile. A read-only query of the `inputs` and `frames` tables; `inputs.ts` and
 * `frames.ts` stay their writers.
 *
 * @module
 */

import { inputFromRow, type InputRecord, type InputRow } from "./inputs.ts";
import type { Store } from "../store.ts";

/** Ambient inputs one turn is shown at most, per conversation. */
export const MAX_AMBIENT_INPUTS = 20;

/**
 * The ignored inputs of `conversation` admitted before `beforeSeq` and after the conversation's
 * last input that a turn answered, oldest first, at most `limit` ({@linkcode MAX_AMBIENT_INPUTS}
 * unless given). It reads one row when the conversation's newest input was answered, else
 * `limit + 2` at most, newest first, through `inputs_conversation`, whatever the history's length.
 *
 * @example
 * ```ts
 * const meanwhile = ambientBefore(store, {
 *   session: "default",
 *   conversation: "discord:123",
 *   beforeSeq: turnInput.seq,
 * });
 * ```
 */
export function ambientBefore(
  store: Store,
  where: { session: string; conversation: string; beforeSeq: number; limit?: number },
): InputRecord[] {
  const { session, conversation, beforeSeq, limit = MAX_AMBIENT_INPUTS } = where;
  const newest = (n: number) =>
    store.statement(
      `SELECT i.*, EXISTS (
         SELECT 1 FROM frames f, json_each(f.routing, '$.ignored') j
         WHERE f.id = i.frame_id AND json_extract(j.value, '$.input_id') = i.id
       ) AS ignored
       FROM inputs i
       WHERE i.session_id = ? AND i.conversation_id = ? AND i.admitted_seq < ?
         AND i.status = 'consumed'
       ORDER BY i.admitted_seq DESC LIMIT ?`,
    ).all(session, conversation, beforeSeq, n) as unknown as (InputRow & { ignored: number })[];
  // Most turns follow an answered input: one row says so, where `limit + 1` rows would be read
  // (and their frames' routing walked) to find it.
  if (newest(1)[0]?.ignored !== 1) return [];
  const ambient: InputRecord[] = [];
  for (const row of newest(limit + 1)) {
    // The newest answered input ends the stretch of talk the agent has not seen.
    if (row.ignored !== 1 || ambient.length === limit) break;
    const { ignored: _ignored, ...input } = row;
    ambient.push(inputFromRow(input));
  }
  return ambient.reverse();
}
