/**
 * The record bodies of a turn's life across faults (`docs/faults.md`): how a turn starts,
 * what each model reply used, how it ends and is retried, a model that does not answer and
 * answers again, the reminder `turn.next` may give, what recovery repaired, an input that
 * expired, and a drain that began.
 * Part of the one record union of `_records.ts`.
 *
 * @module
 */

import * as z from "zod";

const ids = z.array(z.string());
const int = z.number().int();

/** The `data` schemas of the fault-window records, by type. */
export const FAULT_DATA = {
  "recovery": z.looseObject({
    /** Why the work stopped (absent from records before it was added). */
    reason: z.string().optional(),
    abandoned_frames: ids,
    resumed_frames: ids,
    /** Frames whose last cell had called `wait()`: finished without a model request. */
    finished_frames: ids.optional(),
    interrupted_cells: ids,
    closed_tool_calls: ids,
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
  "turn.started": z.looseObject({
    frame_id: z.string(),
    frame: int,
    resumed: z.boolean(),
    /** Which retry of the frame's turn this is, after a failed model request. */
    attempt: int.positive().optional(),
  }),
  "input.expired": z.looseObject({ input_id: z.string(), reason: z.string(), waited_ms: int }),
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
  "daemon.stopping": z.looseObject({ reason: z.string(), grace_ms: int.nonnegative() }),
  /**
   * A turn's model request failed: what a conversation needs to say "the model at <url> is not
   * answering (attempt 3 of 7, next in 4 s) — see <config>". `next_retry_ms` is `null` once
   * the session stalled: nothing retries until the next input, `reset` or a restart.
   */
  "model.failing": z.looseObject({
    frame_id: z.string(),
    /** The inputs the failed turn was answering: where the conversation shows the line. */
    input_ids: ids,
    route: z.string(),
    url: z.string(),
    model: z.string(),
    error: z.string(),
    /** This failure's attempt, 1 for the first; `of` is every attempt before the stall. */
    attempt: int.positive(),
    of: int.positive(),
    next_retry_ms: int.nonnegative().nullable(),
    /** The configuration file that names the route; `null` when the defaults are in use. */
    config_path: z.string().nullable(),
  }),
  /** A model answered again after `model.failing`: the conversation's line is cleared. */
  "model.recovered": z.looseObject({
    frame_id: z.string(),
    route: z.string(),
    url: z.string(),
    /** How many failed attempts came before. */
    failed_attempts: int.positive(),
  }),
  /**
   * `turn.next` reminded the model, within the same turn, that its text reached nobody: the
   * reminder is sent as the next request's last message. Speech stays explicit.
   */
  "turn.reminded": z.looseObject({ frame_id: z.string(), reminder: z.string() }),
} as const;
