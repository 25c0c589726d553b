/**
 * SQL building blocks of the migrations: triggers that keep rows append-only or their identity
 * immutable.
 *
 * @module
 */

/** Refuses a statement on a table whose rows are never changed or removed. */
export function appendOnly(table: string): string {
  return `
CREATE TRIGGER ${table}_no_update BEFORE UPDATE ON ${table}
BEGIN SELECT RAISE(ABORT, '${table} is append-only'); END;
CREATE TRIGGER ${table}_no_delete BEFORE DELETE ON ${table}
BEGIN SELECT RAISE(ABORT, '${table} is append-only'); END;`;
}

/** Refuses an UPDATE that changes any of `columns`. */
export function immutable(table: string, columns: string[]): string {
  const changed = columns.map((c) => `NEW.${c} IS NOT OLD.${c}`).join(" OR ");
  return `
CREATE TRIGGER ${table}_immutable BEFORE UPDATE ON ${table} WHEN ${changed}
BEGIN SELECT RAISE(ABORT, '${table} identity is immutable'); END;`;
}
