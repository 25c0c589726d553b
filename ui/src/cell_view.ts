/**
 * Cells as the cells lane shows them: one card per cell, from its `cell.started` and joined by
 * its `cell.finished`, whose `result` is read field by field against the shared
 * `CellRunResult` schema.
 *
 * @module
 */

import { type CellDisplay, CellRunResult, type RecordData } from "../../runtime/core/mod.ts";
import { isObject } from "./json_value.ts";

/** A cell's error. */
export interface CellError {
  type: string;
  message: string;
  traceback: string;
}

/** Output spooled whole to an artifact; the cell shows an excerpt. */
export interface SpooledOutput {
  id: string;
  bytes: number | undefined;
}

/** One cell, from `cell.started` and its `cell.finished`. */
export interface CellItem {
  seq: number;
  at: number;
  cellId: string;
  code: string;
  /** `interrupted` when a kernel reset came before its end. */
  state: "running" | "finished" | "interrupted";
  outcome: string | undefined;
  stdout: string;
  stderr: string;
  /** Set when the whole stdout is in an artifact and `stdout` is an excerpt. */
  stdoutArtifact: SpooledOutput | undefined;
  stderrArtifact: SpooledOutput | undefined;
  value: string | undefined;
  error: CellError | undefined;
  durationMs: number | undefined;
  wait: string | undefined;
  /** What the cell showed with `display()`, in order. */
  displays: CellDisplay[];
  /** The `seq` of `cell.finished`, when it is a separate record. */
  finishedSeq: number | undefined;
  finishedAt: number | undefined;
}

/** Where a record sits in the log. */
export interface Place {
  seq: number;
  at: number;
}

function cellError(error: CellRunResult["error"] | undefined): CellError | undefined {
  if (error === undefined || error === null) return undefined;
  return { type: error.type, message: error.message, traceback: error.traceback };
}

/**
 * The fields of a cell's `result` that have the type a cell that ran reports. A record's
 * `result` may be any JSON (an interruption is `{interrupted}`), so each field is read alone.
 */
function runResult(result: unknown): Partial<CellRunResult> {
  if (!isObject(result)) return {};
  const fields: Record<string, unknown> = {};
  for (const [key, schema] of Object.entries(CellRunResult.shape)) {
    const parsed = schema.safeParse(result[key]);
    if (parsed.success && parsed.data !== undefined) fields[key] = parsed.data;
  }
  // Each field was checked by its own schema just above.
  return fields as Partial<CellRunResult>;
}

function spooled(ref: CellRunResult["stdout_artifact"]): SpooledOutput | undefined {
  return ref === undefined ? undefined : { id: ref.id, bytes: ref.bytes };
}

/** A running cell's card, before any finish. */
export function newCell(place: Place, cellId: string, code: string): CellItem {
  return {
    ...place,
    cellId,
    code,
    state: "running",
    outcome: undefined,
    stdout: "",
    stderr: "",
    stdoutArtifact: undefined,
    stderrArtifact: undefined,
    value: undefined,
    error: undefined,
    durationMs: undefined,
    wait: undefined,
    displays: [],
    finishedSeq: undefined,
    finishedAt: undefined,
  };
}

/** Fills a card from the cell's `cell.finished`; `separate` when it joins a started card. */
export function finishCell(
  cell: CellItem,
  place: Place,
  d: RecordData<"cell.finished">,
  separate: boolean,
): void {
  const result = runResult(d.result);
  cell.state = "finished";
  cell.outcome = d.outcome;
  cell.stdout = result.stdout ?? "";
  cell.stderr = result.stderr ?? "";
  cell.stdoutArtifact = spooled(result.stdout_artifact);
  cell.stderrArtifact = spooled(result.stderr_artifact);
  cell.value = result.value ?? undefined;
  cell.error = cellError(result.error);
  cell.durationMs = result.duration_ms;
  cell.wait = result.wait?.reason;
  cell.displays = result.displays ?? [];
  cell.finishedSeq = separate ? place.seq : undefined;
  cell.finishedAt = place.at;
}
