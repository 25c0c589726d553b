/**
 * The `cells` table: every Python cell a session ran, recorded before it runs and finished
 * before its outcome is reported. This module is the table's only writer.
 *
 * A cell with no outcome is either running or was cut off by a crash; at restart
 * {@linkcode interruptOpenCells} gives each of them the outcome `interrupted`, so a cell is never
 * run twice and every tool call gets a recorded result.
 *
 * @module
 */

import { z } from "zod";
import { CELL_OUTCOMES, KlbrError, newId } from "../../runtime/core/mod.ts";
import { insertEvent } from "./events.ts";
import { currentGeneration } from "./kernel_generations.ts";
import { checkSessionId, requireSession } from "./sessions.ts";
import type { Store } from "../store.ts";
import { checkReason, fromRow, jsonColumn } from "./_rows.ts";
import { schemaError } from "../schema/_schema_error.ts";

/** One of `CELL_OUTCOMES` (`runtime/core/_records.ts`): how a cell ended. */
export type CellOutcome = (typeof CELL_OUTCOMES)[number];

const StartCellSchema = z.object({
  session: z.string(),
  /** The kernel generation that runs the cell; it must be the session's current one. */
  generation: z.number().int().min(1),
  frameId: z.string().min(1).nullable().default(null),
  /** The provider's tool-call id, persisted before execution. */
  toolCallId: z.string().min(1).max(200).nullable().default(null),
  code: z.string().max(1 << 20),
}).strict();

/** What {@linkcode startCell} takes. */
export type StartCell = z.input<typeof StartCellSchema>;

/** A cell row. */
export interface CellRecord {
  id: string;
  session: string;
  generation: number;
  frameId: string | null;
  toolCallId: string | null;
  code: string;
  outcome: CellOutcome | null;
  result: unknown;
  startedAt: number;
  endedAt: number | null;
}

/** Returns the cell `id`, or `undefined` when there is none. */
export function getCell(store: Store, id: string): CellRecord | undefined {
  const row = store.statement("SELECT * FROM cells WHERE id = ?").get(id);
  return row && fromRow<CellRecord>(row, { result: jsonColumn(row.result) });
}

/**
 * Records a cell before it runs and appends `cell.started`; returns its id and the event's seq.
 *
 * When it returns the cell row is committed with no outcome. Proven by "`startCell()` refuses a
 * generation that is not the current one".
 *
 * @throws {KlbrError} `invalid_input` for malformed options or a generation that is not the
 *   session's current, running one; `not_found` for an unknown session or frame.
 */
export function startCell(store: Store, request: StartCell): { cellId: string; seq: number } {
  const parsed = StartCellSchema.safeParse(request);
  if (!parsed.success) throw schemaError("start cell", parsed.error, request);
  const { session, generation, frameId, toolCallId, code } = parsed.data;
  checkSessionId(session);
  return store.transaction(() => {
    requireSession(store, session);
    const current = currentGeneration(store, session);
    if (current?.generation !== generation || current.endedAt !== null) {
      throw new KlbrError(
        "invalid_input",
        `cannot start cell: generation ${generation} is not the running kernel of ${session} (got current ${
          current?.generation ?? "none"
        })`,
      );
    }
    if (
      frameId !== null &&
      store.statement("SELECT 1 FROM frames WHERE id = ? AND session_id = ?").get(
          frameId,
          session,
        ) === undefined
    ) {
      throw new KlbrError("not_found", `cannot start cell: no frame ${frameId} in ${session}`);
    }
    const now = store.clock();
    const cellId = newId("cell", now);
    store.statement(
      `INSERT INTO cells (id, session_id, generation, frame_id, tool_call_id, code, started_at)
       VALUES (?, ?, ?, ?, ?, ?, ?)`,
    ).run(cellId, session, generation, frameId, toolCallId, code, now);
    const seq = insertEvent(store, session, "cell.started", {
      cell_id: cellId,
      generation,
      frame_id: frameId,
      tool_call_id: toolCallId,
      code,
    });
    return { cellId, seq };
  });
}

