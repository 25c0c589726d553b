/**
 * How the writer modules read rows: a table row as its record (every column, in column order,
 * under its camelCase name, with `session_id` as `session`; each module converts the columns
 * that hold JSON text or 0/1 flags); and the arguments several of them check alike: the page
 * size a reader asks for, the reason a row ends with.
 *
 * @module
 */

import type { SQLOutputValue } from "node:sqlite";
import { KlbrError } from "../../runtime/core/mod.ts";

/** One row as a statement returns it. */
export type Row = Record<string, SQLOutputValue>;

/**
 * The record of `row`: each column under its camelCase name (`session_id` as `session`), in
 * column order, with the fields of `converted` in place of their raw columns. Every column
 * becomes a field, so a column the record does not have is left out of the query or of `row`.
 *
 * @example
 * ```ts
 * fromRow<FrameRecord>(row, { inputIds: jsonColumn(row.input_ids) }); // { id, session, number, inputIds, … }
 * ```
 */
export function fromRow<T>(row: Row, converted: Partial<T> = {}): T {
  const record: Record<string, unknown> = {};
  for (const column in row) record[fieldName(column)] = row[column];
  return Object.assign(record, converted) as T;
}

/** Each column's field name, worked out once: rows are read on every turn. */
const FIELD_NAMES = new Map<string, string>([["session_id", "session"]]);

/** `created_at` → `createdAt`; `session_id` → `session`. */
function fieldName(column: string): string {
  let name = FIELD_NAMES.get(column);
  if (name === undefined) {
    name = column.replace(/_([a-z])/g, (_, letter: string) => letter.toUpperCase());
    FIELD_NAMES.set(column, name);
  }
  return name;
}

/** The value a JSON text column holds; SQL NULL stays null. */
export function jsonColumn<T>(value: SQLOutputValue): T {
  return (value === null ? null : JSON.parse(value as string)) as T;
}

/**
 * Refuses a page size that is not an integer in 1–`max`.
 *
 * @throws {KlbrError} `invalid_input`: "cannot <action>: limit must be an integer in 1-<max>
 *   (got <limit>)".
 */
export function checkLimit(limit: number, page: { action: string; max: number }): void {
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > page.max) {
    throw new KlbrError(
      "invalid_input",
      `cannot ${page.action}: limit must be an integer in 1-${page.max} (got ${limit})`,
    );
  }
}

/**
 * Refuses a reason that is not 1–1000 characters.
 *
 * @throws {KlbrError} `invalid_input`: "cannot <action>: reason must be 1-1000 characters (got
 *   <reason>)".
 */
export function checkReason(reason: string, action: string): void {
  if (typeof reason !== "string" || reason.length === 0 || reason.length > 1000) {
    throw new KlbrError(
      "invalid_input",
      `cannot ${action}: reason must be 1-1000 characters (got ${JSON.stringify(reason)})`,
    );
  }
}
