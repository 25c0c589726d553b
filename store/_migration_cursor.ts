/**
 * Migration 13: inputs are history-indexed after admission, behind a cursor
 * (`store/history_index.ts`, `docs/store.md` §7).
 *
 * @module
 */

// Inputs leave admission's transaction for the history index: their trigger goes, and a cursor
// (the last `inputs.rowid` indexed; inputs are never deleted, so rowids only grow) records what
// `history_fts` holds. `indexAdmittedInputs` (store/history_index.ts) moves the rows and the
// cursor in one transaction; every search catches the index up first.
/** The statements of migration 13. */
export const V13: string = `
DROP TRIGGER inputs_history;
CREATE TABLE history_cursors (
  source TEXT PRIMARY KEY CHECK (source = 'inputs'),
  last_rowid INTEGER NOT NULL CHECK (last_rowid >= 0)
) STRICT, WITHOUT ROWID;
CREATE TRIGGER history_cursors_forward BEFORE UPDATE ON history_cursors
WHEN NEW.last_rowid < OLD.last_rowid OR NEW.source IS NOT OLD.source
BEGIN SELECT RAISE(ABORT, 'a history cursor only moves forward'); END;
INSERT INTO history_cursors (source, last_rowid) SELECT 'inputs', coalesce(max(rowid), 0) FROM inputs;
`;
