/**
 * Lossy live output: model text and reasoning as they stream (per turn) and cell output as it is
 * printed (per cell). It is animation only — never replayed — and each part is dropped once the
 * durable record that carries the same text arrives.
 *
 * @module
 */

import { readRecord } from "../../runtime/core/mod.ts";

/** Most characters kept per turn or per cell stream; older text is cut from the front. */
export const LIVE_LIMIT = 200_000;

/** The records that say a turn's streamed text is settled. */
const TURN_RECORDS = new Set(["reasoning", "scratchpad", "turn.ended"]);

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
 * live.settle({ type: "scratchpad", data: { frame_id: "fr_1", text: "Checking", partial: false } });
 * ```
 */
export class LiveOutput {
  /** Streaming model text by turn (the daemon keys turns by frame id). */
  readonly tokens: Map<string, string> = new Map();
  /** Streaming reasoning by turn: what a reasoning model thinks before it answers. */
  readonly reasoning: Map<string, string> = new Map();
  /** Streaming output by cell id. */
  readonly cells: Map<string, { stdout: string; stderr: string }> = new Map();

  /** Appends streamed model text of `turn`. */
  addToken(turn: string, more: string): void {
    this.tokens.set(turn, append(this.tokens.get(turn), more));
  }

  /** Appends streamed reasoning of `turn`. */
  addReasoning(turn: string, more: string): void {
    this.reasoning.set(turn, append(this.reasoning.get(turn), more));
  }

  /** Appends streamed output of `cell`. */
  addCellOutput(cell: string, name: "stdout" | "stderr", more: string): void {
    const current = this.cells.get(cell) ?? { stdout: "", stderr: "" };
    current[name] = append(current[name], more);
    this.cells.set(cell, current);
  }

  /**
   * Drops what a durable record now shows: a turn's reasoning (its `reasoning` record), a turn's
   * text (its `scratchpad`; `turn.ended` drops both), a cell's output.
   */
  settle(record: { type: string; data: unknown }): void {
    const read = readRecord(record.type, record.data);
    if (!read.ok) {
      // A turn's record that cannot be read still says some turn moved on.
      if (TURN_RECORDS.has(record.type)) {
        this.tokens.clear();
        this.reasoning.clear();
      }
      return;
    }
    const r = read.record;
    if (r.type === "reasoning") this.reasoning.delete(r.data.frame_id);
    else if (r.type === "scratchpad") this.tokens.delete(r.data.frame_id);
    else if (r.type === "turn.ended") {
      this.tokens.delete(r.data.frame_id);
      this.reasoning.delete(r.data.frame_id);
    } else if (r.type === "cell.finished") this.cells.delete(r.data.cell_id);
  }

  /** Forgets everything, e.g. when the socket drops (what was missed is not replayed). */
  clear(): void {
    this.tokens.clear();
    this.reasoning.clear();
    this.cells.clear();
  }
}
