/**
 * The record table of `docs/protocol.md`, read as data: each row's type and its example `data`,
 * so tests check the document against the schemas and feed the examples to the UI.
 *
 * @module
 */

import { dirname, join } from "node:path";
import { appendEvent } from "../../store/tables/events.ts";
import type { Store } from "../../store/store.ts";
import { fileURLToPath } from "node:url";

const DOC = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "docs", "protocol.md");

/** One row of the record table. */
export interface RecordExample {
  type: string;
  /** The example `data`, parsed; `undefined` when the row has none. */
  data: unknown;
  /** The row as written, for failure messages. */
  row: string;
}

/**
 * Every row of the table under `### Record types`, in document order.
 *
 * @throws {Error} when the section or its table is missing, or an example is not JSON.
 */
export function recordExamples(): RecordExample[] {
  const markdown = Deno.readTextFileSync(DOC);
  const start = markdown.indexOf("\n### Record types");
  if (start < 0) throw new Error('docs/protocol.md has no "### Record types" section');
  const end = markdown.indexOf("\n### ", start + 1);
  const section = markdown.slice(start, end < 0 ? undefined : end);
  const rows = section.split("\n").filter((line) => /^\| `[^`]+` +\|/.test(line));
  if (rows.length === 0) throw new Error("the record types section has no table rows");
  return rows.map((row) => {
    const type = /^\| `([^`]+)`/.exec(row)![1];
    const example = /\| `(\{[^`]*\})` *\|$/.exec(row)?.[1];
    return { type, data: example === undefined ? undefined : JSON.parse(example), row };
  });
}

/**
 * Appends every example of the record table that has `data` to the `default` session, in
 * document order; returns how many it appended.
 *
 * @example
 * ```ts
 * const written = appendRecordExamples(store); // > 20
 * ```
 */
export function appendRecordExamples(store: Store): number {
  let written = 0;
  for (const example of recordExamples()) {
    if (example.data === undefined) continue;
    appendEvent(store, "default", example.type as "x.example", example.data);
    written++;
  }
  return written;
}
