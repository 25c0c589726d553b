/**
 * The tool-call step of a turn: each call of one assistant reply runs as a cell, in order.
 * The cell is recorded before it runs and its outcome before the model is told; every call
 * gets exactly one tool result, also the ones that are not run. Long output is spooled to an
 * artifact the same way for every cell (a failed write costs the whole output, never the
 * outcome); where the cell and its result are recorded is the step's sink: the session's
 * (`_session_sink.ts`) unless a child agent gives its own.
 *
 * @module
 */

import { faultPoint } from "../core/mod.ts";
import { codeOfCall, keepCellOutput, renderCellResult, type RenderedCell } from "./_cell_output.ts";
import { sessionCells } from "./_session_sink.ts";
import type { CellSink, ToolCall, ToolCallDeps } from "./_turn_sink.ts";
import type { TurnContext } from "./_turn_types.ts";

export type { ToolCall } from "./_turn_sink.ts";

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
  const answer = (call: ToolCall, content: string) =>
    sink.answer(call, [content, ...call.notes ?? []].join("\n"));
  let waited: string | undefined;
  for (const call of calls) {
    if (waited !== undefined || ctx.signal.aborted) {
      answer(
        call,
        waited !== undefined
          ? "[not run: the turn ended with wait()]"
          : "[not run: the operator stopped the turn]",
      );
      continue;
    }
    const code = codeOfCall(call);
    if (typeof code !== "string") {
      answer(call, code.error);
      continue;
    }
    const { cellId, result } = await runCell(
      { ...deps, cells: sink },
      ctx,
      { id: call.id, code },
      state,
    );
    // The outcome is durable; the model has not been told yet.
    faultPoint("outcome-before-result");
    answer(call, renderCellResult(result, sink.effects(cellId)));
    if (result.wait !== null) waited = result.wait.reason;
  }
  return { waited };
}

/** Runs one cell: recorded before it runs, its outcome durable before anyone is told. */
async function runCell(
  deps: ToolCallDeps & { cells: CellSink },
  ctx: TurnContext,
  call: { id: string; code: string },
  state: { effects: boolean },
): Promise<{ cellId: string; result: RenderedCell }> {
  const { store, kernel, cells } = deps;
  const { code } = call;
  const cellId = await cells.startCell({ toolCallId: call.id, code });
  state.effects = true;
  const result = await kernel.execute(cellId, code, {
    signal: ctx.signal,
    timeoutMs: deps.cellTimeoutMs,
    onStream: (name, text) => cells.stream(cellId, name, text),
  });
  // Long output is spooled whole to an artifact; records and the model get an excerpt that
  // names it, so nothing printed is discarded and no record is huge. A failed write keeps the
  // excerpt and names the failure: the cell still gets its outcome.
  const spool = {
    budgetBytes: deps.artifactBytes,
    report: (error: string | null) => deps.health.artifactWrite(error),
  };
  const kept = await keepCellOutput(store.stateDir, result, spool);
  cells.finishCell(cellId, kept);
  return {
    cellId,
    result: {
      ...result,
      stdout: kept.stdout.text,
      stderr: kept.stderr.text,
      displays: kept.displays,
    },
  };
}
