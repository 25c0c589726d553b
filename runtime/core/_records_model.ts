/**
 * The record bodies of how the runtime speaks to a model server: the reasoning a reply carried,
 * a route that adapted to its server (text-mode cells, strict role order), and a context the
 * runtime rewrote because the server refused its history.
 * Part of the one record union of `_records.ts`.
 *
 * @module
 */

import * as z from "zod";

const int = z.number().int();

/** The `data` schemas of the model-server records, by type. */
export const MODEL_DATA = {
  /**
   * The reasoning a reply streamed (`reasoning_content`, `reasoning` or `reasoning_text`),
   * under the field name the server used; shown folded, searchable, never speech.
   */
  "reasoning": z.looseObject({
    frame_id: z.string(),
    text: z.string(),
    /** The field the server sent it in, and the one it is sent back under. */
    field: z.string(),
    /** True when the stream ended before the reply finished. */
    partial: z.boolean().optional(),
  }),
  /**
   * A route of `tool_calls "auto"` moved to text-mode cells, a route's role order became
   * strict, or its requests were made smaller than its server's context (`context_tokens`),
   * because of what its server did: from the next request on, for this session.
   */
  "route.adapted": z.looseObject({
    route: z.string(),
    setting: z.enum(["tool_calls", "role_order", "context_tokens"]),
    to: z.string(),
    /** What the server did, in words (its refusal, or the model's fenced replies). */
    reason: z.string(),
    /**
     * With `context_tokens`: the route's configured `context_tokens` then. The move holds while
     * the configuration says the same; editing it (the fix the refusal names) ends it.
     */
    configured: z.int().positive().optional(),
  }),
  /**
   * The active context was rewritten from the durable records without the model: a summary of
   * everything up to `covers_to_idx` stands in for the items the server refused. Nothing is
   * deleted; `history.read` still reaches every item.
   */
  "context.repaired": z.looseObject({
    by: z.enum(["operator", "daemon"]),
    reason: z.string(),
    epoch: int,
    covers_to_idx: int,
    summary_chars: int.nonnegative(),
  }),
} as const;
