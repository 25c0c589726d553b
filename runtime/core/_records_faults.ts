/**
 * The record bodies of faults (`docs/faults.md`): a model that does not answer and answers
 * again, what recovery repaired, an input that expired, and a drain that began.
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
  "input.expired": z.looseObject({ input_id: z.string(), reason: z.string(), waited_ms: int }),
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
} as const;
