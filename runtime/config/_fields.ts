/**
 * What every node of the configuration shares: field rules whose messages all read
 * "expected <what> (got <value>)", and the error that names one line of the file.
 *
 * @module
 */

import { getLocation, type Node } from "@bgotink/kdl";
import { z } from "zod";
import { KlbrError, LONGEST_TIMER_MS } from "../core/mod.ts";

/** A value as a message shows it: strings quoted. */
export const show = (value: unknown): string =>
  typeof value === "string" ? JSON.stringify(value) : String(value);

/** The zod error option for "expected `what` (got <the input>)". */
export const expected = (what: string) => ({
  error: (issue: { input?: unknown }) => `expected ${what} (got ${show(issue.input)})`,
});

/** A whole number in `min`…`max`, refused as "expected at least/at most …". */
export const whole = (what: string, min: number, max: number) =>
  z.int(expected(what)).min(min, expected(`at least ${min}`)).max(max, expected(`at most ${max}`));

/** A positive number of whole milliseconds that one host timer can wait. */
export const timeoutMs = () =>
  z.int(expected("whole milliseconds")).min(1, expected("at least 1 ms")).max(
    LONGEST_TIMER_MS,
    expected(`at most ${LONGEST_TIMER_MS} ms, about 24.8 days, the longest a timer waits`),
  );

/** A URL string whose scheme is `scheme` or its secure form (`http`: http: or https:). */
export const url = (scheme: "http" | "ws") => {
  const what = scheme === "http" ? "an http(s) URL" : "a ws(s) URL";
  return z.string(expected(what)).refine(
    (value) =>
      URL.canParse(value) && [`${scheme}:`, `${scheme}s:`].includes(new URL(value).protocol),
    expected(what),
  );
};

/** The 1-based line a KDL node starts on. */
export const lineOf = (node: Node): number => getLocation(node)?.start.line ?? 1;

/**
 * Throws the configuration error for one line of one file.
 *
 * @throws {KlbrError} `invalid_config`, always.
 */
export function failAt(file: string, line: number, what: string, cause?: unknown): never {
  throw new KlbrError("invalid_config", `cannot load config ${file}:${line}: ${what}`, { cause });
}

/** One block node's raw values, the line of the node and the line of each field. */
export interface RawBlock {
  line: number;
  fields: Record<string, unknown>;
  lines: Map<string, number>;
}

/** How {@linkcode readFields} reads one block. */
export interface ReadFieldsOptions {
  file: string;
  /** The node as messages name it: `llm "main"`, `discord`, `budget job`. */
  where: string;
  /** Put before each field's name in `lines` (a nested block's `job.`). @default "" */
  prefix?: string;
  /** Reads a field its own way; `undefined` leaves it to the one-value rule. */
  special?: (field: string, child: Node, line: number) => unknown;
}

/**
 * Reads the children of a block node into `raw.fields`: each given once, each with exactly one
 * value unless `special` reads it.
 *
 * @throws {KlbrError} `invalid_config` for a field given twice or with other than one value.
 */
export function readFields(node: Node, raw: RawBlock, options: ReadFieldsOptions): void {
  const { file, where, prefix = "", special } = options;
  for (const child of node.children?.nodes ?? []) {
    const field = child.getName();
    const key = prefix + field;
    const line = lineOf(child);
    if (raw.lines.has(key)) {
      failAt(
        file,
        line,
        `${where} ${field}: given twice (got lines ${raw.lines.get(key)} and ${line})`,
      );
    }
    raw.lines.set(key, line);
    const value = special?.(field, child, line);
    if (value !== undefined) {
      raw.fields[field] = value;
      continue;
    }
    const args = child.getArguments();
    if (args.length !== 1 || child.getProperties().size > 0 || child.children !== null) {
      failAt(
        file,
        line,
        `${where} ${field}: expected exactly one value (got ${args.length} values)`,
      );
    }
    raw.fields[field] = args[0];
  }
}

/**
 * Returns the one node named `name`, or undefined.
 *
 * @throws {KlbrError} `invalid_config` when the document declares it twice.
 */
export function onlyNode(nodes: Node[], name: string, file: string): Node | undefined {
  const found = nodes.filter((node) => node.getName() === name);
  if (found.length > 1) {
    const [first, second] = found.map(lineOf);
    failAt(file, second, `${name}: declared twice (got lines ${first} and ${second})`);
  }
  return found[0];
}
