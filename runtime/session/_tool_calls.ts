/**
 * The tool-call step of a turn: each call of one assistant reply runs as a cell, in order.
 * The cell is recorded before it runs; its outcome and its call's tool result are written
 * together; every call gets exactly one tool result, also the ones that are not run. Long
 * output is spooled to an artifact the same way for every cell (a failed write costs the whole
 * output, never the outcome); where the cell and its result are recorded is the step's sink:
 * the session's (`_session_sink.ts`) unless a child agent gives its own.
 *
 * @module
 */

import { KlbrError } from "../core/mod.ts";
import type { CellResult } from "../kernel/mod.ts";
import { codeOfCall, keepCellOutput, renderCellResult } from "./_cell_output.ts";
import { stopReason } from "./_request_step.ts";
import { sessionCells } from "./_session_sink.ts";
import {
  type CellSink,
  type ToolCall,
  type ToolCallDeps,
  WorkbenchUnavailable,
} from "./_turn_sink.ts";
import type { TurnContext } from "./_turn_types.ts";

/**
 * Runs the calls in order and gives each exactly one result. Once a cell waits, or the
 * operator stops the turn, the remaining calls are answered without running.
 *
 * @returns the reason of the `wait()` that ended the turn, if one did
 */
export async function runToolCalls(
  deps: ToolCallDeps,
  ctx: TurnContext,
  calls: ToolCall[],
  state: { effects: boolean },
): Promise<{ waited?: string }> {
  const sink = deps.cells ?? sessionCells(deps, ctx);
  const answer = (call: ToolCall, content: string) => sink.answer(call, withNotes(call, content));
  let waited: string | undefined;
  for (const call of calls) {
    if (waited !== undefined || ctx.signal.aborted) {
      // A stop says who stopped the turn: the operator, or a shutdown past its grace.
      answer(
        call,
        waited !== undefined
          ? "[not run: the turn ended with wait()]"
          : `[not run: ${stopReason(ctx.signal)}]`,
      );
      continue;
    }
    const code = codeOfCall(call);
    if (typeof code !== "string") {
      answer(call, code.error);
      continue;
    }
    const wait = await runCell({ ...deps, cells: sink }, ctx, { call, code, state });
    if (wait !== null) waited = wait.reason;
  }
  return { waited };
}

/** A call's result with the lines the runtime adds after it (the step limit, unrun fences). */
function withNotes(call: ToolCall, content: string): string {
  return [content, ...call.notes ?? []].join("\n");
}

/**
 * Runs one call's cell: recorded before it runs; its outcome and the call's tool result, which
 * lists what the cell committed, in one commit before anyone is told.
 *
 * @returns the cell's `wait()`, when it called it
 */
async function runCell(
  deps: ToolCallDeps & { cells: CellSink },
  ctx: TurnContext,
  cell: { call: ToolCall; code: string; state: { effects: boolean } },
): Promise<CellResult["wait"]> {
  const { store, kernel, cells } = deps;
  const { call, code, state } = cell;
  let cellId: string;
  try {
    cellId = await cells.startCell({ toolCallId: call.id, code });
  } catch (error) {
    if (!(error instanceof WorkbenchUnavailable)) throw error;
    cells.answer(call, withNotes(call, `[not run: ${error.message}; nothing ran]`));
    return null;
  }
  state.effects = true;
  // A workbench that cannot start rejects; the cell is recorded, so it still gets its outcome
  // and its call its result, and the model hears why.
  const result = await kernel.execute(cellId, code, {
    signal: ctx.signal,
    timeoutMs: deps.cellTimeoutMs,
    onStream: (name, text) => cells.stream(cellId, name, text),
  }).catch(unavailableResult);
  // Long output is spooled whole to an artifact; records and the model get an excerpt that
  // names it, so nothing printed is discarded and no record is huge. A failed write keeps the
  // excerpt and names the failure: the cell still gets its outcome.
  const spool = {
    budgetBytes: deps.artifactBytes,
    report: (error: string | null) => deps.health.artifactWrite(error),
  };
  const kept = await keepCellOutput(store.stateDir, result, spool);
  const shown = { ...result, stdout: kept.stdout.text, stderr: kept.stderr.text };
  const content = renderCellResult({ ...shown, displays: kept.displays }, cells.effects(cellId));
  cells.finishCell(cellId, kept, { call, content: withNotes(call, content) });
  return result.wait;
}

/** The result of a cell whose workbench failed to run it (it could not start): an `error`. */
function unavailableResult(error: unknown): CellResult {
  const message = error instanceof Error ? error.message : String(error);
  return {
    outcome: "error",
    value: null,
    stdout: "",
    stderr: "",
    error: {
      type: error instanceof KlbrError ? error.code : "internal",
      message: `the workbench could not run this cell: ${message}`,
      traceback: "",
    },
    wait: null,
    duration_ms: 0,
  };
}
