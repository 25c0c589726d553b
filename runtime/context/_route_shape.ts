/**
 * The request as the strictest server accepts it. The store keeps what the model produced
 * (raw tool-call arguments, every id, every reply); what goes on the wire is rendered from it
 * here, last, after `context.prepare`, so neither history nor a hook can send a sequence a
 * server refuses:
 *
 * - every tool call's arguments are a JSON object (`{}` stands in for text that is not one;
 *   its tool result already says it was not run);
 * - each call id once, and each call answered by exactly one tool result, right after its
 *   assistant message: a missing one is synthesised, a stray or repeated one dropped;
 * - on a route whose role order is strict (Mistral's), no `user` message directly after a
 *   `tool` one and no two `user` messages in a row, and tool-call ids of 9 letters and
 *   digits;
 * - on a route in text mode, tool calls become the fenced cells they stand for and their
 *   results become user messages marked as the runtime's;
 * - reasoning is sent back only on the current turn's assistant messages, and never on a
 *   route that says `reasoning "drop"`.
 *
 * @module
 */

import { REASONING_FIELDS } from "../model/mod.ts";

/** How a route's server differs from the permissive default. */
export interface RouteShape {
  /** `text`: no tools on the wire; cells travel as ```` ```python ```` fences. */
  toolMode: "native" | "text";
  /** No `user` right after `tool`, no two `user` in a row, 9-character tool-call ids. */
  strictRoles: boolean;
  /** `drop`: no reasoning field is ever sent back. */
  reasoning: "echo" | "drop";
}

/** What stands between a tool result and the next user message on a strict route. */
export const AFTER_TOOLS = "[runtime] (tool results received)";

/** The result a call gets when none was recorded for it. */
export const MISSING_RESULT =
  "[no result was recorded for this call: the daemon stopped or its write failed before the " +
  "cell's result was saved; check what it did (history.search) before running it again]";

/** The header of a cell's result sent back in text mode. */
export const TEXT_RESULT_HEADER = "[runtime] result of your python cell";

type Message = Record<string, unknown>;
interface Call {
  id: string;
  type?: string;
  function: { name: string; arguments: string };
}

/**
 * Renders `messages` for a route's server. Pure: the same messages and shape always give the
 * same bytes, so a provider's prefix cache holds across requests.
 *
 * @example
 * ```ts
 * const wire = shapeMessages(prepared.messages, { toolMode: "text", strictRoles: false,
 *   reasoning: "echo" });
 * ```
 */
export function shapeMessages(messages: readonly Message[], shape: RouteShape): Message[] {
  let out = pairToolResults(messages);
  if (shape.reasoning === "drop") out = out.map(withoutReasoning);
  if (shape.toolMode === "text") out = toTextMode(out);
  if (shape.strictRoles) out = strictRoleOrder(out);
  return out;
}

/**
 * Every assistant message's calls with unique ids and JSON-object arguments, each followed
 * by exactly one result per call, in call order. A result recorded later in the sequence
 * (recovery closes a call at the end of it) moves up to its call; a call with none gets
 * {@linkcode MISSING_RESULT}; a result that answers no call, or a call already answered, is
 * dropped. An assistant message with neither text nor calls gets empty text.
 */
function pairToolResults(messages: readonly Message[]): Message[] {
  const results = new Map<string, Message>();
  for (const message of messages) {
    const id = message.role === "tool" ? String(message.tool_call_id) : undefined;
    if (id !== undefined && !results.has(id)) results.set(id, message);
  }
  const out: Message[] = [];
  for (const message of messages) {
    if (message.role === "tool") continue;
    if (message.role !== "assistant" || !hasCalls(message)) {
      const empty = message.role === "assistant" && message.content == null;
      out.push(empty ? { ...message, content: "" } : message);
      continue;
    }
    const calls = uniqueCalls(message.tool_calls as Call[]);
    out.push({ ...message, tool_calls: calls });
    for (const call of calls) {
      out.push(
        results.get(call.id) ?? { role: "tool", tool_call_id: call.id, content: MISSING_RESULT },
      );
      results.delete(call.id);
    }
  }
  return out;
}

function hasCalls(message: Message): boolean {
  return Array.isArray(message.tool_calls) && message.tool_calls.length > 0;
}

/** The calls with the first of each id, their arguments a JSON object. */
function uniqueCalls(calls: readonly Call[]): Call[] {
  const seen = new Set<string>();
  const out: Call[] = [];
  for (const call of calls) {
    if (seen.has(call.id)) continue;
    seen.add(call.id);
    const args = objectArguments(call.function?.arguments);
    out.push({ ...call, function: { ...call.function, arguments: args } });
  }
  return out;
}

/**
 * The arguments as sent: the model's own text when it is a JSON object, that object re-encoded
 * when only raw control characters in its strings kept it from being one ({@linkcode
 * toolArguments}), `{}` otherwise.
 *
 * @example
 * ```ts
 * objectArguments('{"code": "1"}'); // '{"code": "1"}'
 * objectArguments('{"code": "1'); // "{}"
 * ```
 */
export function objectArguments(raw: unknown): string {
  if (typeof raw !== "string") return "{}";
  const isObject = (value: unknown) =>
    typeof value === "object" && value !== null && !Array.isArray(value);
  try {
    return isObject(JSON.parse(raw)) ? raw : "{}";
  } catch {
    const repaired = toolArguments(raw);
    return isObject(repaired) ? JSON.stringify(repaired) : "{}";
  }
}

