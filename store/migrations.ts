/**
 * The store's schema, as one ordered list of migrations.
 *
 * `PRAGMA user_version` is the number of the last migration applied; the `klbr_meta` row
 * `format = 'klbr-runtime'` marks a file as klbr's. Each migration runs in its own
 * `BEGIN IMMEDIATE` transaction together with the `user_version` bump, so a crash leaves the
 * file at one version or the next, never between. Migrations are only ever appended.
 *
 * @module
 */

import type { DatabaseSync } from "node:sqlite";
import { assert } from "../runtime/core/mod.ts";
import { appendOnly, immutable } from "./_migration_sql.ts";
import { V7 } from "./_migration_jobs.ts";
import { CONTEXT_SCHEMA } from "./_context_schema.ts";
import { BEHAVIOR_DIAGNOSTICS_SQL } from "./_behavior_schema.ts";
import { V10 } from "./_migration_faults.ts";
import { V13 } from "./_migration_cursor.ts";

/** The value of the `klbr_meta` `format` row that marks a klbr store. */
export const STORE_FORMAT = "klbr-runtime";

/** One schema step: applied when `user_version` is below `version`. */
export interface Migration {
  /** 1, 2, 3, … without gaps. */
  readonly version: number;
  /** A short name for logs. */
  readonly name: string;
  /** The statements, run in one transaction. */
  readonly sql: string;
}

const V1 = `
CREATE TABLE klbr_meta (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
) STRICT;
INSERT INTO klbr_meta (key, value) VALUES ('format', '${STORE_FORMAT}');

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
CREATE TRIGGER sessions_no_delete BEFORE DELETE ON sessions
BEGIN SELECT RAISE(ABORT, 'sessions are never deleted'); END;
${immutable("sessions", ["id", "created_at"])}
CREATE TRIGGER sessions_seq_forward BEFORE UPDATE OF next_seq ON sessions
WHEN NEW.next_seq < OLD.next_seq
BEGIN SELECT RAISE(ABORT, 'sessions.next_seq never goes back'); END;

CREATE TABLE events (
  session_id TEXT NOT NULL REFERENCES sessions(id),
  seq INTEGER NOT NULL CHECK (seq >= 1),
  kind TEXT NOT NULL,
  at INTEGER NOT NULL,
  body TEXT NOT NULL CHECK (json_valid(body)),
  PRIMARY KEY (session_id, seq)
) STRICT, WITHOUT ROWID;
${appendOnly("events")}

CREATE TABLE inputs (
  id TEXT PRIMARY KEY,
  session_id TEXT NOT NULL REFERENCES sessions(id),
  source_kind TEXT NOT NULL CHECK (source_kind IN ('local', 'discord', 'timer', 'system')),
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
CREATE INDEX frames_open ON frames (lease_expires_at) WHERE state = 'open';
${
  immutable("frames", [
    "id",
    "session_id",
    "number",
    "input_ids",
    "routing",
    "context_epoch",
    "policy_revision",
    "created_at",
  ])
}
CREATE TRIGGER frames_final BEFORE UPDATE ON frames WHEN OLD.state <> 'open'
BEGIN SELECT RAISE(ABORT, 'a finished frame is final'); END;
CREATE TRIGGER frames_no_delete BEFORE DELETE ON frames
BEGIN SELECT RAISE(ABORT, 'frames are never deleted'); END;

CREATE TABLE releases (
  id TEXT PRIMARY KEY CHECK (length(id) = 64 AND id NOT GLOB '*[^0-9a-f]*'),
  path TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  file_count INTEGER NOT NULL,
  byte_count INTEGER NOT NULL
) STRICT;
${appendOnly("releases")}

CREATE TABLE activations (
  session_id TEXT NOT NULL REFERENCES sessions(id),
  epoch INTEGER NOT NULL,
  release_id TEXT NOT NULL REFERENCES releases(id),
  at INTEGER NOT NULL,
  reason TEXT NOT NULL,
  PRIMARY KEY (session_id, epoch)
) STRICT;
${appendOnly("activations")}

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
CREATE TRIGGER kernel_generations_end_once BEFORE UPDATE ON kernel_generations
WHEN OLD.ended_at IS NOT NULL OR NEW.session_id IS NOT OLD.session_id
  OR NEW.generation IS NOT OLD.generation OR NEW.started_at IS NOT OLD.started_at
  OR NEW.reason IS NOT OLD.reason OR NEW.skills_revision IS NOT OLD.skills_revision
  OR NEW.behavior_revision IS NOT OLD.behavior_revision
BEGIN SELECT RAISE(ABORT, 'a kernel generation only ends, once'); END;
CREATE TRIGGER kernel_generations_no_delete BEFORE DELETE ON kernel_generations
BEGIN SELECT RAISE(ABORT, 'kernel generations are never deleted'); END;

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
CREATE INDEX cells_open ON cells (session_id) WHERE outcome IS NULL;
${
  immutable("cells", [
    "id",
    "session_id",
    "generation",
    "frame_id",
    "tool_call_id",
    "code",
    "started_at",
  ])
}
CREATE TRIGGER cells_finish_once BEFORE UPDATE ON cells WHEN OLD.outcome IS NOT NULL
BEGIN SELECT RAISE(ABORT, 'a finished cell is final'); END;
CREATE TRIGGER cells_no_delete BEFORE DELETE ON cells
BEGIN SELECT RAISE(ABORT, 'cells are never deleted'); END;
`;

