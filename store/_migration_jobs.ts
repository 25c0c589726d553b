/**
 * Migration 7: timers, jobs, child model calls and maintenance runs (`docs/jobs.md`), and the
 * inbox rebuilt to admit the `job` source kind.
 *
 * @module
 */

import { immutable } from "./_migration_sql.ts";

// The inbox is rebuilt to admit the `job` source kind (SQLite cannot change a CHECK in place); no
// other table references `inputs`, and dropping it fires none of its triggers. The rows go through
// a plain copy rather than a rename, which would open the connection's temp schema.
const INPUTS_COLUMNS = `id, session_id, source_kind, dedupe_key, conversation_id, author, body,
  received_at, admitted_at, admitted_seq, status, frame_id`;
/** The statements of migration 7. */
export const V7 = `
CREATE TABLE inputs_v5_copy AS SELECT ${INPUTS_COLUMNS} FROM inputs;
DROP TABLE inputs;
CREATE TABLE inputs (
  id TEXT PRIMARY KEY,
  session_id TEXT NOT NULL REFERENCES sessions(id),
  source_kind TEXT NOT NULL
    CHECK (source_kind IN ('local', 'discord', 'timer', 'job', 'system')),
  dedupe_key TEXT NOT NULL,
  conversation_id TEXT NOT NULL,
  author TEXT NOT NULL,
  body TEXT NOT NULL CHECK (json_valid(body)),
  received_at INTEGER NOT NULL,
  admitted_at INTEGER NOT NULL,
  admitted_seq INTEGER NOT NULL,
  status TEXT NOT NULL DEFAULT 'pending'
    CHECK (status IN ('pending', 'consumed', 'dismissed')),
  frame_id TEXT NULL REFERENCES frames(id),
  UNIQUE (source_kind, dedupe_key),
  CHECK ((status = 'consumed') = (frame_id IS NOT NULL))
) STRICT;
INSERT INTO inputs (${INPUTS_COLUMNS}) SELECT ${INPUTS_COLUMNS} FROM inputs_v5_copy;
DROP TABLE inputs_v5_copy;
CREATE INDEX inputs_pending ON inputs (session_id, admitted_seq) WHERE status = 'pending';
CREATE INDEX inputs_frame ON inputs (frame_id) WHERE frame_id IS NOT NULL;
${
  immutable("inputs", [
    "id",
    "session_id",
    "source_kind",
    "dedupe_key",
    "conversation_id",
    "author",
    "body",
    "received_at",
    "admitted_at",
    "admitted_seq",
  ])
}
CREATE TRIGGER inputs_no_delete BEFORE DELETE ON inputs
BEGIN SELECT RAISE(ABORT, 'inputs are never deleted'); END;

CREATE TABLE jobs (
  id TEXT PRIMARY KEY,
  session_id TEXT NOT NULL REFERENCES sessions(id),
  kind TEXT NOT NULL CHECK (kind IN ('code', 'agent')),
  name TEXT NOT NULL,
  code TEXT NOT NULL,
  route TEXT NULL,
  budget TEXT NOT NULL CHECK (json_valid(budget)),
  release_id TEXT NOT NULL REFERENCES releases(id),
  workspace TEXT NOT NULL,
  conversation TEXT NOT NULL,
  frame_id TEXT NULL REFERENCES frames(id),
  cell_id TEXT NULL REFERENCES cells(id),
  parent_job_id TEXT NULL REFERENCES jobs(id),
  state TEXT NOT NULL CHECK (state IN
    ('pending', 'running', 'done', 'failed', 'cancelled', 'interrupted', 'over_budget')),
  cause TEXT NOT NULL,
  pid INTEGER NULL,
  requests_used INTEGER NOT NULL DEFAULT 0 CHECK (requests_used >= 0),
  tokens_used INTEGER NOT NULL DEFAULT 0 CHECK (tokens_used >= 0),
  result TEXT NULL CHECK (result IS NULL OR json_valid(result)),
  input_id TEXT NULL REFERENCES inputs(id),
  created_at INTEGER NOT NULL,
  started_at INTEGER NULL,
  ended_at INTEGER NULL,
  CHECK ((state IN ('pending', 'running')) = (ended_at IS NULL)),
  CHECK (input_id IS NULL OR ended_at IS NOT NULL)
) STRICT;
CREATE INDEX jobs_open ON jobs (state, created_at) WHERE state IN ('pending', 'running');
CREATE INDEX jobs_cell ON jobs (cell_id) WHERE cell_id IS NOT NULL;
CREATE INDEX jobs_unannounced ON jobs (session_id) WHERE ended_at IS NOT NULL AND input_id IS NULL;
${
  immutable("jobs", [
    "id",
    "session_id",
    "kind",
    "name",
    "code",
    "route",
    "budget",
    "release_id",
    "workspace",
    "conversation",
    "frame_id",
    "cell_id",
    "parent_job_id",
    "created_at",
  ])
}
CREATE TRIGGER jobs_forward BEFORE UPDATE OF state ON jobs
WHEN OLD.state NOT IN ('pending', 'running') AND NEW.state IS NOT OLD.state
  OR OLD.state = 'running' AND NEW.state = 'pending'
BEGIN SELECT RAISE(ABORT, 'a job state only moves forward, and a finished job is final'); END;
CREATE TRIGGER jobs_final BEFORE UPDATE ON jobs
WHEN OLD.ended_at IS NOT NULL AND (NEW.cause IS NOT OLD.cause OR NEW.result IS NOT OLD.result
  OR NEW.ended_at IS NOT OLD.ended_at OR NEW.tokens_used IS NOT OLD.tokens_used
  OR NEW.requests_used IS NOT OLD.requests_used OR NEW.pid IS NOT OLD.pid
  OR OLD.input_id IS NOT NULL)
BEGIN SELECT RAISE(ABORT, 'a finished job only gains its completion input, once'); END;
CREATE TRIGGER jobs_no_delete BEFORE DELETE ON jobs
BEGIN SELECT RAISE(ABORT, 'jobs are never deleted'); END;

CREATE TABLE timers (
  id TEXT PRIMARY KEY,
  session_id TEXT NOT NULL REFERENCES sessions(id),
  due_at INTEGER NOT NULL,
  note TEXT NOT NULL,
  conversation TEXT NOT NULL,
  wait INTEGER NOT NULL CHECK (wait IN (0, 1)),
  frame_id TEXT NULL REFERENCES frames(id),
  cell_id TEXT NULL REFERENCES cells(id),
  job_id TEXT NULL REFERENCES jobs(id),
  state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'fired', 'cancelled')),
  cause TEXT NULL,
  input_id TEXT NULL REFERENCES inputs(id),
  created_at INTEGER NOT NULL,
  ended_at INTEGER NULL,
  CHECK ((state = 'pending') = (ended_at IS NULL)),
  CHECK ((state = 'fired') = (input_id IS NOT NULL))
) STRICT;
CREATE INDEX timers_due ON timers (due_at) WHERE state = 'pending';
CREATE INDEX timers_cell ON timers (cell_id) WHERE cell_id IS NOT NULL;
${
  immutable("timers", [
    "id",
    "session_id",
    "due_at",
    "note",
    "conversation",
    "wait",
    "frame_id",
    "cell_id",
    "job_id",
    "created_at",
  ])
}
CREATE TRIGGER timers_final BEFORE UPDATE ON timers WHEN OLD.state <> 'pending'
BEGIN SELECT RAISE(ABORT, 'a fired or cancelled timer is final'); END;
CREATE TRIGGER timers_no_delete BEFORE DELETE ON timers
BEGIN SELECT RAISE(ABORT, 'timers are never deleted'); END;

CREATE TABLE model_calls (
  id TEXT PRIMARY KEY,
  session_id TEXT NOT NULL REFERENCES sessions(id),
  kind TEXT NOT NULL CHECK (kind IN ('turn', 'llm', 'agent')),
  route TEXT NOT NULL,
  frame_id TEXT NULL REFERENCES frames(id),
  cell_id TEXT NULL REFERENCES cells(id),
  job_id TEXT NULL REFERENCES jobs(id),
  request TEXT NOT NULL CHECK (json_valid(request)),
  state TEXT NOT NULL CHECK (state IN ('requested', 'done', 'failed')),
  response TEXT NULL CHECK (response IS NULL OR json_valid(response)),
  error TEXT NULL,
  prompt_tokens INTEGER NULL CHECK (prompt_tokens >= 0),
  completion_tokens INTEGER NULL CHECK (completion_tokens >= 0),
  created_at INTEGER NOT NULL,
  ended_at INTEGER NULL,
  CHECK ((state = 'requested') = (ended_at IS NULL))
) STRICT;
CREATE INDEX model_calls_at ON model_calls (created_at);
CREATE INDEX model_calls_job ON model_calls (job_id) WHERE job_id IS NOT NULL;
CREATE INDEX model_calls_cell ON model_calls (cell_id) WHERE cell_id IS NOT NULL;
CREATE INDEX model_calls_open ON model_calls (session_id) WHERE state = 'requested';
${
  immutable("model_calls", [
    "id",
    "session_id",
    "kind",
    "route",
    "frame_id",
    "cell_id",
    "job_id",
    "request",
    "created_at",
  ])
}
CREATE TRIGGER model_calls_final BEFORE UPDATE ON model_calls WHEN OLD.state <> 'requested'
BEGIN SELECT RAISE(ABORT, 'a finished model call is final'); END;
CREATE TRIGGER model_calls_no_delete BEFORE DELETE ON model_calls
BEGIN SELECT RAISE(ABORT, 'model calls are never deleted'); END;

CREATE TABLE maintenance_runs (
  id TEXT PRIMARY KEY,
  started_at INTEGER NOT NULL,
  trigger TEXT NOT NULL,
  policy TEXT NOT NULL CHECK (json_valid(policy)),
  drafts TEXT NOT NULL CHECK (json_valid(drafts)),
  releases TEXT NOT NULL CHECK (json_valid(releases)),
  state TEXT NOT NULL CHECK (state IN ('started', 'done')),
  errors TEXT NULL CHECK (errors IS NULL OR json_valid(errors)),
  ended_at INTEGER NULL,
  CHECK ((state = 'done') = (ended_at IS NOT NULL))
) STRICT;
${immutable("maintenance_runs", ["id", "started_at", "trigger", "policy", "drafts", "releases"])}
CREATE TRIGGER maintenance_runs_final BEFORE UPDATE ON maintenance_runs WHEN OLD.state = 'done'
BEGIN SELECT RAISE(ABORT, 'a finished maintenance run is final'); END;
CREATE TRIGGER maintenance_runs_no_delete BEFORE DELETE ON maintenance_runs
BEGIN SELECT RAISE(ABORT, 'maintenance runs are never deleted'); END;
`;
