/**
 * The record bodies of a turn's life: the frame that a turn answers (accepted, finished,
 * abandoned, resumed), how each try of its turn starts and ends, is retried and reminded, and
 * what each model reply used.
 * Part of the one record union of `_records.ts`.
 *
 * @module
 */

import * as z from "zod";
import { FRAME_TRACE_REFS } from "./_behavior_records.ts";

const ids = z.array(z.string());
/** Any JSON value; required. The store has already refused what is not JSON. */
const json = z.unknown();
const int = z.number().int();

const frameEnd = {
  frame_id: z.string(),
  number: int,
  reason: z.string(),
  input_ids: ids,
  ...FRAME_TRACE_REFS,
};

/** The `data` schemas of the turn records, by type. */
export const TURN_DATA = {
  "frame.accepted": z.looseObject({
    frame_id: z.string(),
    number: int,
    input_ids: ids,
    routing: json,
    context_epoch: int,
    /** The release its turn is pinned to; `attention_trace`: the trace of its plan. */
    policy_revision: z.string(),
    attention_trace: z.string().optional(),
  }),
  "frame.finished": z.looseObject({ ...frameEnd, state: z.enum(["done", "failed"]) }),
  "frame.abandoned": z.looseObject({ ...frameEnd, state: z.literal("abandoned") }),
  "frame.resumed": z.looseObject({
    frame_id: z.string(),
    number: int,
    /** The dead owner, in records written while frames had lease owners. */
    previous_owner: z.string().nullable().optional(),
  }),
  "turn.started": z.looseObject({
    frame_id: z.string(),
    frame: int,
    resumed: z.boolean(),
    /** Which retry of the frame's turn this is, after a failed model request. */
    attempt: int.positive().optional(),
  }),
  "turn.ended": z.looseObject({
    frame_id: z.string(),
    reason: z.string(),
    /** Ended at recovery: the turn's cell had called `wait()` before the restart. */
    recovered: z.boolean().optional(),
    /** The reason given to `wait()`, when the turn ended waiting. */
    wait_reason: z.string().optional(),
    /** The turn's step limit, when it ended because it reached it. */
    step_limit: int.positive().optional(),
  }),
  "turn.retrying": z.looseObject({
    frame_id: z.string(),
    attempt: int.positive(),
    delay_ms: int.nonnegative(),
    reason: z.string(),
  }),
  "model.reply": z.looseObject({
    frame_id: z.string(),
    route: z.string(),
    /** The route's model name and address, when the provider named them. */
    model: z.string().optional(),
    url: z.string().optional(),
    /** Token counts the provider reported; a count it did not report is absent, never 0. */
    usage: z.looseObject({
      prompt_tokens: int.nonnegative().optional(),
      completion_tokens: int.nonnegative().optional(),
      cache_read_tokens: int.nonnegative().optional(),
      cache_write_tokens: int.nonnegative().optional(),
    }),
    finish_reason: z.string().nullable(),
    tool_calls: int.nonnegative(),
    text_chars: int.nonnegative(),
  }),
  /**
   * `turn.next` reminded the model, within the same turn, that its text reached nobody: the
   * reminder is sent as the next request's last message. Speech stays explicit.
   */
  "turn.reminded": z.looseObject({ frame_id: z.string(), reminder: z.string() }),
} as const;