// The provider sequence of a session: every message sent to or received from the model, in
// order. A tool call's item is written before its cell runs, its result item after.
const V2 = `
CREATE TABLE provider_items (
  session_id TEXT NOT NULL REFERENCES sessions(id),
  idx INTEGER NOT NULL CHECK (idx >= 1),
  frame_id TEXT NULL REFERENCES frames(id),
  role TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'tool')),
  tool_call_id TEXT NULL,
  message TEXT NOT NULL CHECK (json_valid(message)),
  at INTEGER NOT NULL,
  PRIMARY KEY (session_id, idx)
) STRICT, WITHOUT ROWID;
CREATE UNIQUE INDEX provider_items_tool_result ON provider_items (session_id, tool_call_id)
  WHERE role = 'tool';
${appendOnly("provider_items")}
`;

// The Discord outbox: one row per message the agent asked to send. Its state says honestly
// what is known about the remote send: `attempting` is written before the request, and a
// request whose answer was lost ends `unknown`, never retried.
const V3 = `
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
  updated_at INTEGER NOT NULL,
  CHECK ((state = 'confirmed') = (remote_id IS NOT NULL))
) STRICT;
CREATE INDEX outbox_open ON outbox (state, created_at) WHERE state IN ('pending', 'attempting');
${
  immutable("outbox", [
    "id",
    "session_id",
    "conversation",
    "destination",
    "body",
    "frame_id",
    "cell_id",
    "created_at",
  ])
}
CREATE TRIGGER outbox_final BEFORE UPDATE ON outbox
WHEN OLD.state IN ('confirmed', 'failed', 'unknown')
BEGIN SELECT RAISE(ABORT, 'a finished outbox row is final'); END;
CREATE TRIGGER outbox_no_delete BEFORE DELETE ON outbox
BEGIN SELECT RAISE(ABORT, 'outbox rows are never deleted'); END;
`;

// Context summaries: what replaced the oldest provider items in a request. Each compaction
// bumps the session's context epoch and covers the items up to `covers_to_idx`; the items
// themselves are never changed or removed.
const V4 = `
CREATE TABLE context_summaries (
  session_id TEXT NOT NULL REFERENCES sessions(id),
  epoch INTEGER NOT NULL CHECK (epoch >= 1),
  covers_to_idx INTEGER NOT NULL CHECK (covers_to_idx >= 1),
  text TEXT NOT NULL,
  at INTEGER NOT NULL,
  PRIMARY KEY (session_id, epoch)
) STRICT, WITHOUT ROWID;
${appendOnly("context_summaries")}
`;

// Frames carry no lease: the store's owner lock already makes every open frame found at start
// a dead owner's, so nothing reads the lease columns. They stay in the table, always NULL from
// here on (dropping a column rebuilds the schema in a temp database this store never opens);
// the open-frame index follows the one query that reads open frames, by session.
const V5 = `
DROP INDEX frames_open;
CREATE INDEX frames_open ON frames (session_id, number) WHERE state = 'open';
`;

