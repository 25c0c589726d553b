/**
 * What the model and the records get of a cell: its code parsed from the tool call, long
 * output spooled whole to an artifact with an excerpt that names it, and the result text.
 *
 * @module
 */

import { type ArtifactRef, spoolArtifact } from "../../store/artifacts.ts";
import type { CellResult } from "../kernel/mod.ts";

/** Characters of a tool result the model gets at most. */
const MAX_RESULT_CHARS = 20_000;
/** Output longer than this many characters is spooled to an artifact. */
const SPOOL_ABOVE_CHARS = 8_192;

/** The cell code of a tool call, or the tool result that says why it did not run. */
export function parseCode(name: string, args: string): string | { error: string } {
  if (name !== "python") {
    return { error: `[not run: there is one tool, python (got ${JSON.stringify(name)})]` };
  }
  try {
    const parsed = JSON.parse(args);
    if (typeof parsed?.code === "string") return parsed.code;
  } catch { /* reported below */ }
  return { error: `[not run: arguments must be JSON {"code": "..."} (got ${args.slice(0, 200)})]` };
}

/** Keeps `text` when short; otherwise spools it whole and returns its head, tail and id. */
export async function spoolLongText(
  stateDir: string,
  text: string,
  budgetBytes?: number,
): Promise<{ text: string; artifact?: ArtifactRef }> {
  if (text.length <= SPOOL_ABOVE_CHARS) return { text };
  const artifact = await spoolArtifact(stateDir, new TextEncoder().encode(text), budgetBytes);
  const head = text.slice(0, 4_000);
  const tail = text.slice(-2_000);
  return {
    text: `${head}\n[… ${text.length - 6_000} characters not shown; the whole output is ` +
      `${artifact.bytes} bytes in artifact ${artifact.id} …]\n${tail}`,
    artifact,
  };
}

/** The tool result the model reads for a finished cell, capped in length. */
export function renderCellResult(result: CellResult): string {
  const parts = [`outcome: ${result.outcome}`];
  if (result.stdout) parts.push(`stdout:\n${result.stdout}`);
  if (result.stderr) parts.push(`stderr:\n${result.stderr}`);
  if (result.value !== null) parts.push(`value: ${result.value}`);
  if (result.error) parts.push(`error:\n${result.error.traceback || result.error.message}`);
  if (result.wait) parts.push(`waiting: ${result.wait.reason || "(no reason)"}`);
  const text = parts.join("\n");
  return text.length > MAX_RESULT_CHARS
    ? `${text.slice(0, MAX_RESULT_CHARS)}\n[truncated ${text.length - MAX_RESULT_CHARS} characters]`
    : text;
}
