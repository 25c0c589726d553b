/**
 * Migration 8's SQL: token estimates per provider item, the open tool calls, summary sources
 * and digests, route calibration, the lexical history index and the indexes of the hot
 * queries. Private to `store/`; `migrations.ts` lists it.
 *
 * @module
 */

import { appendOnly } from "./_migration_sql.ts";

/** The text `history_fts` indexes for a finished cell's output (`NEW` is the cells row). */
const CELL_OUTPUT = `concat_ws(char(10), json_extract(NEW.result, '$.stdout'),
  json_extract(NEW.result, '$.stderr'), json_extract(NEW.result, '$.value'),
  json_extract(NEW.result, '$.error.type'), json_extract(NEW.result, '$.error.message'),
  json_extract(NEW.result, '$.interrupted'))`;

/** Each indexed source: its table, the trigger condition, and the row it indexes. */
const HISTORY_SOURCES = [
  {
    name: "inputs_history",
    on: "AFTER INSERT ON inputs",
    when: "1",
    row:
      `'input:' || NEW.id, NEW.session_id, 'input', NEW.admitted_at, json_extract(NEW.body, '$')`,
  },
  {
    name: "events_send_history",
    on: "AFTER INSERT ON events",
    when: "NEW.kind = 'send'",
    row: `'send:' || NEW.seq, NEW.session_id, 'send', NEW.at, json_extract(NEW.body, '$.text')`,
  },
  {
    name: "outbox_history",
    on: "AFTER INSERT ON outbox",
    when: "NEW.kind = 'message'",
    row: `'outbox:' || NEW.id, NEW.session_id, 'discord', NEW.created_at, NEW.body`,
  },
  {
    name: "provider_items_history",
    on: "AFTER INSERT ON provider_items",
    when: `NEW.role = 'assistant' AND json_type(NEW.message, '$.content') = 'text'
      AND json_extract(NEW.message, '$.content') <> ''`,
    row: `'item:' || NEW.idx, NEW.session_id, 'scratchpad', NEW.at,
      json_extract(NEW.message, '$.content')`,
  },
  {
    name: "cells_history",
    on: "AFTER INSERT ON cells",
    when: "1",
    row: `'cell:' || NEW.id, NEW.session_id, 'cell', NEW.started_at, NEW.code`,
  },
  {
    name: "cells_output_history",
    on: "AFTER UPDATE OF outcome ON cells",
    when: "OLD.outcome IS NULL AND NEW.outcome IS NOT NULL",
    row: `'output:' || NEW.id, NEW.session_id, 'output', NEW.ended_at, ${CELL_OUTPUT}`,
  },
] as const;

function historyTriggers(): string {
  return HISTORY_SOURCES.map((source) => `
CREATE TRIGGER ${source.name} ${source.on} WHEN ${source.when}
BEGIN
  INSERT INTO history_fts (ref, session, kind, at, text) VALUES (${source.row});
END;`).join("\n");
}

/** Indexes the rows a store already holds, with the same expressions as the triggers. */
function historyBackfill(): string {
  const from: Record<string, string> = {
    inputs_history: "inputs",
    events_send_history: "events",
    outbox_history: "outbox",
    provider_items_history: "provider_items",
    cells_history: "cells",
    cells_output_history: "cells",
  };
  return HISTORY_SOURCES.map((source) => {
    const when = source.name === "cells_output_history" ? "NEW.outcome IS NOT NULL" : source.when;
    return `INSERT INTO history_fts (ref, session, kind, at, text)
SELECT ${source.row.replaceAll("NEW.", "n.")} FROM ${from[source.name]} n
WHERE ${when.replaceAll("NEW.", "n.")};`;
  }).join("\n");
}

// Context management that lasts (issue 13). Each provider item carries its raw token estimate
// (UTF-8 bytes / 4 + 4, the same formula as `estimateItemTokens`), so a request is sized from
// an index without parsing messages. `open_tool_calls` holds only the calls still waiting for
// their result, kept by triggers, so start-up recovery never reads the whole sequence.
// Summaries gain their source (model or extractive), their structured digest and their size.
// `history_fts` is the lexical index over inputs, sends, Discord sends, scratchpad, cell code
// and output (triggers, in the writing transaction; inputs from migration 13 on after
// admission, behind a cursor) and artifacts (`history_artifacts`).
// `token_calibration` keeps each route's measured tokens per estimated token. The indexes
// serve the hot queries named in docs/context.md (`outbox_pending`, `outbox_attempting`: SQLite does
// not use the IN-list partial index `outbox_open` for an equality on one of its values;
// `outbox_work`: the sender's next row, and the older open rows of its channel, among open rows).
export const CONTEXT_SCHEMA: string = `
ALTER TABLE provider_items ADD COLUMN tokens INTEGER NOT NULL DEFAULT 0 CHECK (tokens >= 0);
DROP TRIGGER provider_items_no_update;
UPDATE provider_items SET tokens = (length(CAST(message AS BLOB)) + 3) / 4 + 4;
CREATE TRIGGER provider_items_no_update BEFORE UPDATE ON provider_items
BEGIN SELECT RAISE(ABORT, 'provider_items is append-only'); END;

CREATE TABLE open_tool_calls (
  session_id TEXT NOT NULL,
  call_id TEXT NOT NULL,
  idx INTEGER NOT NULL,
  pos INTEGER NOT NULL,
  PRIMARY KEY (session_id, call_id)
) STRICT, WITHOUT ROWID;
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
INSERT OR IGNORE INTO open_tool_calls (session_id, call_id, idx, pos)
SELECT p.session_id, json_extract(c.value, '$.id'), p.idx, c.key
FROM provider_items p, json_each(p.message, '$.tool_calls') c
WHERE p.role = 'assistant' AND json_type(p.message, '$.tool_calls') = 'array'
  AND json_type(c.value, '$.id') = 'text'
  AND NOT EXISTS (SELECT 1 FROM provider_items t WHERE t.session_id = p.session_id
    AND t.role = 'tool' AND t.tool_call_id = json_extract(c.value, '$.id'));

ALTER TABLE context_summaries ADD COLUMN source TEXT NOT NULL DEFAULT 'extractive'
  CHECK (source IN ('model', 'extractive'));
ALTER TABLE context_summaries ADD COLUMN digest TEXT NULL
  CHECK (digest IS NULL OR json_valid(digest));
ALTER TABLE context_summaries ADD COLUMN tokens INTEGER NOT NULL DEFAULT 0 CHECK (tokens >= 0);
ALTER TABLE context_summaries ADD COLUMN fallback_reason TEXT NULL;

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
${appendOnly("history_artifacts")}
${historyTriggers()}
${historyBackfill()}

CREATE INDEX cells_frame ON cells (frame_id) WHERE frame_id IS NOT NULL;
CREATE INDEX cells_tool_call ON cells (session_id, tool_call_id) WHERE tool_call_id IS NOT NULL;
CREATE INDEX events_send_cell ON events (json_extract(body, '$.cell_id')) WHERE kind = 'send';
CREATE INDEX outbox_cell ON outbox (cell_id) WHERE cell_id IS NOT NULL;
CREATE INDEX outbox_pending ON outbox (created_at, id) WHERE state = 'pending';
CREATE INDEX outbox_attempting ON outbox (session_id, created_at, id) WHERE state = 'attempting';
CREATE INDEX outbox_work ON outbox (json_extract(destination, '$.channel_id'), created_at, id)
  WHERE state = 'pending' OR (state = 'unknown' AND not_before IS NOT NULL);
`;