function finish(store: Store, cell: CellRecord, outcome: CellOutcome, result: unknown): number {
  store.statement("UPDATE cells SET outcome = ?, result = ?, ended_at = ? WHERE id = ?").run(
    outcome,
    JSON.stringify(result),
    store.clock(),
    cell.id,
  );
  return insertEvent(store, cell.session, "cell.finished", {
    cell_id: cell.id,
    tool_call_id: cell.toolCallId,
    outcome,
    result,
  });
}

/**
 * Writes a cell's outcome and result and appends `cell.finished`; returns the event's seq.
 *
 * When it returns the outcome is committed; only then may it be reported to the model or a
 * client. An outcome is written once. Proven by "`finishCell()` refuses to overwrite a finished
 * cell".
 *
 * @throws {KlbrError} `not_found` for an unknown cell; `invalid_input` when the cell already has
 *   an outcome, the outcome is unknown, or the result is not JSON.
 */
export function finishCell(
  store: Store,
  cellId: string,
  ending: { outcome: CellOutcome; result: unknown },
): number {
  if (!CELL_OUTCOMES.includes(ending?.outcome)) {
    throw new KlbrError(
      "invalid_input",
      `cannot finish cell ${cellId}: outcome must be one of ${CELL_OUTCOMES.join(", ")} (got ${
        JSON.stringify(ending?.outcome)
      })`,
    );
  }
  if (JSON.stringify(ending.result) === undefined) {
    throw new KlbrError(
      "invalid_input",
      `cannot finish cell ${cellId}: result is not JSON (got ${typeof ending.result})`,
    );
  }
  return store.transaction(() => {
    const cell = getCell(store, cellId);
    if (cell === undefined) {
      throw new KlbrError(
        "not_found",
        `cannot finish cell ${cellId}: no such cell (got ${cellId})`,
      );
    }
    if (cell.outcome !== null) {
      throw new KlbrError(
        "invalid_input",
        `cannot finish cell ${cellId}: it already finished (got outcome ${cell.outcome})`,
      );
    }
    return finish(store, cell, ending.outcome, ending.result);
  });
}

/**
 * Gives every cell of `session` that has no outcome the outcome `interrupted`; returns their ids.
 *
 * When it returns, in one committed transaction, no cell of the session is open and each one
 * it closed has a `cell.finished` event with `{ interrupted: reason }` as result. Run at
 * restart, before any new cell. Proven by "`interruptOpenCells()` closes open cells and leaves
 * finished ones alone".
 *
 * @throws {KlbrError} `invalid_input` for an empty reason.
 */
export function interruptOpenCells(store: Store, session: string, reason: string): string[] {
  checkReason(reason, "interrupt cells");
  return store.transaction(() => {
    const ids = (store.statement(
      "SELECT id FROM cells WHERE session_id = ? AND outcome IS NULL ORDER BY started_at, id",
    ).all(session) as { id: string }[]).map((row) => row.id);
    for (const id of ids) {
      finish(store, getCell(store, id)!, "interrupted", { interrupted: reason });
    }
    return ids;
  });
}

/**
 * The cell started for `toolCallId` in `session` and not finished yet, or `undefined`: the
 * first cell of a reply is started in the reply's own commit, and runs under this id.
 */
export function openCellOfToolCall(
  store: Store,
  session: string,
  toolCallId: string,
): string | undefined {
  const row = store.statement(
    "SELECT id FROM cells WHERE session_id = ? AND tool_call_id = ? AND outcome IS NULL",
  ).get(session, toolCallId) as { id: string } | undefined;
  return row?.id;
}

/** The last cell started under `frameId`, or `undefined` when none was. */
export function lastCellOfFrame(store: Store, frameId: string): CellRecord | undefined {
  const row = store.statement(
    "SELECT id FROM cells WHERE frame_id = ? ORDER BY started_at DESC, id DESC LIMIT 1",
  ).get(frameId) as { id: string } | undefined;
  return row && getCell(store, row.id);
}
