/**
 * Folds a reply into one provider turn: streamed chat-completion chunks, or one whole JSON
 * completion from a server that did not stream.
 *
 * `_provider.ts` feeds it and reads the turn. Text deltas are concatenated; reasoning deltas
 * (`reasoning_content`, `reasoning` or `reasoning_text`, whichever the server uses) are kept
 * apart under the field name the server used; tool-call deltas are reassembled by id, and by
 * `index` only for the fragments that carry no id, so two calls with different ids are never
 * merged (Ollama streams parallel calls all at `index` 0); the last usage the provider reported
 * is normalised without inventing a single number.
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

/** The fields a server streams its reasoning in, in the order one is preferred to another. */
export const REASONING_FIELDS = ["reasoning_content", "reasoning", "reasoning_text"] as const;

/** The model's reasoning in one reply, and the field the server sent it in. */
export const ProviderReasoningSchema = z.object({
  field: z.enum(REASONING_FIELDS),
  text: z.string(),
});

/** The model's reasoning in one reply. */
export type ProviderReasoning = z.infer<typeof ProviderReasoningSchema>;

/** What one model call produced: scratchpad text, reasoning, tool calls, why it stopped and its usage. */
export const ProviderTurnSchema = z.object({
  text: z.string(),
  /** True when the stream ended before the provider finished: the text is a prefix. */
  textPartial: z.boolean(),
  /** The reasoning the server sent (`reasoning_content`, …), or null when it sent none. */
  reasoning: ProviderReasoningSchema.nullable(),
  toolCalls: z.array(ProviderToolCallSchema),
  /** `stop`, `tool_calls`, `length`, …; null only on a partial turn. */
  finishReason: z.string().nullable(),
  /**
   * True when the server sent no finish reason but ended the reply (`[DONE]`, or a whole JSON
   * completion): `finishReason` is then inferred, `tool_calls` when there are calls, else `stop`.
   */
  finishInferred: z.boolean(),
  /**
   * True when the reply hit the token limit (`finish_reason: "length"`, or Mistral's
   * `model_length`) while it was writing a tool call: the last call's arguments are then cut, and
   * kept as received.
   */
  cutInToolCall: z.boolean(),
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

/** A lossy animation event of a streaming reply; the returned turn is the record. */
export type ProviderDelta =
  | { type: "text"; text: string }
  | { type: "reasoning"; text: string }
  | { type: "tool_call"; text: string };

/** One tool-call fragment as servers send it; every field may be missing. */
interface ToolCallPart {
  index?: number | null;
  id?: string | null;
  function?: { name?: string | null; arguments?: unknown } | null;
}

/** The message-like part of a choice: a streamed `delta` or a whole `message`. */
interface MessageLike {
  content?: unknown;
  reasoning_content?: unknown;
  reasoning?: unknown;
  reasoning_text?: unknown;
  tool_calls?: ToolCallPart[] | null;
}

/** The parts of a chunk or completion this module reads; everything else is ignored. */
export interface ReplyLike {
  choices?:
    | Array<{
      index?: number;
      delta?: MessageLike | null;
      message?: MessageLike | null;
      finish_reason?: string | null;
    }>
    | null;
  usage?: unknown;
}

/**
 * Finish reasons by which a server says the reply failed rather than ended: `error` (Mistral
 * documents it among a stream's finish reasons; OpenRouter sends it when the provider behind it
 * failed), `abort` (vLLM, for a request its engine aborted) and `insufficient_system_resource`
 * (DeepSeek documents it: "the request is interrupted due to insufficient resource of the
 * inference system"). The text is then a prefix and the calls may be cut.
 */
const FAILED_FINISHES: ReadonlySet<string> = new Set([
  "error",
  "abort",
  "insufficient_system_resource",
]);

/**
 * Finish reasons by which a length ended the reply: `length` (the token limit) and Mistral's
 * `model_length` (the model's context, in its API's completion choices).
 */
const LENGTH_FINISHES: ReadonlySet<string> = new Set(["length", "model_length"]);

/**
 * Whether `finishReason` says a length limit cut the reply: the token limit (`length`) or
 * Mistral's `model_length`.
 *
 * @example
 * ```ts
 * endedAtLength("model_length"); // true
 * ```
 */
export function endedAtLength(finishReason: string | null | undefined): boolean {
  return finishReason != null && LENGTH_FINISHES.has(finishReason);
}

/** One call being assembled: its first `index`, if it had one, orders it among the others. */
interface Building {
  id: string;
  name: string;
  arguments: string;
  index: number | undefined;
}

/** Accumulates one reply. */
export class TurnBuilder {
  #text = "";
  #reasoning: ProviderReasoning | null = null;
  #finish: string | null = null;
  #ended = false;
  #usage: ProviderUsage = {};
  readonly #calls: Building[] = [];
  readonly #byId = new Map<string, Building>();
  readonly #byIndex = new Map<number, Building>();

  /** Folds one streamed chunk (or a whole completion) in and returns its deltas, text first. */
  add(chunk: ReplyLike): ProviderDelta[] {
    if (chunk.usage !== undefined && chunk.usage !== null) {
      this.#usage = normalizeUsage(chunk.usage);
    }
    const deltas: ProviderDelta[] = [];
    for (const choice of chunk.choices ?? []) {
      // klbr asks for one choice; a provider sending more must not mix them into one turn.
      if ((choice.index ?? 0) !== 0) continue;
      const part = choice.delta ?? choice.message;
      if (part) deltas.push(...this.#fold(part));
      // Ollama once sent `""` for "not yet" (ollama/ollama#4357): only a word ends the reply.
      if (choice.finish_reason) this.#finish = choice.finish_reason;
    }
    return deltas;
  }

  /**
   * The server said the reply is over (`data: [DONE]`, or a whole JSON completion was folded in
   * with {@linkcode TurnBuilder.add}), with or without a finish reason.
   */
  end(): void {
    this.#ended = true;
  }

  /** Whether the reply ended: a finish reason, `[DONE]` or a whole completion; else it was cut. */
  get finished(): boolean {
    return this.#finish !== null || this.#ended;
  }

  /**
   * The finish reason, when the server said by it that the reply failed (`error`, `abort`,
   * `insufficient_system_resource`).
   */
  get failedFinish(): string | undefined {
    return this.#finish !== null && FAILED_FINISHES.has(this.#finish) ? this.#finish : undefined;
  }

  #fold(part: MessageLike): ProviderDelta[] {
    const deltas: ProviderDelta[] = [];
    const text = textOf(part.content);
    if (text !== "") {
      this.#text += text;
      deltas.push({ type: "text", text });
    }
    // One field per delta: a server that sends the same text under two names (some vLLM
    // versions send `reasoning` and `reasoning_content`) is not counted twice.
    const field = REASONING_FIELDS.find((name) => typeof part[name] === "string" && part[name]);
    if (field !== undefined) {
      const more = part[field] as string;
      this.#reasoning ??= { field, text: "" };
      this.#reasoning.text += more;
      deltas.push({ type: "reasoning", text: more });
    }
    for (const fragment of part.tool_calls ?? []) {
      const args = this.#addCall(fragment);
      if (args !== "") deltas.push({ type: "tool_call", text: args });
    }
    return deltas;
  }

  /** Adds one fragment to its call and returns its argument text. */
  #addCall(part: ToolCallPart): string {
    const index = typeof part.index === "number" ? part.index : undefined;
    const id = typeof part.id === "string" && part.id !== "" ? part.id : undefined;
    let call = id === undefined ? undefined : this.#byId.get(id);
    if (call === undefined) {
      const atIndex = index === undefined ? undefined : this.#byIndex.get(index);
      if (id === undefined) {
        // No id: the call at its index, or (no index either) the call being written.
        call = index === undefined ? this.#calls.at(-1) : atIndex;
      } else if (atIndex !== undefined && atIndex.id === "") {
        call = atIndex; // the id came after the call's first fragment
      }
    }
    if (call === undefined) {
      call = { id: "", name: "", arguments: "", index };
      this.#calls.push(call);
    }
    if (id !== undefined && call.id === "") {
      call.id = id;
      this.#byId.set(id, call);
    }
    if (index !== undefined) this.#byIndex.set(index, call);
    // The name arrives whole; some providers repeat it on every delta.
    if (part.function?.name && call.name === "") call.name = part.function.name;
    const raw = part.function?.arguments;
    // Some proxies send arguments as an object instead of JSON text.
    const args = typeof raw === "string"
      ? raw
      : raw && typeof raw === "object"
      ? JSON.stringify(raw)
      : "";
    call.arguments += args;
    return args;
  }

  /**
   * The turn as the provider ended it; a call without an id gets a minted `call_…` id, and a
   * missing finish reason is inferred and marked so.
   */
  complete(): ProviderTurn {
    const order = (call: Building) => call.index ?? Number.MAX_SAFE_INTEGER;
    const toolCalls = this.#calls.map((call, at) => ({ call, at }))
      .sort((a, b) => order(a.call) - order(b.call) || a.at - b.at)
      .map(({ call }) => ({
        id: call.id || newId("call"),
        name: call.name,
        arguments: call.arguments,
      }));
    const inferred = toolCalls.length > 0 ? "tool_calls" : "stop";
    return {
      text: this.#text,
      textPartial: false,
      reasoning: this.#reasoning === null ? null : { ...this.#reasoning },
      toolCalls,
      finishReason: this.#finish ?? inferred,
      finishInferred: this.#finish === null,
      cutInToolCall: endedAtLength(this.#finish) && toolCalls.length > 0,
      usage: this.#usage,
    };
  }

  /** The turn so far, marked partial; unfinished tool calls are left out so none can run. */
  partial(): ProviderTurn {
    return {
      text: this.#text,
      textPartial: true,
      reasoning: this.#reasoning === null ? null : { ...this.#reasoning },
      toolCalls: [],
      finishReason: null,
      finishInferred: false,
      cutInToolCall: false,
      usage: this.#usage,
    };
  }

  /** What has arrived, in words, for a failure message. */
  received(): string {
    const parts = [`${this.#text.length} characters of text`];
    if (this.#reasoning !== null) parts.push(`${this.#reasoning.text.length} of reasoning`);
    if (this.#calls.length > 0) parts.push(`${this.#calls.length} unfinished tool call(s)`);
    return parts.join(", ");
  }
}

/** A message's text: a string, or the text parts of a content array. */
function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content.map((part) =>
    part && typeof part === "object" && typeof part.text === "string" &&
      (part.type === undefined || part.type === "text")
      ? part.text
      : ""
  ).join("");
}

/**
 * The assistant message a reply becomes in the provider sequence: its text (`null` when it had
 * none), its tool calls with the ids the host gave them, in the chat-completions shape, and,
 * when `options.reasoning` is given, the reasoning under the field the server sent it in (a
 * server that sends the field reads it back; DeepSeek's thinking mode requires it).
 *
 * @example
 * ```ts
 * assistantMessage("", [{ id: "call_1", name: "python", arguments: '{"code":"1+1"}' }]);
 * // { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", … }] }
 * assistantMessage("", calls, { reasoning: { field: "reasoning_content", text: "…" } });
 * // { …, reasoning_content: "…" }
 * ```
 */
export function assistantMessage(
  text: string,
  calls: readonly { id: string; name: string; arguments: string }[],
  options: { reasoning?: ProviderTurn["reasoning"] } = {},
): {
  role: "assistant";
  content: string | null;
  tool_calls?: { id: string; type: "function"; function: { name: string; arguments: string } }[];
  reasoning_content?: string;
  reasoning?: string;
  reasoning_text?: string;
} {
  const reasoning = options.reasoning;
  return {
    role: "assistant",
    content: text === "" ? null : text,
    ...(reasoning ? { [reasoning.field]: reasoning.text } : {}),
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
