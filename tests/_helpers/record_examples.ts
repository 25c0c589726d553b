/**
 * The record table of `docs/protocol.md`, read as data: each row's type and its example `data`,
 * so tests check the document against the schemas and feed the examples to the UI.
 *
 * @module
 */

import { dirname, join } from "node:path";
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
