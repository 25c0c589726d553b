/**
 * What a parse tree says about a file: its symbols (kind, name, qualified name, version-bound
 * range), found by the language's outline query and nested by containment, and its syntax
 * errors.
 *
 * @module
 */

import type { Node, QueryCapture } from "web-tree-sitter";
import type { CachedTree } from "./_cache.ts";
import type { Grammar } from "./_grammars.ts";
import { LANGUAGES, type LanguageSpec } from "./_languages.ts";
import type { CodeRange } from "./_schemas.ts";
import type { Source } from "./_source.ts";

/** The most symbols one outline lists; past it the outline says `truncated`. */
const MAX_OUTLINE_SYMBOLS = 5_000;
/** The most syntax errors a refusal lists. */
const MAX_REPORTED_ERRORS = 5;

/** One symbol of an outline. */
export interface CodeSymbol {
  /** `class`, `function`, `method`, `struct`, `heading`, `key`, … */
  kind: string;
  name: string;
  /** The names of the enclosing symbols and this one, joined by `.` (`Class.method`). */
  qualified_name: string;
  /** How many symbols enclose it. */
  depth: number;
  /** The definition's first line, trimmed (at most 200 characters). */
  signature: string;
  /** The whole definition, with its decorators, `export` or attributes. */
  range: CodeRange;
}

/** A file's outline at one version. */
export interface Outline {
  path: string;
  hash: string;
  language: string;
  lines: number;
  symbols: CodeSymbol[];
  truncated: boolean;
  /** How many syntax errors the parse found (an outline of a broken file may miss symbols). */
  syntax_errors: number;
}

/** One syntax error: where it is and what the parser made of it. */
export interface SyntaxProblem {
  line: number;
  column: number;
  /** `ERROR` for text the grammar could not place, `MISSING <token>` for an inserted token. */
  kind: string;
  /** The start of the offending text (at most 80 characters). */
  text: string;
}

const CONTAINERS = new Set(["class", "interface", "impl", "trait"]);
const META_CAPTURES = new Set(["name", "receiver"]);

interface Found {
  kind: string;
  name: string;
  start: number;
  end: number;
  def: Node;
  receiver: string | null;
  pattern: number;
}

/** The first line of `text`, trimmed, at most `max` characters. */
export function firstLine(text: string, max: number): string {
  const end = text.indexOf("\n");
  return (end === -1 ? text : text.slice(0, end)).trim().slice(0, max);
}

/** The definition node widened to what belongs to it: a wrapper parent, leading attributes. */
function widen(node: Node, spec: LanguageSpec): { start: number; end: number } {
  let outer = node;
  const parent = node.parent;
  if (parent !== null && spec.wrappers.includes(parent.type)) {
    const belongs = spec.wrap === "first"
      ? parent.firstNamedChild?.id === node.id
      : parent.namedChildren.filter((c) => c?.type === node.type).length === 1;
    if (belongs) outer = parent;
  }
  let start = outer.startIndex;
  let prev = outer.previousNamedSibling;
  while (prev !== null && spec.leading.includes(prev.type)) {
    start = prev.startIndex;
    prev = prev.previousNamedSibling;
  }
  return { start, end: outer.endIndex };
}

function receiverName(text: string): string {
  return /^\*?\s*([A-Za-z_][A-Za-z0-9_]*)/.exec(text)?.[1] ?? text;
}

