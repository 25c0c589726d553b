/**
 * The store's schema, part two: the indexes and the triggers that keep rows immutable,
 * append-only or moving forward, and that feed the history index, as the 13 development
 * migrations left them (SQLite's own text, read back from `sqlite_master`). They run after
 * `SCHEMA_TABLES` of `_schema_tables.ts`, in the same transaction (`migrations.ts`).
 *
 * @module
 */

/** Every `CREATE INDEX` and `CREATE TRIGGER` of version 1. */
export const SCHEMA_RULES = `
CREATE INDEX cells_open ON cells (session_id) WHERE outcome IS NULL;

CREATE UNIQUE INDEX provider_items_tool_result ON provider_items (session_id, tool_call_id)
  WHERE role = 'tool';

CREATE INDEX frames_open ON frames (session_id, number) WHERE state = 'open';

CREATE UNIQUE INDEX outbox_nonce ON outbox (nonce) WHERE nonce IS NOT NULL;

CREATE INDEX outbox_open ON outbox (state, created_at) WHERE state IN ('pending', 'attempting', 'unknown');

CREATE INDEX inputs_pending ON inputs (session_id, admitted_seq) WHERE status = 'pending';

CREATE INDEX inputs_frame ON inputs (frame_id) WHERE frame_id IS NOT NULL;

CREATE INDEX jobs_open ON jobs (state, created_at) WHERE state IN ('pending', 'running');

CREATE INDEX jobs_cell ON jobs (cell_id) WHERE cell_id IS NOT NULL;

CREATE INDEX jobs_unannounced ON jobs (session_id) WHERE ended_at IS NOT NULL AND input_id IS NULL;

CREATE INDEX timers_due ON timers (due_at) WHERE state = 'pending';

CREATE INDEX timers_cell ON timers (cell_id) WHERE cell_id IS NOT NULL;

CREATE INDEX model_calls_at ON model_calls (created_at);

CREATE INDEX model_calls_job ON model_calls (job_id) WHERE job_id IS NOT NULL;

CREATE INDEX model_calls_cell ON model_calls (cell_id) WHERE cell_id IS NOT NULL;

CREATE INDEX model_calls_open ON model_calls (session_id) WHERE state = 'requested';

CREATE INDEX cells_frame ON cells (frame_id) WHERE frame_id IS NOT NULL;

CREATE INDEX cells_tool_call ON cells (session_id, tool_call_id) WHERE tool_call_id IS NOT NULL;

CREATE INDEX events_send_cell ON events (json_extract(body, '$.cell_id')) WHERE kind = 'send';

CREATE INDEX outbox_cell ON outbox (cell_id) WHERE cell_id IS NOT NULL;

CREATE INDEX outbox_pending ON outbox (created_at, id) WHERE state = 'pending';

CREATE INDEX outbox_attempting ON outbox (session_id, created_at, id) WHERE state = 'attempting';

CREATE INDEX outbox_work ON outbox (json_extract(destination, '$.channel_id'), created_at, id)
  WHERE state = 'pending' OR (state = 'unknown' AND not_before IS NOT NULL);

CREATE INDEX hook_traces_frame ON hook_traces (frame_id) WHERE frame_id IS NOT NULL;

CREATE INDEX hook_traces_age ON hook_traces (session_id, error IS NULL, id);

CREATE INDEX behavior_candidates_session ON behavior_candidates (session_id, id);

CREATE INDEX behavior_candidates_draft ON behavior_candidates (draft_id);

CREATE UNIQUE INDEX effects_key ON effects (session_id, kind, key) WHERE key IS NOT NULL;

CREATE INDEX provider_items_frame ON provider_items (frame_id) WHERE frame_id IS NOT NULL;

CREATE INDEX inputs_conversation ON inputs (session_id, conversation_id, admitted_seq);

CREATE INDEX frames_revision ON frames (policy_revision, created_at);

CREATE INDEX kernel_generations_running ON kernel_generations (session_id) WHERE ended_at IS NULL;

CREATE TRIGGER sessions_no_delete BEFORE DELETE ON sessions
BEGIN SELECT RAISE(ABORT, 'sessions are never deleted'); END;

CREATE TRIGGER sessions_immutable BEFORE UPDATE ON sessions WHEN NEW.id IS NOT OLD.id OR NEW.created_at IS NOT OLD.created_at
BEGIN SELECT RAISE(ABORT, 'sessions identity is immutable'); END;

CREATE TRIGGER sessions_seq_forward BEFORE UPDATE OF next_seq ON sessions
WHEN NEW.next_seq < OLD.next_seq
BEGIN SELECT RAISE(ABORT, 'sessions.next_seq never goes back'); END;

CREATE TRIGGER events_no_update BEFORE UPDATE ON events
BEGIN SELECT RAISE(ABORT, 'events is append-only'); END;

CREATE TRIGGER events_no_delete BEFORE DELETE ON events
BEGIN SELECT RAISE(ABORT, 'events is append-only'); END;

CREATE TRIGGER frames_immutable BEFORE UPDATE ON frames WHEN NEW.id IS NOT OLD.id OR NEW.session_id IS NOT OLD.session_id OR NEW.number IS NOT OLD.number OR NEW.input_ids IS NOT OLD.input_ids OR NEW.routing IS NOT OLD.routing OR NEW.context_epoch IS NOT OLD.context_epoch OR NEW.policy_revision IS NOT OLD.policy_revision OR NEW.created_at IS NOT OLD.created_at
BEGIN SELECT RAISE(ABORT, 'frames identity is immutable'); END;

CREATE TRIGGER frames_final BEFORE UPDATE ON frames WHEN OLD.state <> 'open'
BEGIN SELECT RAISE(ABORT, 'a finished frame is final'); END;

CREATE TRIGGER frames_no_delete BEFORE DELETE ON frames
BEGIN SELECT RAISE(ABORT, 'frames are never deleted'); END;

CREATE TRIGGER releases_no_delete BEFORE DELETE ON releases
BEGIN SELECT RAISE(ABORT, 'releases is append-only'); END;

CREATE TRIGGER activations_no_update BEFORE UPDATE ON activations
BEGIN SELECT RAISE(ABORT, 'activations is append-only'); END;

CREATE TRIGGER activations_no_delete BEFORE DELETE ON activations
BEGIN SELECT RAISE(ABORT, 'activations is append-only'); END;

CREATE TRIGGER kernel_generations_end_once BEFORE UPDATE ON kernel_generations
WHEN OLD.ended_at IS NOT NULL OR NEW.session_id IS NOT OLD.session_id
  OR NEW.generation IS NOT OLD.generation OR NEW.started_at IS NOT OLD.started_at
  OR NEW.reason IS NOT OLD.reason OR NEW.skills_revision IS NOT OLD.skills_revision
  OR NEW.behavior_revision IS NOT OLD.behavior_revision
BEGIN SELECT RAISE(ABORT, 'a kernel generation only ends, once'); END;

CREATE TRIGGER kernel_generations_no_delete BEFORE DELETE ON kernel_generations
BEGIN SELECT RAISE(ABORT, 'kernel generations are never deleted'); END;

CREATE TRIGGER cells_immutable BEFORE UPDATE ON cells WHEN NEW.id IS NOT OLD.id OR NEW.session_id IS NOT OLD.session_id OR NEW.generation IS NOT OLD.generation OR NEW.frame_id IS NOT OLD.frame_id OR NEW.tool_call_id IS NOT OLD.tool_call_id OR NEW.code IS NOT OLD.code OR NEW.started_at IS NOT OLD.started_at
BEGIN SELECT RAISE(ABORT, 'cells identity is immutable'); END;

CREATE TRIGGER cells_finish_once BEFORE UPDATE ON cells WHEN OLD.outcome IS NOT NULL
BEGIN SELECT RAISE(ABORT, 'a finished cell is final'); END;

CREATE TRIGGER cells_no_delete BEFORE DELETE ON cells
BEGIN SELECT RAISE(ABORT, 'cells are never deleted'); END;

CREATE TRIGGER provider_items_no_delete BEFORE DELETE ON provider_items
BEGIN SELECT RAISE(ABORT, 'provider_items is append-only'); END;

CREATE TRIGGER outbox_no_delete BEFORE DELETE ON outbox
BEGIN SELECT RAISE(ABORT, 'outbox rows are never deleted'); END;

CREATE TRIGGER context_summaries_no_update BEFORE UPDATE ON context_summaries
BEGIN SELECT RAISE(ABORT, 'context_summaries is append-only'); END;

CREATE TRIGGER context_summaries_no_delete BEFORE DELETE ON context_summaries
BEGIN SELECT RAISE(ABORT, 'context_summaries is append-only'); END;

CREATE TRIGGER outbox_immutable BEFORE UPDATE ON outbox WHEN NEW.id IS NOT OLD.id OR NEW.session_id IS NOT OLD.session_id OR NEW.conversation IS NOT OLD.conversation OR NEW.destination IS NOT OLD.destination OR NEW.body IS NOT OLD.body OR NEW.frame_id IS NOT OLD.frame_id OR NEW.cell_id IS NOT OLD.cell_id OR NEW.created_at IS NOT OLD.created_at OR NEW.kind IS NOT OLD.kind OR NEW.nonce IS NOT OLD.nonce OR NEW.input_id IS NOT OLD.input_id
BEGIN SELECT RAISE(ABORT, 'outbox identity is immutable'); END;

CREATE TRIGGER outbox_final BEFORE UPDATE ON outbox
WHEN OLD.state IN ('confirmed', 'failed')
  OR (OLD.state = 'unknown' AND NEW.state NOT IN ('unknown', 'confirmed'))
BEGIN SELECT RAISE(ABORT, 'a finished outbox row is final'); END;

CREATE TRIGGER inputs_immutable BEFORE UPDATE ON inputs WHEN NEW.id IS NOT OLD.id OR NEW.session_id IS NOT OLD.session_id OR NEW.source_kind IS NOT OLD.source_kind OR NEW.dedupe_key IS NOT OLD.dedupe_key OR NEW.conversation_id IS NOT OLD.conversation_id OR NEW.author IS NOT OLD.author OR NEW.body IS NOT OLD.body OR NEW.received_at IS NOT OLD.received_at OR NEW.admitted_at IS NOT OLD.admitted_at OR NEW.admitted_seq IS NOT OLD.admitted_seq
BEGIN SELECT RAISE(ABORT, 'inputs identity is immutable'); END;

CREATE TRIGGER inputs_no_delete BEFORE DELETE ON inputs
BEGIN SELECT RAISE(ABORT, 'inputs are never deleted'); END;

CREATE TRIGGER jobs_immutable BEFORE UPDATE ON jobs WHEN NEW.id IS NOT OLD.id OR NEW.session_id IS NOT OLD.session_id OR NEW.kind IS NOT OLD.kind OR NEW.name IS NOT OLD.name OR NEW.code IS NOT OLD.code OR NEW.route IS NOT OLD.route OR NEW.budget IS NOT OLD.budget OR NEW.release_id IS NOT OLD.release_id OR NEW.workspace IS NOT OLD.workspace OR NEW.conversation IS NOT OLD.conversation OR NEW.frame_id IS NOT OLD.frame_id OR NEW.cell_id IS NOT OLD.cell_id OR NEW.parent_job_id IS NOT OLD.parent_job_id OR NEW.created_at IS NOT OLD.created_at
BEGIN SELECT RAISE(ABORT, 'jobs identity is immutable'); END;

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

CREATE TRIGGER timers_immutable BEFORE UPDATE ON timers WHEN NEW.id IS NOT OLD.id OR NEW.session_id IS NOT OLD.session_id OR NEW.due_at IS NOT OLD.due_at OR NEW.note IS NOT OLD.note OR NEW.conversation IS NOT OLD.conversation OR NEW.wait IS NOT OLD.wait OR NEW.frame_id IS NOT OLD.frame_id OR NEW.cell_id IS NOT OLD.cell_id OR NEW.job_id IS NOT OLD.job_id OR NEW.created_at IS NOT OLD.created_at
BEGIN SELECT RAISE(ABORT, 'timers identity is immutable'); END;

CREATE TRIGGER timers_final BEFORE UPDATE ON timers WHEN OLD.state <> 'pending'
BEGIN SELECT RAISE(ABORT, 'a fired or cancelled timer is final'); END;

CREATE TRIGGER timers_no_delete BEFORE DELETE ON timers
BEGIN SELECT RAISE(ABORT, 'timers are never deleted'); END;

CREATE TRIGGER model_calls_immutable BEFORE UPDATE ON model_calls WHEN NEW.id IS NOT OLD.id OR NEW.session_id IS NOT OLD.session_id OR NEW.kind IS NOT OLD.kind OR NEW.route IS NOT OLD.route OR NEW.frame_id IS NOT OLD.frame_id OR NEW.cell_id IS NOT OLD.cell_id OR NEW.job_id IS NOT OLD.job_id OR NEW.request IS NOT OLD.request OR NEW.created_at IS NOT OLD.created_at
BEGIN SELECT RAISE(ABORT, 'model_calls identity is immutable'); END;

CREATE TRIGGER model_calls_final BEFORE UPDATE ON model_calls WHEN OLD.state <> 'requested'
BEGIN SELECT RAISE(ABORT, 'a finished model call is final'); END;

CREATE TRIGGER model_calls_no_delete BEFORE DELETE ON model_calls
BEGIN SELECT RAISE(ABORT, 'model calls are never deleted'); END;

CREATE TRIGGER maintenance_runs_immutable BEFORE UPDATE ON maintenance_runs WHEN NEW.id IS NOT OLD.id OR NEW.started_at IS NOT OLD.started_at OR NEW.trigger IS NOT OLD.trigger OR NEW.policy IS NOT OLD.policy OR NEW.drafts IS NOT OLD.drafts OR NEW.releases IS NOT OLD.releases
BEGIN SELECT RAISE(ABORT, 'maintenance_runs identity is immutable'); END;

CREATE TRIGGER maintenance_runs_final BEFORE UPDATE ON maintenance_runs WHEN OLD.state = 'done'
BEGIN SELECT RAISE(ABORT, 'a finished maintenance run is final'); END;

CREATE TRIGGER maintenance_runs_no_delete BEFORE DELETE ON maintenance_runs
BEGIN SELECT RAISE(ABORT, 'maintenance runs are never deleted'); END;

CREATE TRIGGER provider_items_no_update BEFORE UPDATE ON provider_items
BEGIN SELECT RAISE(ABORT, 'provider_items is append-only'); END;

CREATE TRIGGER provider_items_calls_open AFTER INSERT ON provider_items
WHEN NEW.role = 'assistant' AND json_type(NEW.message, '$.tool_calls') = 'array'
BEGIN
  INSERT OR IGNORE INTO open_tool_calls (session_id, call_id, idx, pos)
  SELECT NEW.session_id, json_extract(value, '$.id'), NEW.idx, key
  FROM json_each(NEW.message, '$.tool_calls') WHERE json_type(value, '$.id') = 'text';
END;

CREATE TRIGGER provider_items_calls_close AFTER INSERT ON provider_items WHEN NEW.role = 'tool'
BEGIN
  DELETE FROM open_tool_calls WHERE session_id = NEW.session_id AND call_id = NEW.tool_call_id;
END;

CREATE TRIGGER history_artifacts_no_update BEFORE UPDATE ON history_artifacts
BEGIN SELECT RAISE(ABORT, 'history_artifacts is append-only'); END;

CREATE TRIGGER history_artifacts_no_delete BEFORE DELETE ON history_artifacts
BEGIN SELECT RAISE(ABORT, 'history_artifacts is append-only'); END;

CREATE TRIGGER events_send_history AFTER INSERT ON events WHEN NEW.kind = 'send'
BEGIN
  INSERT INTO history_fts (ref, session, kind, at, text) VALUES ('send:' || NEW.seq, NEW.session_id, 'send', NEW.at, json_extract(NEW.body, '$.text'));
END;

CREATE TRIGGER outbox_history AFTER INSERT ON outbox WHEN NEW.kind = 'message'
BEGIN
  INSERT INTO history_fts (ref, session, kind, at, text) VALUES ('outbox:' || NEW.id, NEW.session_id, 'discord', NEW.created_at, NEW.body);
END;

CREATE TRIGGER provider_items_history AFTER INSERT ON provider_items WHEN NEW.role = 'assistant' AND json_type(NEW.message, '$.content') = 'text'
      AND json_extract(NEW.message, '$.content') <> ''
BEGIN
  INSERT INTO history_fts (ref, session, kind, at, text) VALUES ('item:' || NEW.idx, NEW.session_id, 'scratchpad', NEW.at,
      json_extract(NEW.message, '$.content'));
END;

CREATE TRIGGER cells_history AFTER INSERT ON cells WHEN 1
BEGIN
  INSERT INTO history_fts (ref, session, kind, at, text) VALUES ('cell:' || NEW.id, NEW.session_id, 'cell', NEW.started_at, NEW.code);
END;

CREATE TRIGGER cells_output_history AFTER UPDATE OF outcome ON cells WHEN OLD.outcome IS NULL AND NEW.outcome IS NOT NULL
BEGIN
  INSERT INTO history_fts (ref, session, kind, at, text) VALUES ('output:' || NEW.id, NEW.session_id, 'output', NEW.ended_at, concat_ws(char(10), json_extract(NEW.result, '$.stdout'),
  json_extract(NEW.result, '$.stderr'), json_extract(NEW.result, '$.value'),
  json_extract(NEW.result, '$.error.type'), json_extract(NEW.result, '$.error.message'),
  json_extract(NEW.result, '$.interrupted')));
END;

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

CREATE TRIGGER behavior_candidates_no_update BEFORE UPDATE ON behavior_candidates
BEGIN SELECT RAISE(ABORT, 'behavior_candidates rows are immutable'); END;

CREATE TRIGGER effects_no_update BEFORE UPDATE ON effects
BEGIN SELECT RAISE(ABORT, 'effects is append-only'); END;

CREATE TRIGGER effects_no_delete BEFORE DELETE ON effects
BEGIN SELECT RAISE(ABORT, 'effects is append-only'); END;

CREATE TRIGGER releases_no_update BEFORE UPDATE ON releases
BEGIN SELECT RAISE(ABORT, 'releases is append-only'); END;

CREATE TRIGGER history_cursors_forward BEFORE UPDATE ON history_cursors
WHEN NEW.last_rowid < OLD.last_rowid OR NEW.source IS NOT OLD.source
BEGIN SELECT RAISE(ABORT, 'a history cursor only moves forward'); END;
`;
