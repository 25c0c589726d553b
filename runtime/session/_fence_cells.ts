/**
 * Text-mode cells: a model that writes its code in a markdown fence instead of calling the
 * tool. The rules, as the contract states them to the model:
 *
 * - a cell is a fenced block whose info string starts with `python`, `py`, `python3` or
 *   `py3` (any case), opened by three or more backticks or tildes and closed by a line of at
 *   least as many of the same character, the opening fence's indentation (up to three spaces)
 *   taken off each line of the cell (CommonMark's fences);
 * - the first complete such block of a reply runs; the rest of the reply is scratchpad;
 * - further python blocks in the same reply do not run, and the cell's result says how many
 *   were left;
 * - a block that is never closed (a reply cut by its token limit) does not run;
 * - fences of other languages, and untagged ones, are text;
 * - what the model thought in `<think>` tags its server left in the text is not looked at: a
 *   cell drafted while thinking does not run ({@linkcode afterThinking}).
 *
 * And a call of the python tool that the server's tool parser left in the text instead of
 * `tool_calls` ({@linkcode leakedCall}): the model meant to call it, so it runs the same way.
 *
 * @module
 */

import { toolArguments } from "../context/mod.ts";

/** What a reply holds in text mode. */
export interface FencedCells {
  /** The first complete python block's code, or null when the reply holds none. */
  code: string | null;
  /** Complete python blocks after the first, which do not run. */
  ignored: number;
  /** Whether a python block was opened and never closed. */
  unclosed: boolean;
}

const OPEN = /^( {0,3})(`{3,}|~{3,})[ \t]*([^\s`]*)[^`\n]*$/;
const PYTHON = new Set(["python", "py", "python3", "py3"]);

/**
 * Finds the python cells of a reply's text.
 *
 * @example
 * ```ts
 * fencedCells("Let me look.\n```python\nprint(1)\n```\n");
 * // { code: "print(1)", ignored: 0, unclosed: false }
 * ```
 */
export function fencedCells(text: string): FencedCells {
  const lines = afterThinking(text).split("\n");
  const cells: string[] = [];
  let unclosed = false;
  for (let i = 0; i < lines.length; i++) {
    const open = OPEN.exec(lines[i]);
    if (open === null) continue;
    const [, indent, fence, info] = open;
    const close = new RegExp(`^ {0,3}${fence[0] === "`" ? "`" : "~"}{${fence.length},}[ \\t]*$`);
    let end = i + 1;
    while (end < lines.length && !close.test(lines[end])) end++;
    const isPython = PYTHON.has(info.toLowerCase());
    if (end >= lines.length) {
      unclosed ||= isPython;
      break;
    }
    if (isPython) cells.push(outdented(lines.slice(i + 1, end), indent.length).join("\n"));
    i = end;
  }
  return { code: cells[0] ?? null, ignored: Math.max(0, cells.length - 1), unclosed };
}

/**
 * A fence's lines without the opening fence's indentation: CommonMark takes up to that many
 * leading spaces off each line, so a cell under a list item compiles as written.
 */
function outdented(lines: string[], indent: number): string[] {
  if (indent === 0) return lines;
  const leading = new RegExp(`^ {0,${indent}}`);
  return lines.map((line) => line.replace(leading, ""));
}

/** Hermes' and Qwen's call block: `<tool_call>…</tool_call>`. */
const CALL_BLOCK = /<tool_call>\s*([\s\S]*?)\s*<\/tool_call>/;
/** Qwen3-Coder's XML inside the block: `<function=python><parameter=code>…</parameter>`. */
const XML_CODE = /^<function=python>\s*<parameter=code>\n?([\s\S]*?)\n?<\/parameter>/;

/**
 * The code of a python tool call the server left in the reply's text, or null: a
 * `<tool_call>` block holding `{"name": "python", "arguments": {"code": …}}` (Hermes and Qwen
 * 2.5 templates when vLLM's or llama-server's parser misses it, vllm-project/vllm#17161) or
 * Qwen3-Coder's `<function=python><parameter=code>` (vllm-project/vllm#21571), or a reply that
 * is nothing but such a JSON call, `{"name", "arguments"|"parameters"}` or `{"type":
 * "function", "function": {…}}` (Llama 3.2 on vLLM, vllm-project/vllm#11786).
 *
 * @example
 * ```ts
 * leakedCall('<tool_call>\n{"name": "python", "arguments": {"code": "print(1)"}}\n</tool_call>');
 * // "print(1)"
 * ```
 */
export function leakedCall(text: string): string | null {
  const answer = afterThinking(text);
  const block = CALL_BLOCK.exec(answer)?.[1];
  if (block !== undefined) return XML_CODE.exec(block)?.[1] ?? jsonCallCode(block);
  const whole = answer.trim();
  return whole.startsWith("{") ? jsonCallCode(whole) : null;
}

/**
 * The `code` argument of a JSON call of the python tool, or null; read as tool-call arguments
 * are, raw newlines in its strings and all ({@linkcode toolArguments}).
 */
function jsonCallCode(text: string): string | null {
  const call = toolArguments(text);
  const outer = call as { type?: unknown; function?: unknown } | null;
  const inner = (outer?.type === "function" ? outer.function : call) as
    | { name?: unknown; arguments?: unknown; parameters?: unknown }
    | null;
  if (inner?.name !== "python") return null;
  const given = inner.arguments ?? inner.parameters;
  const args = typeof given === "string" ? toolArguments(given) : given;
  const code = (args as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : null;
}

/**
 * The reply's text after the model's thinking, when its server left the thinking in the text
 * (llama-server with `--reasoning-format none` or a template it cannot split, ggml-org/llama.cpp
 * #24671; a DeepSeek-R1 distill, whose opening `<think>` is in the prompt, so only the closing
 * tag comes, theroyallab/tabbyAPI#294): what follows the first `</think>` when the text opens
 * with `<think>` or has no opening tag; nothing while a `<think>` that opens the text is not
 * closed; else the text as it is.
 *
 * @example
 * ```ts
 * afterThinking("<think>maybe ```python\nx\n```</think>\nHere."); // "\nHere."
 * ```
 */
export function afterThinking(text: string): string {
  const opens = text.trimStart().startsWith("<think>");
  const end = text.indexOf("</think>");
  if (end >= 0 && (opens || !text.includes("<think>"))) return text.slice(end + "</think>".length);
  return opens ? "" : text;
}
