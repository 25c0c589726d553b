/**
 * The compatibility switches of a route: how its server differs from the OpenAI wire format
 * (tool calls, reasoning, streaming, usage, tool choice, token and step limits, role order).
 * Every default of a switch lives here; `_config.ts` spreads these fields into the route schema.
 *
 * @module
 */

import { z } from "zod";
import { expected } from "./_fields.ts";

/** A route's `tool_calls` modes: `tools` in the request, a ```python fence, or native until refused. */
const TOOL_CALL_MODES = ["native", "text", "auto"] as const;
/** A route's `reasoning` modes: send the model's reasoning back on the current turn, or never. */
const REASONING_MODES = ["echo", "drop"] as const;
/** The `tool_choice` values a route may declare. */
const TOOL_CHOICES = ["auto", "required", "none"] as const;
/** A route's `role_order`: `strict` refuses `user` after `tool` and two `user` messages in a row. */
const ROLE_ORDERS = ["strict", "relaxed"] as const;

/** The routes' compatibility switches: how this route's server differs (docs/configuration.md). */
export function switchFields() {
  const flag = () => z.boolean(expected("#true or #false"));
  return {
    /** How the model runs a cell: the `tools` field, a ```python fence, or native until refused. */
    tool_calls: z.enum(TOOL_CALL_MODES, expected(TOOL_CALL_MODES.join(", "))).default("auto"),
    /** Whether the model's reasoning goes back on the current turn's assistant messages. */
    reasoning: z.enum(REASONING_MODES, expected(REASONING_MODES.join(", "))).default("echo"),
    /** `#false` asks for one JSON completion instead of a stream. */
    stream: flag().default(true),
    /** Whether a streamed request asks for usage (`stream_options: {include_usage: true}`). */
    stream_usage: flag().default(true),
    /** The `tool_choice` of every request with tools; none is sent when absent. */
    tool_choice: z.enum(TOOL_CHOICES, expected(TOOL_CHOICES.join(", "))).optional(),
    /** The `max_tokens` of every request that sets none itself; none is sent when absent. */
    max_tokens: z.int(expected("a whole number of tokens")).min(1, expected("at least 1 token"))
      .optional(),
    /** The most model steps (requests) one turn may take. */
    max_steps: z.int(expected("a whole number of steps")).min(1, expected("1-1000 steps"))
      .max(1000, expected("1-1000 steps")).default(50),
    /**
     * `strict`: no `user` message right after a `tool` message and no two `user` messages in a
     * row. Absent: strict when the model or URL names Mistral, else relaxed ({@linkcode roleOrder}).
     */
    role_order: z.enum(ROLE_ORDERS, expected(ROLE_ORDERS.join(", "))).optional(),
  };
}

/** The default `role_order` of a route: `strict` when its model or URL names Mistral. */
export function roleOrder(route: { model: string; url: string }): typeof ROLE_ORDERS[number] {
  return /mistral/i.test(`${route.model} ${route.url}`) ? "strict" : "relaxed";
}
