/**
 * The store's schema, part one: every table, as the 13 development migrations left them (the
 * text is SQLite's own, read back from `sqlite_master`). `_schema_rules.ts` adds the indexes
 * and triggers; `migrations.ts` runs both as version 1. `docs/store.md` says what each table
 * holds; "a fresh store's schema is the development chain's final schema, exactly" in
 * `tests/store/schema.test.ts` proves the text.
 *
 * @module
 */

/** Every `CREATE TABLE` (and the history index's `CREATE VIRTUAL TABLE`) of version 1. */
export const SCHEMA_TABLES = `
CREATE TABLE klbr_meta (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
) STRICT;

CREATE TABLE sessions (
  id TEXT PRIMARY KEY,
  created_at INTEGER NOT NULL,
  state TEXT NOT NULL DEFAULT 'open',
  context_epoch INTEGER NOT NULL DEFAULT 0,
  behavior_epoch INTEGER NOT NULL DEFAULT 0,
  active_release TEXT NULL REFERENCES releases(id),
  last_good_release TEXT NULL REFERENCES releases(id),
  next_seq INTEGER NOT NULL DEFAULT 1 CHECK (next_seq >= 1)
) STRICT;

CREATE TABLE events (
  session_id TEXT NOT NULL REFERENCES sessions(id),
  seq INTEGER NOT NULL CHECK (seq >= 1),
  kind TEXT NOT NULL,
  at INTEGER NOT NULL,
  body TEXT NOT NULL CHECK (json_valid(body)),
  PRIMARY KEY (session_id, seq)
) STRICT, WITHOUT ROWID;

CREATE TABLE frames (
  id TEXT PRIMARY KEY,
  session_id TEXT NOT NULL REFERENCES sessions(id),
  number INTEGER NOT NULL CHECK (number >= 1),
  input_ids TEXT NOT NULL CHECK (json_valid(input_ids)),
  routing TEXT NOT NULL CHECK (json_valid(routing)),
  context_epoch INTEGER NOT NULL,
  policy_revision TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('open', 'done', 'failed', 'abandoned')),
  lease_owner TEXT NULL,
  lease_expires_at INTEGER NULL,
  created_at INTEGER NOT NULL,
  ended_at INTEGER NULL,
  ended_reason TEXT NULL,
  UNIQUE (session_id, number),
  CHECK ((state = 'open') = (ended_at IS NULL))
) STRICT;

CREATE TABLE releases (
  id TEXT PRIMARY KEY CHECK (length(id) = 64 AND id NOT GLOB '*[^0-9a-f]*'),
  path TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  file_count INTEGER NOT NULL,
  byte_count INTEGER NOT NULL
) STRICT;

CREATE TABLE activations (
  session_id TEXT NOT NULL REFERENCES sessions(id),
  epoch INTEGER NOT NULL,
  release_id TEXT NOT NULL REFERENCES releases(id),
  at INTEGER NOT NULL,
  reason TEXT NOT NULL,
  PRIMARY KEY (session_id, epoch)
) STRICT;

CREATE TABLE kernel_generations (
  session_id TEXT NOT NULL REFERENCES sessions(id),
  generation INTEGER NOT NULL CHECK (generation >= 1),
  started_at INTEGER NOT NULL,
  ended_at INTEGER NULL,
  reason TEXT NOT NULL,
  skills_revision TEXT NOT NULL,
  behavior_revision TEXT NULL,
  PRIMARY KEY (session_id, generation)
) STRICT;

CREATE TABLE cells (
  id TEXT PRIMARY KEY,
  session_id TEXT NOT NULL REFERENCES sessions(id),
  generation INTEGER NOT NULL,
  frame_id TEXT NULL REFERENCES frames(id),
  tool_call_id TEXT NULL,
  code TEXT NOT NULL,
  outcome TEXT NULL
    CHECK (outcome IN ('ok', 'error', 'cancelled', 'timed_out', 'killed', 'interrupted')),
  result TEXT NULL CHECK (result IS NULL OR json_valid(result)),
  started_at INTEGER NOT NULL,
  ended_at INTEGER NULL,
  FOREIGN KEY (session_id, generation) REFERENCES kernel_generations(session_id, generation),
  CHECK ((outcome IS NULL) = (ended_at IS NULL))
) STRICT;

CREATE TABLE provider_items (
  session_id TEXT NOT NULL REFERENCES sessions(id),
  idx INTEGER NOT NULL CHECK (idx >= 1),
  frame_id TEXT NULL REFERENCES frames(id),
  role TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'tool')),
  tool_call_id TEXT NULL,
  message TEXT NOT NULL CHECK (json_valid(message)),
  at INTEGER NOT NULL, tokens INTEGER NOT NULL DEFAULT 0 CHECK (tokens >= 0),
  PRIMARY KEY (session_id, idx)
) STRICT, WITHOUT ROWID;

CREATE TABLE outbox (
  id TEXT PRIMARY KEY,
  session_id TEXT NOT NULL REFERENCES sessions(id),
  conversation TEXT NOT NULL,
  destination TEXT NOT NULL CHECK (json_valid(destination)),
  body TEXT NOT NULL,
  state TEXT NOT NULL
    CHECK (state IN ('pending', 'attempting', 'confirmed', 'failed', 'unknown')),
  attempts INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  remote_id TEXT NULL,
  error TEXT NULL,
  frame_id TEXT NULL REFERENCES frames(id),
  cell_id TEXT NULL,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL, kind TEXT NOT NULL DEFAULT 'message' CHECK (kind IN ('message', 'reaction')), nonce TEXT NULL, input_id TEXT NULL, not_before INTEGER NULL, first_attempt_at INTEGER NULL, tries TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(tries)), ordinal INTEGER NULL,
  CHECK ((state = 'confirmed') = (remote_id IS NOT NULL))
) STRICT;

CREATE TABLE context_summaries (
  session_id TEXT NOT NULL REFERENCES sessions(id),
  epoch INTEGER NOT NULL CHECK (epoch >= 1),
  covers_to_idx INTEGER NOT NULL CHECK (covers_to_idx >= 1),
  text TEXT NOT NULL,
  at INTEGER NOT NULL, source TEXT NOT NULL DEFAULT 'extractive'
  CHECK (source IN ('model', 'extractive')), digest TEXT NULL
  CHECK (digest IS NULL OR json_valid(digest)), tokens INTEGER NOT NULL DEFAULT 0 CHECK (tokens >= 0), fallback_reason TEXT NULL,
  PRIMARY KEY (session_id, epoch)
) STRICT, WITHOUT ROWID;

CREATE TABLE discord_gateway (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  session_id TEXT NULL,
  resume_url TEXT NULL,
  seq INTEGER NULL,
  self_id TEXT NULL,
  updated_at INTEGER NOT NULL
) STRICT;

CREATE TABLE discord_channels (
  channel_id TEXT PRIMARY KEY,
  parent_id TEXT NULL,
  last_message_id TEXT NULL,
  updated_at INTEGER NOT NULL
) STRICT;

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
  frame_id TEXT NULL REFERENCES frames(id), disposition TEXT NULL
  CHECK (disposition IS NULL OR disposition = 'expired'), disposition_reason TEXT NULL, disposed_at INTEGER NULL,
  UNIQUE (source_kind, dedupe_key),
  CHECK ((status = 'consumed') = (frame_id IS NOT NULL))
) STRICT;

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

CREATE TABLE open_tool_calls (
  session_id TEXT NOT NULL,
  call_id TEXT NOT NULL,
  idx INTEGER NOT NULL,
  pos INTEGER NOT NULL,
  PRIMARY KEY (session_id, call_id)
) STRICT, WITHOUT ROWID;

CREATE TABLE token_calibration (
  session_id TEXT NOT NULL REFERENCES sessions(id),
  route TEXT NOT NULL,
  ratio REAL NOT NULL CHECK (ratio > 0),
  samples INTEGER NOT NULL CHECK (samples >= 1),
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (session_id, route)
) STRICT, WITHOUT ROWID;

CREATE VIRTUAL TABLE history_fts USING fts5(
  ref UNINDEXED, session UNINDEXED, kind UNINDEXED, at UNINDEXED, text,
  tokenize = 'porter unicode61 remove_diacritics 2'
);

CREATE TABLE history_artifacts (
  id TEXT PRIMARY KEY CHECK (length(id) = 64),
  session_id TEXT NOT NULL REFERENCES sessions(id),
  cell_id TEXT NULL,
  bytes INTEGER NOT NULL CHECK (bytes >= 0),
  indexed_chars INTEGER NOT NULL CHECK (indexed_chars >= 0),
  at INTEGER NOT NULL
) STRICT;

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

CREATE TABLE behavior_candidates (
  id TEXT PRIMARY KEY,
  session_id TEXT NOT NULL REFERENCES sessions(id),
  draft_id TEXT NOT NULL,
  revision TEXT NOT NULL,
  action TEXT NOT NULL CHECK (action IN ('test', 'publish')),
  checks TEXT NOT NULL CHECK (json_valid(checks)),
  at INTEGER NOT NULL
) STRICT;

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

CREATE TABLE history_cursors (
  source TEXT PRIMARY KEY CHECK (source = 'inputs'),
  last_rowid INTEGER NOT NULL CHECK (last_rowid >= 0)
) STRICT, WITHOUT ROWID;
`;
