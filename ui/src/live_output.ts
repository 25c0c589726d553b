/**
 * Lossy live output: model text as it streams (per turn) and cell output as it is printed
 * (per cell). It is animation only — never replayed — and each part is dropped once the
 * durable record that carries the same text arrives.
 *
 * @module
 */

import { text } from "./_fields.ts";

/** Most characters kept per turn or per cell stream; older text is cut from the front. */
export const LIVE_LIMIT = 200_000;

function append(current: string | undefined, more: string): string {
  const next = (current ?? "") + more;
  return next.length > LIVE_LIMIT ? next.slice(next.length - LIVE_LIMIT) : next;
}

/**
 * Live text per turn and per cell.
 *
 * @example
 * ```ts
 * const live = new LiveOutput();
 * live.addToken("fr_1", "Checking");
 * live.settle({ type: "scratchpad", data: { frame_id: "fr_1", text: "Checking" } });
 * ```
 */
export class LiveOutput {
  /** Streaming model text by turn (the daemon keys turns by frame id). */
  readonly tokens: Map<string, string> = new Map();
  /** Streaming output by cell id. */
  readonly cells: Map<string, { stdout: string; stderr: string }> = new Map();

  /** Appends streamed model text of `turn`. */
  addToken(turn: string, more: string): void {
    this.tokens.set(turn, append(this.tokens.get(turn), more));
  }

  /** Appends streamed output of `cell`. */
  addCellOutput(cell: string, name: "stdout" | "stderr", more: string): void {
    const current = this.cells.get(cell) ?? { stdout: "", stderr: "" };
    current[name] = append(current[name], more);
    this.cells.set(cell, current);
  }

  /** Drops what a durable record now shows: a turn's text, a cell's output. */
  settle(record: { type: string; data: Record<string, unknown> }): void {
    if (record.type === "scratchpad" || record.type === "turn.ended") {
      const turn = text(record.data, "turn_id", "turn", "frame_id");
      if (turn === undefined) this.tokens.clear();
      else this.tokens.delete(turn);
    } else if (record.type === "cell.finished") {
      const cell = text(record.data, "cell_id", "cell");
      if (cell !== undefined) this.cells.delete(cell);
    }
  }

  /** Forgets everything, e.g. when the socket drops (what was missed is not replayed). */
  clear(): void {
    this.tokens.clear();
    this.cells.clear();
  }
}
