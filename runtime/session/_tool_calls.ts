/**
 * The tool-call step of a turn: each call of one assistant reply runs as a cell, in order.
 * The cell is recorded before it runs and its outcome before the model is told; every call
 * gets exactly one tool result, also the ones that are not run.
 *
 * @module
 */

import { finishCell, startCell } from "../../store/cells.ts";
import { indexArtifact } from "../../store/history_index.ts";
import { effectsOfCell } from "../../store/effects.ts";
import { appendProviderItems } from "../../store/provider_items.ts";
import type { Store } from "../../store/store.ts";
import { type EventBus, faultPoint } from "../core/mod.ts";
import type { CellResult } from "../kernel/mod.ts";
import { parseCode, renderCellResult, spoolLongText } from "./_cell_output.ts";
import type { TurnContext } from "./_turn_types.ts";
import type { TurnHealth } from "./_turn_health.ts";

/** The session's kernel as the loop uses it. */
export interface TurnKernel {
  /** The running generation; cells are recorded against it. */
  generation(): Promise<number>;
  /** Runs one cell; resolves with its outcome, never rejects for what the cell did. */
  execute(
    cellId: string,
    code: string,
    options: {
      signal: AbortSignal;
      timeoutMs: number;
      onStream: (name: "stdout" | "stderr", text: string) => void;
    },
  ): Promise<CellResult>;
}

/** What the tool-call step needs. */
export interface ToolCallDeps {
  store: Store;
  bus: EventBus;
  kernel: TurnKernel;
  /** How long one cell may run before it is cancelled (then killed). */
  cellTimeoutMs: number;
  /** The artifacts directory's size limit (the `artifact_disk_mb` budget). @default 256 MiB */
  artifactBytes?: number;
  /** Where artifact writes are reported for `/health`. */
  health: TurnHealth;
}

/** One tool call of an assistant reply, with its host-minted id. */
export interface ToolCall {
  id: string;
  name: string;
  /** The arguments as the model wrote them (kept raw in the store). */
  arguments: string;
  /** When set, the call is not run and this is its result. */
  refusal?: string;
  /** Lines the runtime adds after the call's result (the step limit, fences left unrun). */
  notes?: string[];
  /** True for a text-mode cell: the first python fence of a reply without tool calls. */
  textCell?: boolean;
}

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
  const { store } = deps;
  const { session, frame } = ctx;
  const answer = (call: ToolCall, content: string) =>
    appendProviderItems(store, session, frame.id, [{
      role: "tool",
      tool_call_id: call.id,
      content: [content, ...call.notes ?? []].join("\n"),
    }]);
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
    const code = call.refusal === undefined
      ? parseCode(call.name, call.arguments)
      : { error: call.refusal };
    if (typeof code !== "string") {
      answer(call, code.error);
      continue;
    }
    const { cellId, result } = await runCell(deps, ctx, call.id, code, state);
    // The outcome is durable; the model has not been told yet.
    faultPoint("outcome-before-result");
    answer(call, renderCellResult(result, effectsOfCell(store, cellId)));
    if (result.wait !== null) waited = result.wait.reason;
  }
  return { waited };
}

/** Runs one cell: recorded before it runs, its outcome durable before anyone is told. */
async function runCell(
  deps: ToolCallDeps,
  ctx: TurnContext,
  toolCallId: string,
  code: string,
  state: { effects: boolean },
): Promise<{ cellId: string; result: CellResult }> {
  const { store, bus, kernel } = deps;
  const { session, frame } = ctx;
  const generation = await kernel.generation();
  const { cellId } = startCell(store, { session, generation, frameId: frame.id, toolCallId, code });
  state.effects = true;
  const result = await kernel.execute(cellId, code, {
    signal: ctx.signal,
    timeoutMs: deps.cellTimeoutMs,
    onStream: (name, text) =>
      bus.emit(session, { kind: "cell.output", session, cell: cellId, name, text }),
  });
  // Long output is spooled whole to an artifact; records and the model get an excerpt that
  // names it, so nothing printed is discarded and no record is huge. A failed write keeps the
  // excerpt and names the failure: the cell still gets its outcome.
  const spool = {
    budgetBytes: deps.artifactBytes,
    report: (error: string | null) => deps.health.artifactWrite(error),
  };
  const stdout = await spoolLongText(store.stateDir, result.stdout, spool);
  const stderr = await spoolLongText(store.stateDir, result.stderr, spool);
  // A spooled output is searchable whole (history.search), not only its excerpt.
  for (const [spooled, text] of [[stdout, result.stdout], [stderr, result.stderr]] as const) {
    if (spooled.artifact === undefined) continue;
    indexArtifact(store, {
      session,
      cellId,
      id: spooled.artifact.id,
      bytes: spooled.artifact.bytes,
      text,
    });
  }
  finishCell(store, cellId, {
    outcome: result.outcome,
    result: {
      value: result.value,
      stdout: stdout.text,
      stderr: stderr.text,
      ...(stdout.artifact ? { stdout_artifact: stdout.artifact } : {}),
      ...(stderr.artifact ? { stderr_artifact: stderr.artifact } : {}),
      ...(stdout.artifactError ? { stdout_artifact_error: stdout.artifactError } : {}),
      ...(stderr.artifactError ? { stderr_artifact_error: stderr.artifactError } : {}),
      error: result.error,
      wait: result.wait,
      duration_ms: Math.round(result.duration_ms),
    },
  });
  return { cellId, result: { ...result, stdout: stdout.text, stderr: stderr.text } };
}