function collect(grammar: Grammar, cached: CachedTree): Found[] {
  const spec = LANGUAGES[grammar.id];
  const seen = new Map<string, Found>();
  for (const match of grammar.outline.matches(cached.tree.rootNode)) {
    const def = match.captures.find((c: QueryCapture) => !META_CAPTURES.has(c.name));
    const name = match.captures.find((c: QueryCapture) => c.name === "name");
    if (def === undefined || name === undefined) continue;
    const receiver = match.captures.find((c: QueryCapture) => c.name === "receiver");
    const { start, end } = widen(def.node, spec);
    const found: Found = {
      kind: def.name,
      name: name.node.text.trim(),
      start,
      end,
      def: def.node,
      receiver: receiver === undefined ? null : receiverName(receiver.node.text),
      pattern: match.patternIndex,
    };
    // One definition matched by several patterns is listed once, as the first pattern says.
    const key = `${def.node.startIndex}:${def.node.endIndex}:${found.name}`;
    const old = seen.get(key);
    if (old === undefined || found.pattern < old.pattern) seen.set(key, found);
  }
  return [...seen.values()].sort((a, b) => a.start - b.start || b.end - a.end);
}

/**
 * Returns the outline of a parsed file: its symbols in source order, each with the range of
 * its whole definition at this version.
 *
 * @example
 * ```ts
 * const outline = outlineOf(await grammar("python"), cached);
 * outline.symbols.map((s) => s.qualified_name); // ["Greeter", "Greeter.hello", "main"]
 * ```
 */
export function outlineOf(grammar: Grammar, cached: CachedTree): Outline {
  const source = cached.source;
  const found = collect(grammar, cached);
  const symbols: CodeSymbol[] = [];
  const stack: { start: number; end: number; symbol: CodeSymbol }[] = [];
  for (const f of found.slice(0, MAX_OUTLINE_SYMBOLS)) {
    // Sorted by start, so the top encloses `f` unless it ends first; two definitions of the
    // same span (`const a = 1, b = 2`) are siblings.
    while (stack.length > 0) {
      const top = stack[stack.length - 1];
      if (top.end >= f.end && !(top.start === f.start && top.end === f.end)) break;
      stack.pop();
    }
    const parent = stack.length > 0 ? stack[stack.length - 1].symbol : null;
    const kind = f.kind === "function" && parent !== null && CONTAINERS.has(parent.kind)
      ? "method"
      : f.kind;
    const qualified = f.receiver !== null
      ? `${f.receiver}.${f.name}`
      : parent === null
      ? f.name
      : `${parent.qualified_name}.${f.name}`;
    const symbol: CodeSymbol = {
      kind,
      name: f.name,
      qualified_name: qualified,
      depth: parent === null ? 0 : parent.depth + 1,
      signature: firstLine(f.def.text, 200),
      range: source.range(source.byteAt(f.start), source.byteAt(f.end)),
    };
    symbols.push(symbol);
    stack.push({ start: f.start, end: f.end, symbol });
  }
  return {
    path: source.path,
    hash: source.hash,
    language: grammar.id,
    lines: source.lineCount,
    symbols,
    truncated: found.length > MAX_OUTLINE_SYMBOLS,
    syntax_errors: countSyntaxErrors(cached.tree.rootNode, source, 0).count,
  };
}

/**
 * Counts the syntax errors under `root` (`ERROR` and `MISSING` nodes), visiting only
 * subtrees that hold one, and describes the first `report` of them.
 */
export function countSyntaxErrors(
  root: Node,
  source: Source,
  report = MAX_REPORTED_ERRORS,
): { count: number; problems: SyntaxProblem[] } {
  let count = 0;
  const problems: SyntaxProblem[] = [];
  const stack: Node[] = [root];
  while (stack.length > 0) {
    const node = stack.pop()!;
    if (!node.hasError && !node.isMissing) continue;
    if (node.isError || node.isMissing) {
      count++;
      if (problems.length < report) {
        problems.push({
          line: node.startPosition.row + 1,
          column: node.startPosition.column + 1,
          kind: node.isMissing ? `MISSING ${node.type}` : "ERROR",
          text: firstLine(source.text.slice(node.startIndex, node.endIndex), 80),
        });
      }
      if (node.isMissing) continue;
    }
    for (let i = node.childCount - 1; i >= 0; i--) {
      const child = node.child(i);
      if (child !== null) stack.push(child);
    }
  }
  problems.sort((a, b) => a.line - b.line || a.column - b.column);
  return { count, problems };
}
