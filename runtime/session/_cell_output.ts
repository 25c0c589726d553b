/**
 * What the model and the records get of a cell: its code parsed from the tool call, long
 * output spooled whole to an artifact with an excerpt that names it, and the result text with
 * the effects the cell committed (sends, outbox rows, timers, jobs), so a model that fixes and
 * re-runs a cell knows what already happened.
 *
 * @module
 */

import { Buffer } from "node:buffer";
import { type ArtifactRef, spoolArtifact } from "../../store/tables/artifacts.ts";
import type { EffectRecord } from "../../store/tables/effects.ts";
import type { CellDisplay } from "../core/mod.ts";
import { toolArguments } from "../context/mod.ts";
import type { CellResult } from "../kernel/mod.ts";
import type { FinishedCell } from "./_turn_sink.ts";

/** Characters of a tool result the model gets at most. */
const MAX_RESULT_CHARS = 20_000;
/** Output longer than this many characters is spooled to an artifact. */
export const SPOOL_ABOVE_CHARS = 8_192;
/**
 * Scratchpad text of one reply longer than this many characters is spooled to an artifact like
 * long cell output, and its record keeps an excerpt: a reply cannot flood the record.
 */
export const SCRATCHPAD_SPOOL_ABOVE_CHARS = 32_768;
/** Outcomes of a cell that stopped before its code ran to its end. */
const UNFINISHED = new Set(["killed", "timed_out", "cancelled", "interrupted"]);

/** The cell code of a tool call, or the tool result that says why it did not run. */
export function parseCode(name: string, args: string): string | { error: string } {
  if (name !== "python") {
    return { error: `[not run: there is one tool, python (got ${JSON.stringify(name)})]` };
  }
  const parsed = toolArguments(args) as { code?: unknown } | undefined;
  if (typeof parsed?.code === "string") return parsed.code;
  return { error: `[not run: arguments must be JSON {"code": "..."} (got ${args.slice(0, 200)})]` };
}

/**
 * The cell code a call runs, or the tool result that says why it does not run: a call refused
 * at its reply (cut by the token limit) or whose arguments are not a python cell.
 */
export function codeOfCall(
  call: { name: string; arguments: string; refusal?: string },
): string | { error: string } {
  return call.refusal === undefined
    ? parseCode(call.name, call.arguments)
    : { error: call.refusal };
}

/** Where a spool's outcome is reported: `null` for a write that succeeded. */
export type ArtifactReport = (error: string | null) => void;

/**
 * Keeps `text` when short (`above` characters at most, cell output's 8,192 unless given);
 * otherwise spools it whole and returns its head, tail and id. When the artifact cannot be
 * written (a full disk, an unwritable directory), the excerpt says so and names the failure:
 * the cell keeps its outcome, only the whole output is lost. `noun` is what the excerpt calls
 * the text ("output" unless given).
 */
export async function spoolLongText(
  stateDir: string,
  text: string,
  options: { budgetBytes?: number; report?: ArtifactReport; above?: number; noun?: string } = {},
): Promise<{ text: string; artifact?: ArtifactRef; artifactError?: string }> {
  if (text.length <= (options.above ?? SPOOL_ABOVE_CHARS)) return { text };
  const noun = options.noun ?? "output";
  const head = text.slice(0, 4_000);
  const tail = text.slice(-2_000);
  const hidden = text.length - 6_000;
  const kept = await keepArtifact(stateDir, new TextEncoder().encode(text), options);
  if ("error" in kept) {
    return {
      text: `${head}\n[… ${hidden} characters not shown; the whole ${noun} could not be kept: ` +
        `writing its artifact failed (${kept.error}) …]\n${tail}`,
      artifactError: kept.error,
    };
  }
  const { artifact } = kept;
  return {
    text: `${head}\n[… ${hidden} characters not shown; the whole ${noun} is ` +
      `${artifact.bytes} bytes in artifact ${artifact.id} …]\n${tail}`,
    artifact,
  };
}

/**
 * A cell's two streams as they are kept: each spooled whole to an artifact when long (see
 * {@linkcode spoolLongText}); and each `display()` kept whole as an artifact. Never rejects for a
 * failed write: the cell keeps its outcome, and the display names why it was not kept.
 */
export async function keepCellOutput(
  stateDir: string,
  result: CellResult,
  options: { budgetBytes?: number; report?: ArtifactReport } = {},
): Promise<FinishedCell> {
  const stdout = await spoolLongText(stateDir, result.stdout, options);
  const stderr = await spoolLongText(stateDir, result.stderr, options);
  const displays: CellDisplay[] = [];
  for (const shown of result.displays ?? []) {
    displays.push(await keepDisplay(stateDir, shown, options));
  }
  return { result, stdout, stderr, displays };
}

