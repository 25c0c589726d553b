/**
 * Migration 10: the fault windows' schema (`docs/faults.md`).
 *
 * @module
 */

import { appendOnly } from "./_migration_sql.ts";

// Fault windows. Effects: every durable effect a cell committed (a local send, an outbox row,
// and whatever later effects record themselves), numbered 1, 2, … within its cell, so the
// result the model reads for a cell that did not finish can list what it had done; a key makes
// an effect idempotent within its session. Inputs get their final disposition when no frame
// takes them within the configured age: expired, with its reason.
// Release paths become relative to the state directory, so a moved directory still opens.
// Recovery asks whether a frame's model had answered: provider items are indexed by frame.
/** The statements of migration 10. */
export const V10 = `
CREATE TABLE effects (
  session_id TEXT NOT NULL REFERENCES sessions(id),
  cell_id TEXT NULL,
  ordinal INTEGER NOT NULL CHECK (ordinal >= 1),
  kind TEXT NOT NULL,
  ref_id TEXT NOT NULL,
  key TEXT NULL,
  summary TEXT NOT NULL,
  seq INTEGER NULL,
  at INTEGER NOT NULL,
  UNIQUE (cell_id, ordinal)
) STRICT;
CREATE UNIQUE INDEX effects_key ON effects (session_id, kind, key) WHERE key IS NOT NULL;
${appendOnly("effects")}
ALTER TABLE outbox ADD COLUMN ordinal INTEGER NULL;
CREATE INDEX provider_items_frame ON provider_items (frame_id) WHERE frame_id IS NOT NULL;
ALTER TABLE inputs ADD COLUMN disposition TEXT NULL
  CHECK (disposition IS NULL OR disposition = 'expired');
ALTER TABLE inputs ADD COLUMN disposition_reason TEXT NULL;
ALTER TABLE inputs ADD COLUMN disposed_at INTEGER NULL;
DROP TRIGGER releases_no_update;
UPDATE releases SET path = 'releases/' || id WHERE path LIKE '%/releases/' || id;
CREATE TRIGGER releases_no_update BEFORE UPDATE ON releases
BEGIN SELECT RAISE(ABORT, 'releases is append-only'); END;
`;
