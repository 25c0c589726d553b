/**
 * The schema of the behaviour diagnostics tables, `hook_traces` and `behavior_candidates`
 * (migration 9 in `migrations.ts`; written only by `behavior_diagnostics.ts`).
 *
 * @module
 */

// Hook invocation traces and failed behaviour candidates (`behavior_diagnostics.ts`). Both are
// bounded by count, so unlike the log they are pruned: the oldest rows go first. A trace is
// immutable but for its frame, which an attention plan's trace gets once, when its frame is
// accepted.
export const BEHAVIOR_DIAGNOSTICS_SQL = `
CREATE TABLE hook_traces (
  id TEXT PRIMARY KEY,
  session_id TEXT NOT NULL REFERENCES sessions(id),
  frame_id TEXT NULL REFERENCES frames(id),
  hook TEXT NOT NULL,
  release_id TEXT NOT NULL,
  origin TEXT NOT NULL CHECK (origin IN ('attention', 'turn', 'test', 'candidate')),
  inputs TEXT NOT NULL CHECK (json_valid(inputs)),
  output TEXT NULL CHECK (output IS NULL OR json_valid(output)),
  error TEXT NULL CHECK (error IS NULL OR json_valid(error)),
  truncated INTEGER NOT NULL CHECK (truncated IN (0, 1)),
  duration_ms REAL NOT NULL CHECK (duration_ms >= 0),
  at INTEGER NOT NULL
) STRICT;
CREATE INDEX hook_traces_frame ON hook_traces (frame_id) WHERE frame_id IS NOT NULL;
CREATE INDEX hook_traces_age ON hook_traces (session_id, error IS NULL, id);
CREATE TRIGGER hook_traces_immutable BEFORE UPDATE ON hook_traces WHEN
  NEW.id IS NOT OLD.id
  OR NEW.session_id IS NOT OLD.session_id
  OR NEW.hook IS NOT OLD.hook
  OR NEW.release_id IS NOT OLD.release_id
  OR NEW.origin IS NOT OLD.origin
  OR NEW.inputs IS NOT OLD.inputs
  OR NEW.output IS NOT OLD.output
  OR NEW.error IS NOT OLD.error
  OR NEW.truncated IS NOT OLD.truncated
  OR NEW.duration_ms IS NOT OLD.duration_ms
  OR NEW.at IS NOT OLD.at
BEGIN SELECT RAISE(ABORT, 'hook_traces identity is immutable'); END;
CREATE TRIGGER hook_traces_frame_once BEFORE UPDATE OF frame_id ON hook_traces
WHEN OLD.frame_id IS NOT NULL AND NEW.frame_id IS NOT OLD.frame_id
BEGIN SELECT RAISE(ABORT, 'a trace keeps its frame'); END;

CREATE TABLE behavior_candidates (
  id TEXT PRIMARY KEY,
  session_id TEXT NOT NULL REFERENCES sessions(id),
  draft_id TEXT NOT NULL,
  revision TEXT NOT NULL,
  action TEXT NOT NULL CHECK (action IN ('test', 'publish')),
  checks TEXT NOT NULL CHECK (json_valid(checks)),
  at INTEGER NOT NULL
) STRICT;
CREATE INDEX behavior_candidates_session ON behavior_candidates (session_id, id);
CREATE INDEX behavior_candidates_draft ON behavior_candidates (draft_id);
CREATE TRIGGER behavior_candidates_no_update BEFORE UPDATE ON behavior_candidates
BEGIN SELECT RAISE(ABORT, 'behavior_candidates rows are immutable'); END;
`;
