/**
 * What a server refused, read from its status and its own words, and the sentence that names
 * the fix. A refusal is never retried: the same request would be refused again. Named
 * refusals hold whatever the status, since some servers answer them with 500 (llama-server's
 * "tools param requires --jinja flag", ggml-org/llama.cpp#10920; its "Failed to parse tool call
 * arguments as JSON", ggml-org/llama.cpp#22072).
 *
 * @module
 */

import type { Route } from "../config/mod.ts";

/**
 * What a server refused: `key` (401, 403), `quota` (the account is out of credit or past its
 * spending limit: 402, OpenAI's 429 `insufficient_quota`), `model` (a model it does not
 * serve), `tools` (no tool calling on this server or model), `role_order` (e.g. Mistral's
 * `user` after `tool`), `reasoning` (reasoning sent back, or not sent back, against its rule),
 * `arguments` (a tool call's arguments in the history that are no JSON object), `context` (a
 * request larger than the server's context), `field` (a request field the server does not
 * take, not the history), `request` (any other 400, 404, 422 or 4xx that no retry changes; its
 * message names the field).
 */
export type ProviderRefusal =
  | "key"
  | "quota"
  | "model"
  | "tools"
  | "context"
  | "role_order"
  | "reasoning"
  | "arguments"
  | "field"
  | "request";

// Each pattern cites the servers' words it was written from.
/** Ollama: "<model> does not support tools" (ollama/ollama#6027); llama-server without --jinja. */
const TOOLS =
  /does not support tools|tools param requires --jinja|unsupported param:? ?tools|"auto" tool choice requires|tools? (?:calling |use )?(?:is |are )?not supported|does not support (?:function|tool) call/i;
/** Mistral: "Unexpected role 'user' after role 'tool'" (code 3230); chat templates: "must alternate". */
const ROLE_ORDER =
  /unexpected role|roles must alternate|must alternate user|invalid_request_message_order/i;
/** DeepSeek: "The `reasoning_content` in the thinking mode must be passed back to the API." */
const REASONING = /reasoning_content|content\[\]\.thinking/i;
/** llama-server: "Failed to parse tool call arguments as JSON"; vLLM: Python's json errors. */
const ARGUMENTS =
  /tool call arguments|parse (?:the )?arguments|^(?:Expecting (?:value|property name|',' delimiter|':' delimiter)|Unterminated string starting at|Extra data|Invalid control character at|Invalid \\escape)\b/i;
/**
 * A request past the server's context. OpenAI and DeepSeek: "This model's maximum context length
 * is N tokens. However, your messages resulted in M tokens." (`context_length_exceeded`); vLLM:
 * "This model's maximum context length is N tokens. However, you requested M tokens (…)";
 * llama-server: "request (M tokens) exceeds the available context size (N tokens), try
 * increasing it" (`exceed_context_size_error`, a 500 before ggml-org/llama.cpp#15780); Mistral:
 * "Prompt contains M tokens … too large for model with N maximum context length"; Ollama, where
 * it refuses rather than cuts: "the input length exceeds the context length" (no size).
 */
const CONTEXT =
  /maximum context length|context_length_exceeded|exceeds? the available context size|exceed_context_size|exceeds the context length/i;
/** The server's context size in its words, where it says it. */
const CONTEXT_SIZE = [
  /maximum context length is (\d+)/i,
  /available context size \((\d+) tokens\)/i,
  /model with (\d+) maximum context length/i,
  // llama-server's error body names it apart from its words: `"n_ctx": 4096`.
  /"n_ctx"\s*:\s*(\d+)/,
];

/**
 * The context size, in tokens, a refusal of {@linkcode CONTEXT} states in its words or its
 * body; undefined if it states none.
 *
 * @example
 * ```ts
 * statedContext("This model's maximum context length is 4096 tokens. However, …"); // 4096
 * ```
 */
export function statedContext(message: string): number | undefined {
  for (const pattern of CONTEXT_SIZE) {
    const size = Number(pattern.exec(message)?.[1]);
    if (Number.isSafeInteger(size) && size > 0) return size;
  }
  return undefined;
}

/**
 * The request's own size in the server's tokens, where its refusal says it: llama-server's
 * `"n_prompt_tokens": M` beside "request (M tokens) exceeds the available context size";
 * vLLM's "you requested T tokens (M in the messages, C in the completion)" and, in later
 * versions, "your request has M input tokens"; OpenAI's "your messages resulted in M tokens";
 * Mistral's "Prompt contains M tokens".
 */