/** One `display()` kept as an artifact; a failed write is named in its `error`. */
async function keepDisplay(
  stateDir: string,
  shown: { mime: string; data_b64: string },
  options: { budgetBytes?: number; report?: ArtifactReport },
): Promise<CellDisplay> {
  const data = new Uint8Array(Buffer.from(shown.data_b64, "base64"));
  const kept = await keepArtifact(stateDir, data, options);
  if ("error" in kept) {
    return { mime: shown.mime, bytes: data.length, error: `not kept: ${kept.error}` };
  }
  return { mime: shown.mime, bytes: data.length, artifact: { ...kept.artifact } };
}

/**
 * Writes `data` as an artifact and reports the outcome: the artifact, or the write's failure in
 * at most 500 characters (a full disk, an unwritable directory). Never rejects.
 */
async function keepArtifact(
  stateDir: string,
  data: Uint8Array,
  options: { budgetBytes?: number; report?: ArtifactReport },
): Promise<{ artifact: ArtifactRef } | { error: string }> {
  try {
    const artifact = await spoolArtifact(stateDir, data, options.budgetBytes);
    options.report?.(null);
    return { artifact };
  } catch (error) {
    const message = (error instanceof Error ? error.message : String(error)).slice(0, 500);
    options.report?.(message);
    return { error: message };
  }
}

/** The lines a cell's result gives the model for its displays: type, size and artifact. */
function renderDisplays(displays: readonly CellDisplay[]): string {
  return [
    "displayed (shown to the owner in the page; read one with read_artifact(id)):",
    ...displays.map((d, i) =>
      `${i + 1}. ${d.mime}, ${d.bytes} bytes, ${
        d.artifact ? `artifact ${d.artifact.id}` : d.error ?? "not kept"
      }`
    ),
  ].join("\n");
}

/**
 * A finished cell's result as the store keeps it (a session cell's `cells` row and its
 * `cell.finished` record, a code job's result): the excerpts, the artifacts that hold the whole
 * output or why they could not be written, the value, error, wait and duration.
 */
export function keptCellResult(finished: FinishedCell): Record<string, unknown> {
  const { result, stdout, stderr } = finished;
  return {
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
    ...(finished.displays.length > 0 ? { displays: finished.displays } : {}),
  };
}

/**
 * The effects a cell committed, as its result lists them for the model: each with its kind,
 * its id and what it was, so a continued turn does not do them again.
 */
export function renderEffects(effects: readonly EffectRecord[]): string {
  if (effects.length === 0) {
    return "effects this cell committed: none (it sent nothing and started nothing)";
  }
  return [
    "effects this cell committed (they happened; do not repeat them):",
    ...effects.map((e) =>
      `${e.ordinal}. ${e.kind} ${e.refId}${e.seq === null ? "" : ` (record ${e.seq})`}: ${
        JSON.stringify(e.summary.length > 500 ? `${e.summary.slice(0, 500)}…` : e.summary)
      }`
    ),
  ].join("\n");
}

/**
 * The tool result the model reads for a cell, capped in length, naming `effects`, what the
 * cell committed: a cell that did not finish says so and lists them (or says there were
 * none); a cell that raised lists them (or none) before its error; a cell that ended `ok`
 * lists them when it had any.
 *
 * Proven by "every cell result lists the effects its cell committed" in
 * `tests/runtime/session/cell_effects.test.ts`.
 */
export function renderCellResult(
  result: RenderedCell | CellResult,
  effects: readonly EffectRecord[] = [],
): string {
  const parts = [`outcome: ${result.outcome}`];
  if (UNFINISHED.has(result.outcome)) {
    parts.push(`this cell did not finish.\n${renderEffects(effects)}`);
  } else if (result.outcome === "error" || effects.length > 0) {
    parts.push(renderEffects(effects));
  }
  if (result.stdout) parts.push(`stdout:\n${result.stdout}`);
  if (result.stderr) parts.push(`stderr:\n${result.stderr}`);
  if (result.value !== null) parts.push(`value: ${result.value}`);
  if (result.error) parts.push(`error:\n${result.error.traceback || result.error.message}`);
  if (result.wait) parts.push(`waiting: ${result.wait.reason || "(no reason)"}`);
  // Displays as kept (artifacts); a worker's raw reply carries bytes, never shown to the model.
  const kept = (result.displays ?? []).filter((d): d is CellDisplay => "bytes" in d);
  if (kept.length > 0) parts.push(renderDisplays(kept));
  const text = parts.join("\n");
  return text.length > MAX_RESULT_CHARS
    ? `${text.slice(0, MAX_RESULT_CHARS)}\n[truncated ${text.length - MAX_RESULT_CHARS} characters]`
    : text;
}

/** A cell's result as the model is shown it: its displays as kept, not their bytes. */
export type RenderedCell = Omit<CellResult, "displays"> & { displays?: readonly CellDisplay[] };
