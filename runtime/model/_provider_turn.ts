/**
 * Folds streamed chat-completion chunks into one provider turn.
 *
 * `_provider.ts` feeds it chunks and reads the turn. Text deltas are
 * concatenated, tool-call deltas are reassembled by their `index`, and the last usage the
 * provider reported is normalised without inventing a single number.
 *
 * @module
 */

import { z } from "zod";
import { newId } from "../core/mod.ts";

/** Token counts as the provider reported them; a field the provider did not report is absent. */
export const ProviderUsageSchema = z.object({
  promptTokens: z.int().nonnegative().optional(),
  completionTokens: z.int().nonnegative().optional(),
  cacheReadTokens: z.int().nonnegative().optional(),
  cacheWriteTokens: z.int().nonnegative().optional(),
  cacheMissTokens: z.int().nonnegative().optional(),
});

/** Normalised token counts of one turn. */
export type ProviderUsage = z.infer<typeof ProviderUsageSchema>;

/** One complete tool call: `arguments` is the whole JSON text the model produced. */
export const ProviderToolCallSchema = z.object({
  id: z.string().min(1),
  name: z.string(),
  arguments: z.string(),
});

/** One complete tool call. */
export type ProviderToolCall = z.infer<typeof ProviderToolCallSchema>;

/** What one model call produced: scratchpad text, tool calls, why it stopped and its usage. */
export const ProviderTurnSchema = z.object({
  text: z.string(),
  /** True when the stream ended before the provider finished: the text is a prefix. */
  textPartial: z.boolean(),
  toolCalls: z.array(ProviderToolCallSchema),
  /** `stop`, `tool_calls`, `length`, …; null only on a partial turn. */
  finishReason: z.string().nullable(),
  usage: ProviderUsageSchema,
});

/** One model call's result. */
export type ProviderTurn = z.infer<typeof ProviderTurnSchema>;

// A value that is not a count is treated as not reported, never as zero.
const count = z.int().nonnegative().optional().catch(undefined);
const RawUsageSchema = z.object({
  prompt_tokens: count,
  completion_tokens: count,
  cache_write_tokens: count,
  prompt_cache_hit_tokens: count,
  prompt_cache_miss_tokens: count,
  prompt_tokens_details: z.object({ cached_tokens: count, cache_write_tokens: count })
    .nullish().catch(undefined),
});

/**
 * Normalises a provider's usage object: OpenAI's `prompt_tokens_details.cached_tokens` and
 * `cache_write_tokens` (top level or in the details), DeepSeek's `prompt_cache_hit_tokens` and
 * `prompt_cache_miss_tokens`.
 */
export function normalizeUsage(raw: unknown): ProviderUsage {
  const parsed = RawUsageSchema.safeParse(raw);
  if (!parsed.success) return {};
  const u = parsed.data;
  const usage: ProviderUsage = {
    promptTokens: u.prompt_tokens,
    completionTokens: u.completion_tokens,
    cacheReadTokens: u.prompt_tokens_details?.cached_tokens ?? u.prompt_cache_hit_tokens,
    cacheWriteTokens: u.cache_write_tokens ?? u.prompt_tokens_details?.cache_write_tokens,
    cacheMissTokens: u.prompt_cache_miss_tokens,
  };
  // Absent stays absent: drop undefined keys so "not reported" survives JSON round trips.
  return Object.fromEntries(Object.entries(usage).filter(([, v]) => v !== undefined));
}

/** The parts of a streamed chunk this module reads; everything else is ignored. */
interface ChunkLike {
  choices?:
    | Array<{
      index?: number;
      delta?: {
        content?: string | null;
        tool_calls?:
          | Array<{
            index: number;
            id?: string | null;
            function?: { name?: string | null; arguments?: string | null } | null;
          }>
          | null;
      } | null;
      finish_reason?: string | null;
    }>
    | null;
  usage?: unknown;
}

/** Accumulates one streamed turn. */
export class TurnBuilder {
  #text = "";
  #finish: string | null = null;
  #usage: ProviderUsage = {};
  readonly #calls = new Map<number, { id: string; name: string; arguments: string }>();

  /** Folds one chunk in and returns its text delta ("" when it had none). */
  add(chunk: ChunkLike): string {
    if (chunk.usage !== undefined && chunk.usage !== null) {
      this.#usage = normalizeUsage(chunk.usage);
    }
    let delta = "";
    for (const choice of chunk.choices ?? []) {
      // klbr asks for one choice; a provider sending more must not mix them into one turn.
      if ((choice.index ?? 0) !== 0) continue;
      const content = choice.delta?.content;
      if (typeof content === "string") delta += content;
      for (const part of choice.delta?.tool_calls ?? []) {
        const call = this.#calls.get(part.index) ?? { id: "", name: "", arguments: "" };
        if (part.id) call.id = part.id;
        // The name arrives whole; some providers repeat it on every delta.
        if (part.function?.name && call.name === "") call.name = part.function.name;
        if (part.function?.arguments) call.arguments += part.function.arguments;
        this.#calls.set(part.index, call);
      }
      if (choice.finish_reason) this.#finish = choice.finish_reason;
    }
    this.#text += delta;
    return delta;
  }

  /** Whether the provider said why it stopped; a stream that ends without it was cut. */
  get finished(): boolean {
    return this.#finish !== null;
  }

  /** The turn as finished by the provider; a call without an id gets a minted `call_…` id. */
  complete(): ProviderTurn {
    const toolCalls = [...this.#calls.entries()].sort(([a], [b]) => a - b).map(([, call]) => ({
      ...call,
      id: call.id || newId("call"),
    }));
    return {
      text: this.#text,
      textPartial: false,
      toolCalls,
      finishReason: this.#finish,
      usage: this.#usage,
    };
  }

  /** The turn so far, marked partial; unfinished tool calls are left out so none can run. */
  partial(): ProviderTurn {
    return {
      text: this.#text,
      textPartial: true,
      toolCalls: [],
      finishReason: null,
      usage: this.#usage,
    };
  }
}

/**
 * The assistant message a reply becomes in the provider sequence: its text (`null` when it had
 * none) and its tool calls with the ids the host gave them, in the chat-completions shape.
 *
 * @example
 * ```ts
 * assistantMessage("", [{ id: "call_1", name: "python", arguments: '{"code":"1+1"}' }]);
 * // { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", … }] }
 * ```
 */
export function assistantMessage(
  text: string,
  calls: readonly { id: string; name: string; arguments: string }[],
): {
  role: "assistant";
  content: string | null;
  tool_calls?: { id: string; type: "function"; function: { name: string; arguments: string } }[];
} {
  return {
    role: "assistant",
    content: text === "" ? null : text,
    ...(calls.length
      ? {
        tool_calls: calls.map((call) => ({
          id: call.id,
          type: "function" as const,
          function: { name: call.name, arguments: call.arguments },
        })),
      }
      : {}),
  };
}