const PROMPT_SIZE = [
  /"n_prompt_tokens"\s*:\s*(\d+)/,
  /request \((\d+) tokens\) exceeds/i,
  /\((\d+) in the messages/i,
  /request has (\d+) input tokens/i,
  /resulted in (\d+) tokens/i,
  /prompt contains (\d+) tokens/i,
];

/**
 * The prompt size, in the server's tokens, a refusal of {@linkcode CONTEXT} states for the
 * request it refused; undefined if it states none. It is the server's own count of what klbr
 * estimated, so it calibrates the estimate as a reply's `prompt_tokens` does.
 *
 * @example
 * ```ts
 * statedPrompt("request (5200 tokens) exceeds the available context size (4096 tokens)"); // 5200
 * ```
 */
export function statedPrompt(message: string): number | undefined {
  for (const pattern of PROMPT_SIZE) {
    const size = Number(pattern.exec(message)?.[1]);
    if (Number.isSafeInteger(size) && size > 0) return size;
  }
  return undefined;
}

/** OpenAI "model_not_found"; vLLM "The model `x` does not exist."; Ollama "model \"x\" not found". */
const MODEL =
  /model_not_found|model\b[^.]*\b(?:not found|does not exist|not exist|is not available|unknown)|unknown model|no such model|not a valid model|invalid model/i;

/**
 * An account out of credit: OpenAI's 429 with `insufficient_quota` ("You exceeded your current
 * quota, please check your plan and billing details."; its error-codes guide: buy credits or
 * raise the limit), unlike its rate-limit 429s and Gemini's, whose same words are a per-minute
 * quota that passes; DeepSeek's and OpenRouter's 402 ("Insufficient Balance", "Insufficient
 * credits").
 */
const QUOTA = /\binsufficient_quota\b/;

/**
 * A request field the server does not take: OpenAI's `unknown_parameter` / `unsupported_parameter`
 * codes ("Unknown parameter: 'stream_options'", which OpenAI-format proxies answer,
 * QuantumNous/new-api#418), Azure's "Unrecognized request argument supplied: …", llama-server's
 * "Unsupported param: …", pydantic's "Extra inputs are not permitted" (Mistral, vLLM).
 */
const FIELD =
  /unknown_parameter|unsupported_parameter|unknown parameter|unrecognized request arguments? supplied|unsupported param\b|extra inputs are not permitted/i;

/** The 4xx statuses a retry can change: a timeout, a conflict, a rate limit. */
export const RETRIABLE_STATUSES: ReadonlySet<number> = new Set([408, 409, 425, 429]);

/**
 * The refusal an error answer states, or null when a retry may succeed.
 *
 * @example
 * ```ts
 * refusalOf(400, "registry.ollama.ai/library/gemma3:4b does not support tools"); // "tools"
 * refusalOf(503, "overloaded"); // null
 * ```
 */
export function refusalOf(status: number, message: string, code?: unknown): ProviderRefusal | null {
  const named = typeof code === "string" ? code : "";
  const text = `${message} ${named}`;
  if (status === 401 || status === 403) return "key";
  if (status === 402 || QUOTA.test(named)) return "quota";
  if (RETRIABLE_STATUSES.has(status)) return null;
  if (CONTEXT.test(text)) return "context";
  if (TOOLS.test(text)) return "tools";
  if (ROLE_ORDER.test(text)) return "role_order";
  if (REASONING.test(text)) return "reasoning";
  if (ARGUMENTS.test(message.trim())) return "arguments";
  // A field inside a message (a validation error at `messages.…`) is the history's.
  if (FIELD.test(text) && !/^messages\./.test(message.trim())) return "field";
  if (status >= 500) return null;
  if (MODEL.test(text)) return "model";
  return status >= 400 ? "request" : null;
}

/** What {@linkcode refusalWords} says beyond the refusal. */
export interface RefusalFacts {
  route: Route;
  status: number;
  /** The server's message. */
  message: string;
  /** The field the server named (OpenAI's `param`), if it named one. */
  param?: unknown;
  /** The models `GET /models` lists, or why it could not tell; only for `model`. */
  listed?: string[] | string;
  /** The context size the server stated; only for `context`. */
  context?: number;
}

/** The sentence after a refusal's message that names the fix, starting "; ". */
export function refusalWords(refusal: ProviderRefusal, facts: RefusalFacts): string {
  const { route, status, message, param, listed, context } = facts;
  const llm = `llm "${route.name}"`;
  const restart = "then restart klbr";
  switch (refusal) {
    case "key":
      if (route.api_key_env !== undefined) {
        return `; the server refused the key: set the environment variable ${route.api_key_env} (api_key_env of ${llm}) to a valid key where klbr starts (its shell or service unit), ${restart}`;
      }
      return route.api_key !== undefined
        ? `; the server refused the key: correct api_key of ${llm} in the configuration file, ${restart}`
        : `; the server wants a key and ${llm} sends none: set api_key_env of ${llm} to the environment variable that holds it, ${restart}`;
    case "quota":
      return `; the provider says the account of ${llm} is out of credit or past its spending limit: add credit or raise the limit with the provider (no retry changes it); the next message or klbr resume asks again`;
    case "model":
      return `; the server does not serve model "${route.model}": ${modelList(listed, route)}`;
    case "tools":
      return `; the server refused the python tool: set tool_calls "text" on ${llm} (cells then come as \`\`\`python fences), or enable tool calling on the server (llama-server --jinja, an Ollama model with tool support)`;
    case "role_order":
      return `; the server refused the order of the messages: set role_order "strict" on ${llm}`;
    case "reasoning":
      return /passed back|pass(?:ed)? it back|missing|required/i.test(message)
        ? `; the server wants the model's reasoning sent back: set reasoning "echo" on ${llm}`
        : `; the server refuses reasoning in the messages: set reasoning "drop" on ${llm}`;
    case "arguments":
      return "; the server cannot read the arguments of a tool call in the history (they are no JSON object)";
    case "context": {
      const held = context === undefined ? "what the server holds" : `${context} tokens or less`;
      return `; the request is larger than the server's context: set context_tokens of ${llm} to ${held}, or start the server with a larger context (llama-server -c, vLLM --max-model-len), ${restart}`;
    }
    case "field":
      return fieldFix(route, fieldNamed(param, message));
    case "request":
      if (status === 404) {
        return `; check url of ${llm} (${route.url}): the OpenAI-compatible API usually ends in /v1`;
      }
      return typeof param === "string" && param !== ""
        ? `; the server refused the field ${param}`
        : "; the server refused the request as sent";
  }
}

/** The models a server lists, a few by name, for a refused model. */
function modelList(listed: string[] | string | undefined, route: Route): string {
  if (listed === undefined) return `set model of llm "${route.name}" to one the server serves`;
  if (typeof listed === "string") {
    return `set model of llm "${route.name}" to one it serves (GET ${route.url}/models did not say which: ${listed})`;
  }
  if (listed.length === 0) return `GET ${route.url}/models lists no model; load one on the server`;
  const shown = listed.slice(0, 8).map((id) => `"${id}"`).join(", ");
  const more = listed.length > 8 ? `, and ${listed.length - 8} more` : "";
  return `set model of llm "${route.name}" to one it lists (${shown}${more})`;
}

/**
 * The field a `field` refusal names: the server's `param`, the top-level field of a validation
 * error's location ("stream_options.include_usage: Extra inputs are not permitted"), or the one
 * its words quote.
 */
function fieldNamed(param: unknown, message: string): string | undefined {
  if (typeof param === "string" && param !== "") return param;
  return /^([A-Za-z_]\w*)[\w.]*: /.exec(message.trim())?.[1] ??
    /(?:parameter|param|supplied):?\s*'?([A-Za-z_][\w.]*)'?/i.exec(message)?.[1];
}

/** The route settings that send a field, by the field: what to change to stop sending it. */
const FIELD_SWITCHES = new Map([
  ["stream_options", "set stream_usage #false on"],
  ["tool_choice", "remove tool_choice from"],
  ["max_tokens", "remove max_tokens from"],
]);

/** The sentence that names how to stop sending `field` on `route`. */
function fieldFix(route: Route, field: string | undefined): string {
  const llm = `llm "${route.name}"`;
  if (field === undefined) {
    return "; the server does not take a field of the request (the history is not the cause)";
  }
  const change = FIELD_SWITCHES.get(field) ??
    (Object.hasOwn(route.extra_options, field)
      ? `remove ${field} from extra_options of`
      : undefined);
  return change === undefined
    ? `; the server does not take the field ${field} (the history is not the cause)`
    : `; the server does not take the field ${field}: ${change} ${llm}, then restart klbr`;
}
