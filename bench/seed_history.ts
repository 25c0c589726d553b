/**
 * Fills a store with a long history fast, for the context figures: turn after turn of the
 * shape the daemon writes (an input and its `input.admitted`, a frame and its events, the
 * opening user item, an assistant item with scratchpad text and one tool call, the cell that
 * ran it with its events, one local send, the tool result), inserted with raw prepared
 * statements in large transactions. The schema's triggers run as they do for the writer
 * modules, so the history index and the open tool calls are what the daemon would have.
 * Twelve records a turn: 1 input, 1 frame, 6 events, 3 provider items, 1 cell.
 *
 * The store must exist (opened once by `openStore`, so it is migrated) and be closed.
 *
 * @module
 */

import { DatabaseSync, type StatementSync } from "node:sqlite";
import { join } from "node:path";
import { estimateTokens } from "../store/tables/provider_items.ts";

/** Records one seeded turn writes. */
export const RECORDS_PER_TURN = 12;

/** Provider items one seeded turn writes. */
export const ITEMS_PER_TURN = 3;

interface Statements {
  event: StatementSync;
  input: StatementSync;
  frame: StatementSync;
  item: StatementSync;
  cell: StatementSync;
  finishCell: StatementSync;
}

function prepare(db: DatabaseSync): Statements {
  return {
    event: db.prepare(
      "INSERT INTO events (session_id, seq, kind, at, body) VALUES ('default', ?, ?, ?, ?)",
    ),
    input: db.prepare(
      `INSERT INTO inputs (id, session_id, source_kind, dedupe_key, conversation_id, author, body,
        received_at, admitted_at, admitted_seq, status, frame_id)
       VALUES (?, 'default', 'local', ?, 'local:default', 'owner', ?, ?, ?, ?, 'consumed', ?)`,
    ),
    frame: db.prepare(
      `INSERT INTO frames (id, session_id, number, input_ids, routing, context_epoch,
        policy_revision, state, created_at, ended_at, ended_reason)
       VALUES (?, 'default', ?, ?, '{}', 0, 'seed', 'done', ?, ?, 'wait')`,
    ),
    item: db.prepare(
      `INSERT INTO provider_items (session_id, idx, frame_id, role, tool_call_id, message, tokens, at)
       VALUES ('default', ?, ?, ?, ?, ?, ?, ?)`,
    ),
    cell: db.prepare(
      `INSERT INTO cells (id, session_id, generation, frame_id, tool_call_id, code, started_at)
       VALUES (?, 'default', 1, ?, ?, ?, ?)`,
    ),
    finishCell: db.prepare(
      "UPDATE cells SET outcome = 'ok', result = ?, ended_at = ? WHERE id = ?",
    ),
  };
}

/** Where a seeded history stands: the next turn number, seq and item idx. */
interface Cursor {
  turn: number;
  seq: number;
  idx: number;
}

function cursorOf(db: DatabaseSync): Cursor {
  const row = db.prepare(
    `SELECT (SELECT next_seq FROM sessions WHERE id = 'default') AS seq,
       (SELECT COALESCE(MAX(idx), 0) FROM provider_items WHERE session_id = 'default') AS idx,
       (SELECT COALESCE(MAX(number), 0) FROM frames WHERE session_id = 'default') AS turn`,
  ).get() as { seq: number; idx: number; turn: number };
  return { turn: row.turn + 1, seq: row.seq, idx: row.idx + 1 };
}

function seedTurn(s: Statements, c: Cursor, at: number): void {
  const n = c.turn;
  const [input, frame, cell, call] = [`in_s${n}`, `fr_s${n}`, `cell_s${n}`, `call_s${n}`];
  const question = `question ${n}: how is the build going, and what should happen next?`;
  const code = `await local.send('answer ${n}')`;
  const event = (kind: string, body: unknown) =>
    s.event.run(c.seq++, kind, at, JSON.stringify(body));
  const item = (role: string, message: unknown, toolCallId: string | null) => {
    const text = JSON.stringify(message);
    s.item.run(c.idx++, frame, role, toolCallId, text, estimateTokens(text), at);
  };
  s.frame.run(frame, n, JSON.stringify([input]), at, at);
  const admitted = c.seq;
  event("input.admitted", { input_id: input, author: "owner", body: question });
  s.input.run(input, `local:seed:${n}`, JSON.stringify(question), at, at, admitted, frame);
  event("frame.accepted", { frame_id: frame, number: n, input_ids: [input] });
  item("user", {
    role: "user",
    content: `[input ${input} from owner in local:default]\n${question}`,
  }, null);
  item("assistant", {
    role: "assistant",
    content: `thinking about ${n}: check the logs first, then answer briefly.`,
    tool_calls: [{
      id: call,
      type: "function",
      function: { name: "python", arguments: JSON.stringify({ code }) },
    }],
  }, null);
  s.cell.run(cell, frame, call, code, at);
  event("cell.started", {
    cell_id: cell,
    generation: 1,
    frame_id: frame,
    tool_call_id: call,
    code,
  });
  event("send", {
    send_id: `send_s${n}`,
    text: `answer ${n}`,
    conversation: "local:default",
    frame_id: frame,
    cell_id: cell,
    state: "delivered",
  });
  const result = { value: null, stdout: `checked ${n}\n`, stderr: "", error: null, wait: null };
  s.finishCell.run(JSON.stringify(result), at, cell);
  event("cell.finished", { cell_id: cell, tool_call_id: call, outcome: "ok", result });
  item(
    "tool",
    { role: "tool", tool_call_id: call, content: `outcome: ok\nstdout:\nchecked ${n}` },
    call,
  );
  event("frame.finished", { frame_id: frame, number: n, state: "done", reason: "wait" });
  c.turn++;
}

/**
 * Appends seeded turns to the store of `stateDir` until it holds `turns` turns in all;
 * returns how many it wrote.
 */
export function seedHistory(stateDir: string, turns: number): number {
  const db = new DatabaseSync(join(stateDir, "runtime.sqlite"), {
    enableForeignKeyConstraints: true,
  });
  try {
    db.exec("PRAGMA journal_mode = WAL");
    db.exec("PRAGMA synchronous = NORMAL");
    db.exec(`INSERT OR IGNORE INTO kernel_generations (session_id, generation, started_at, reason,
      skills_revision) VALUES ('default', 1, 1, 'seed', 'seed')`);
    const s = prepare(db);
    const cursor = cursorOf(db);
    const first = cursor.turn;
    const at = Date.now();
    while (cursor.turn <= turns) {
      db.exec("BEGIN IMMEDIATE");
      for (let k = 0; k < 5_000 && cursor.turn <= turns; k++) seedTurn(s, cursor, at);
      db.prepare("UPDATE sessions SET next_seq = ? WHERE id = 'default'").run(cursor.seq);
      db.exec("COMMIT");
    }
    return cursor.turn - first;
  } finally {
    db.close();
  }
}
