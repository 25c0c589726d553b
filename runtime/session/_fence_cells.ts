/**
 * Text-mode cells: a model that writes its code in a markdown fence instead of calling the
 * tool. The rules, as the contract states them to the model:
 *
 * - a cell is a fenced block whose info string starts with `python`, `py`, `python3` or
 *   `py3` (any case), opened by three or more backticks or tildes and closed by a line of at
 *   least as many of the same character (CommonMark's fences);
 * - the first complete such block of a reply runs; the rest of the reply is scratchpad;
 * - further python blocks in the same reply do not run, and the cell's result says how many
 *   were left;
 * - a block that is never closed (a reply cut by its token limit) does not run;
 * - fences of other languages, and untagged ones, are text.
 *
 * @module
 */

/** What a reply holds in text mode. */
export interface FencedCells {
  /** The first complete python block's code, or null when the reply holds none. */
  code: string | null;
  /** Complete python blocks after the first, which do not run. */
  ignored: number;
  /** Whether a python block was opened and never closed. */
  unclosed: boolean;
}

const OPEN = /^ {0,3}(`{3,}|~{3,})[ \t]*([^\s`]*)[^`\n]*$/;
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
  const lines = text.split("\n");
  const cells: string[] = [];
  let unclosed = false;
  for (let i = 0; i < lines.length; i++) {
    const open = OPEN.exec(lines[i]);
    if (open === null) continue;
    const [, fence, info] = open;
    const close = new RegExp(`^ {0,3}${fence[0] === "`" ? "`" : "~"}{${fence.length},}[ \\t]*$`);
    let end = i + 1;
    while (end < lines.length && !close.test(lines[end])) end++;
    const isPython = PYTHON.has(info.toLowerCase());
    if (end >= lines.length) {
      unclosed ||= isPython;
      break;
    }
    if (isPython) cells.push(lines.slice(i + 1, end).join("\n"));
    i = end;
  }
  return { code: cells[0] ?? null, ignored: Math.max(0, cells.length - 1), unclosed };
}