/**
 * A tool call's arguments parsed, or undefined when they are no JSON. Arguments whose strings
 * hold raw newlines, tabs or other control characters — what small models write for code, and
 * what vLLM refuses in a history ("Invalid control character at") — are read with those
 * characters escaped, so the cell runs as written.
 *
 * @example
 * ```ts
 * toolArguments('{"code": "print(1)\nprint(2)"}'); // { code: "print(1)\nprint(2)" }
 * ```
 */
export function toolArguments(raw: string): unknown {
  try {
    return JSON.parse(raw);
  } catch {
    try {
      return JSON.parse(escapeControlsInStrings(raw));
    } catch {
      return undefined;
    }
  }
}

/** `raw` with each control character inside a JSON string escaped; the rest as it is. */
function escapeControlsInStrings(raw: string): string {
  let out = "";
  let inString = false;
  let escaped = false;
  for (const char of raw) {
    const code = char.charCodeAt(0);
    if (inString && !escaped && code < 0x20) {
      out += JSON.stringify(char).slice(1, -1);
      continue;
    }
    out += char;
    if (escaped) escaped = false;
    else if (char === "\\") escaped = inString;
    else if (char === '"') inString = !inString;
  }
  return out;
}

/** An assistant message without the reasoning fields a server streamed; others as they are. */
export function withoutReasoning(message: Message): Message {
  if (message.role !== "assistant") return message;
  if (!REASONING_FIELDS.some((field) => field in message)) return message;
  const copy = { ...message };
  for (const field of REASONING_FIELDS) delete copy[field];
  return copy;
}

/**
 * Text mode: an assistant message's calls become fenced cells in its text (unless the text
 * already holds that cell, as a text-mode reply does), and the results that follow become one
 * user message marked as the runtime's.
 */
function toTextMode(messages: readonly Message[]): Message[] {
  const out: Message[] = [];
  let i = 0;
  while (i < messages.length) {
    const message = messages[i++];
    if (message.role !== "assistant" || !hasCalls(message)) {
      out.push(message);
      continue;
    }
    const { tool_calls: calls, ...rest } = message as Message & { tool_calls: Call[] };
    const text = typeof message.content === "string" ? message.content : "";
    const cells = calls.map((call) => codeOf(call)).filter((code) => !text.includes(code));
    const content = [text, ...cells.map((code) => "```python\n" + code + "\n```")]
      .filter((part) => part !== "").join("\n\n");
    out.push({ ...rest, content });
    const results: string[] = [];
    for (; i < messages.length && messages[i].role === "tool"; i++) {
      results.push(String(messages[i].content ?? ""));
    }
    out.push({ role: "user", content: `${TEXT_RESULT_HEADER}:\n${results.join("\n\n")}` });
  }
  return out;
}

/** The code a python call carries, or its raw arguments when it carries none. */
function codeOf(call: Call): string {
  const parsed = toolArguments(call.function.arguments) as { code?: unknown } | undefined;
  // Not JSON, or no code: shown as it came.
  return typeof parsed?.code === "string" ? parsed.code : call.function.arguments;
}

/**
 * Mistral's order: an assistant message between a tool result and a user message, two user
 * messages in a row joined into one, and tool-call ids of exactly nine letters and digits.
 */
function strictRoleOrder(messages: readonly Message[]): Message[] {
  const out: Message[] = [];
  for (const original of messages) {
    const message = shortIds(original);
    const last = out[out.length - 1];
    if (message.role === "user" && last?.role === "tool") {
      out.push({ role: "assistant", content: AFTER_TOOLS });
    } else if (
      message.role === "user" && last?.role === "user" &&
      typeof last.content === "string" && typeof message.content === "string"
    ) {
      out[out.length - 1] = { ...last, content: `${last.content}\n\n${message.content}` };
      continue;
    }
    out.push(message);
  }
  return out;
}

function shortIds(message: Message): Message {
  if (message.role === "tool") {
    return { ...message, tool_call_id: nineCharId(String(message.tool_call_id)) };
  }
  if (message.role === "assistant" && hasCalls(message)) {
    const calls = (message.tool_calls as Call[]).map((call) => ({
      ...call,
      id: nineCharId(call.id),
    }));
    return { ...message, tool_calls: calls };
  }
  return message;
}

const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/**
 * A tool-call id as Mistral accepts it (nine of `a-zA-Z0-9`), the same for the same id: two
 * 32-bit FNV-1a hashes of it, spelled in base 62.
 *
 * @example
 * ```ts
 * nineCharId("call_01JX…"); // e.g. "Qm3ZpA0bK"
 * ```
 */
export function nineCharId(id: string): string {
  if (/^[A-Za-z0-9]{9}$/.test(id)) return id;
  let a = 0x811c9dc5;
  let b = 0x01000193 ^ id.length;
  for (let i = 0; i < id.length; i++) {
    a = Math.imul(a ^ id.charCodeAt(i), 0x01000193) >>> 0;
    b = Math.imul(b ^ id.charCodeAt(id.length - 1 - i), 0x01000193) >>> 0;
  }
  let n = BigInt(a) * 0x100000000n + BigInt(b);
  let out = "";
  for (let i = 0; i < 9; i++) {
    out += ALPHABET[Number(n % 62n)];
    n /= 62n;
  }
  return out;
}
