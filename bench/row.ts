/**
 * One line of the benchmark report: a figure, its value, the ceiling or peer it is measured
 * against, their ratio and the goal it aims at.
 *
 * @module
 */

import { KlbrError } from "../runtime/core/mod.ts";

/** The units the figures are reported in. */
export type Unit = "inputs/s" | "records/s" | "rows/s" | "ms" | "s" | "MB" | "KB" | "count";

/** The ceiling or peer a figure is compared with, in the figure's unit. */
export interface Peer {
  /** What was measured, e.g. "raw node:sqlite insert+commit". */
  label: string;
  /** Its value; `null` when it could not be measured (the row's note says why). */
  value: number | null;
}

/** A goal a figure aims at: reported, never asserted. */
export interface Goal {
  /** How the goal reads in the table, e.g. "< 2 ms". */
  text: string;
  /** Whether `value` meets it; `null` when it cannot be judged (no peer). */
  test: (value: number, peer: number | null) => boolean | null;
}

/** One row of the report, as printed and as `--json` emits it. */
export interface BenchRow {
  /** Figure number and letter, e.g. `"1a"`; rows sort by it. */
  id: string;
  /** What the row measures. */
  figure: string;
  unit: Unit;
  /** The measured value; `null` when the measurement failed (see `note`). */
  value: number | null;
  peer: Peer | null;
  /** `value / peer.value`, or `null` when either is missing. */
  ratio: number | null;
  goal: string | null;
  /** Whether the goal is met; `null` without a goal or when it cannot be judged. */
  met: boolean | null;
  /** How it was measured, or why a value is missing. */
  note: string | null;
}

/** What {@linkcode makeRow} takes. */
export interface RowSpec {
  id: string;
  figure: string;
  unit: Unit;
  value: number | null;
  peer?: Peer | null;
  goal?: Goal | null;
  note?: string | null;
}

const ID = /^[1-9][0-9]*[a-z]$/;

/**
 * Builds a row: computes the ratio to the peer and judges the goal.
 *
 * @throws {KlbrError} `invalid_input` when the id is not a figure number and a letter, or a
 *   value is negative or not finite.
 * @example
 * ```ts
 * makeRow({ id: "3a", figure: "cell round trip", unit: "ms", value: 0.4,
 *   goal: below(2, "< 2 ms") });
 * ```
 */
export function makeRow(spec: RowSpec): BenchRow {
  if (!ID.test(spec.id)) {
    throw new KlbrError(
      "invalid_input",
      `cannot make row: id must be a figure number and a letter (got ${JSON.stringify(spec.id)})`,
    );
  }
  checkValue(spec.id, "value", spec.value);
  checkValue(spec.id, "peer value", spec.peer?.value ?? null);
  const peer = spec.peer ?? null;
  const ratio = spec.value !== null && peer?.value != null && peer.value > 0
    ? spec.value / peer.value
    : null;
  const goal = spec.goal ?? null;
  const met = goal === null || spec.value === null
    ? null
    : goal.test(spec.value, peer?.value ?? null);
  return {
    id: spec.id,
    figure: spec.figure,
    unit: spec.unit,
    value: spec.value,
    peer,
    ratio,
    goal: goal?.text ?? null,
    met,
    note: spec.note ?? null,
  };
}

/**
 * Builds the rows of a phase that failed: each keeps its id, figure and goal, with no value
 * and a note naming the failure.
 *
 * @throws {KlbrError} as {@linkcode makeRow}.
 */
export function failedRows(specs: readonly Omit<RowSpec, "value">[], error: unknown): BenchRow[] {
  const reason = error instanceof Error ? error.message : String(error);
  return specs.map((spec) =>
    makeRow({ ...spec, value: null, peer: spec.peer ?? null, note: `failed: ${reason}` })
  );
}

/**
 * Returns the rows ordered by figure number, then letter (`2a` before `10a`).
 *
 * @example
 * ```ts
 * sortRows(rows).map((row) => row.id); // ["1a", "1b", "2a", …]
 * ```
 */
export function sortRows(rows: readonly BenchRow[]): BenchRow[] {
  const number = (id: string) => Number.parseInt(id, 10);
  return [...rows].sort((a, b) => number(a.id) - number(b.id) || a.id.localeCompare(b.id));
}

/** A goal met when the value is strictly below `limit`. */
export function below(limit: number, text: string): Goal {
  return { text, test: (value) => value < limit };
}

/** A goal met when the value is strictly below `times` the peer's (by default the peer's). */
export function belowPeer(text: string, times = 1): Goal {
  return { text, test: (value, peer) => (peer === null ? null : value < times * peer) };
}

/** A goal met when the value is at most `times` the peer's. */
export function withinPeer(times: number, text: string): Goal {
  return { text, test: (value, peer) => (peer === null ? null : value <= times * peer) };
}

function checkValue(id: string, what: string, value: number | null): void {
  if (value !== null && !(Number.isFinite(value) && value >= 0)) {
    throw new KlbrError(
      "invalid_input",
      `cannot make row ${id}: ${what} must be a finite number >= 0 (got ${value})`,
    );
  }
}