// Discord that loses nothing: the outbox gains the nonce a send carries, the input it answers,
// reactions, `not_before` (a 429's retry_after or a reconciliation's backoff; NULL on `unknown`
// leaves the row to the operator) and its reconciliation tries; `unknown` may become
// `confirmed` on evidence, nothing else. The gateway's resume state and each channel's backfill
// cursor (the last admitted message id; threads name their parent) are kept across restarts.
const V6 = `
ALTER TABLE outbox ADD COLUMN kind TEXT NOT NULL DEFAULT 'message' CHECK (kind IN ('message', 'reaction'));
ALTER TABLE outbox ADD COLUMN nonce TEXT NULL;
ALTER TABLE outbox ADD COLUMN input_id TEXT NULL;
ALTER TABLE outbox ADD COLUMN not_before INTEGER NULL;
ALTER TABLE outbox ADD COLUMN first_attempt_at INTEGER NULL;
ALTER TABLE outbox ADD COLUMN tries TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(tries));
CREATE UNIQUE INDEX outbox_nonce ON outbox (nonce) WHERE nonce IS NOT NULL;
DROP INDEX outbox_open;
CREATE INDEX outbox_open ON outbox (state, created_at) WHERE state IN ('pending', 'attempting', 'unknown');
DROP TRIGGER outbox_immutable;
${
  immutable(
    "outbox",
    "id session_id conversation destination body frame_id cell_id created_at kind nonce input_id"
      .split(" "),
  )
}
DROP TRIGGER outbox_final;
CREATE TRIGGER outbox_final BEFORE UPDATE ON outbox
WHEN OLD.state IN ('confirmed', 'failed')
  OR (OLD.state = 'unknown' AND NEW.state NOT IN ('unknown', 'confirmed'))
BEGIN SELECT RAISE(ABORT, 'a finished outbox row is final'); END;

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
`;

// A conversation's inputs in order: a turn reads the ambient talk before its own inputs.
const V11 = `
CREATE INDEX inputs_conversation ON inputs (session_id, conversation_id, admitted_seq);
`;

// What pins a release, without reading history: maintenance asks the frames for one recent frame
// of each release instead of scanning every frame, and finds the running generations without
// scanning every generation.
const V12 = `
CREATE INDEX frames_revision ON frames (policy_revision, created_at);
CREATE INDEX kernel_generations_running ON kernel_generations (session_id) WHERE ended_at IS NULL;
`;

/** Every migration, in order. Append only; never edit a released entry. */
export const MIGRATIONS: readonly Migration[] = [
  { version: 1, name: "runtime tables", sql: V1 },
  { version: 2, name: "provider items", sql: V2 },
  { version: 3, name: "discord outbox", sql: V3 },
  { version: 4, name: "context summaries", sql: V4 },
  { version: 5, name: "frames without leases", sql: V5 },
  { version: 6, name: "discord resume and reconciliation", sql: V6 },
  { version: 7, name: "timers, jobs, model calls and maintenance", sql: V7 },
  { version: 8, name: "context budgets, summaries and history index", sql: CONTEXT_SCHEMA },
  { version: 9, name: "hook traces and failed candidates", sql: BEHAVIOR_DIAGNOSTICS_SQL },
  { version: 10, name: "effects, input dispositions, relative release paths", sql: V10 },
  { version: 11, name: "inputs by conversation", sql: V11 },
  { version: 12, name: "release pins by index", sql: V12 },
  { version: 13, name: "inputs indexed after admission", sql: V13 },
];

/** The `user_version` a fully migrated store has. */
export const LATEST_VERSION: number = MIGRATIONS[MIGRATIONS.length - 1].version;

/**
 * Applies every migration above the file's `user_version`, each in its own transaction.
 *
 * When it returns, `user_version` is {@linkcode LATEST_VERSION} and `klbr_meta.format` is
 * {@linkcode STORE_FORMAT}. The caller has already refused a file newer than this build.
 *
 * @throws {Error} the SQLite error of a failing migration; that migration is rolled back.
 */
export function migrate(db: DatabaseSync): void {
  const current = (db.prepare("PRAGMA user_version").get() as { user_version: number })
    .user_version;
  assert(current <= LATEST_VERSION, `store version ${current} above ${LATEST_VERSION}`);
  for (const [index, migration] of MIGRATIONS.entries()) {
    assert(migration.version === index + 1, "migration versions are 1, 2, 3, …");
    if (migration.version <= current) continue;
    db.exec("BEGIN IMMEDIATE");
    try {
      db.exec(migration.sql);
      db.exec(`PRAGMA user_version = ${migration.version}`);
      db.exec("COMMIT");
    } catch (error) {
      if (db.isTransaction) db.exec("ROLLBACK");
      throw error;
    }
  }
}
