/**
 * The printed form of a benchmark report: one Markdown table (figure | value | ceiling/peer |
 * ratio | goal | met?) followed by the machine and each row's note.
 *
 * @module
 */

import type { MachineInfo } from "./machine.ts";
import { type BenchRow, sortRows, type Unit } from "./row.ts";

/** A whole run: where it ran, with which counts, and its rows in figure order. */
export interface BenchReport {
  /** When the run finished, ISO 8601. */
  generatedAt: string;
  machine: MachineInfo;
  /** Whether `--quick` (smaller counts) was used. */
  quick: boolean;
  /** The counts the run used, by name (e.g. `admissionInputs`). */
  counts: Record<string, number>;
  /** The phases run (`--only`); absent when every phase ran. */
  only?: readonly string[];
  rows: BenchRow[];
}

const COLUMNS = ["figure", "value", "ceiling/peer", "ratio", "goal", "met?"];

/**
 * Formats a value in its unit: rates as whole numbers with thousands separators, times and
 * sizes with three significant digits; `null` as a dash.
 *
 * @example
 * ```ts
 * formatValue(4102.7, "inputs/s"); // "4,103 inputs/s"
 * formatValue(0.41234, "ms");      // "0.412 ms"
 * ```
 */
export function formatValue(value: number | null, unit: Unit): string {
  if (value === null) return "—";
  if (unit === "inputs/s" || unit === "records/s" || unit === "rows/s") {
    return `${Math.round(value).toLocaleString("en-US")} ${unit}`;
  }
  return `${significant(value)} ${unit}`;
}

/**
 * Formats a ratio as a multiple, e.g. `0.83×`; `null` as a dash.
 *
 * @example
 * ```ts
 * formatRatio(0.8333); // "0.83×"
 * ```
 */
export function formatRatio(ratio: number | null): string {
  if (ratio === null) return "—";
  return `${ratio >= 10 ? ratio.toFixed(1) : ratio.toFixed(2)}×`;
}

/**
 * Formats a report as one Markdown table, then the machine it ran on and the rows' notes.
 *
 * @example
 * ```ts
 * console.log(formatTable(report));
 * ```
 */
export function formatTable(report: BenchReport): string {
  const rows = sortRows(report.rows);
  const cells = rows.map((row) =>
    [
      `${row.id} ${row.figure}`,
      formatValue(row.value, row.unit),
      row.peer === null ? "—" : `${formatValue(row.peer.value, row.unit)} ${row.peer.label}`,
      formatRatio(row.ratio),
      row.goal ?? "—",
      row.goal === null ? "—" : row.met === null ? "n/a" : row.met ? "yes" : "no",
    ].map(escapeCell)
  );
  const lines = [
    `| ${COLUMNS.join(" | ")} |`,
    `| ${COLUMNS.map(() => "---").join(" | ")} |`,
    ...cells.map((c) => `| ${c.join(" | ")} |`),
  ];
  const m = report.machine;
  lines.push(
    "",
    `${report.quick ? "quick run" : "full run"}${
      report.only ? ` of ${report.only.join(", ")}` : ""
    }, ${report.generatedAt}: deno ${m.deno} ` +
      `(V8 ${m.v8}, TypeScript ${m.typescript}), SQLite ${m.sqlite}, ${m.python}; ` +
      `${m.cpus} CPUs (${m.cpuModel}), ${significant(m.memoryBytes / 1e9)} GB memory, ${m.os}`,
  );
  const notes = rows.filter((row) => row.note !== null);
  if (notes.length > 0) {
    lines.push("", "Notes:");
    for (const row of notes) lines.push(`- ${row.id}: ${row.note}`);
  }
  return lines.join("\n");
}

function significant(value: number): string {
  if (value === 0) return "0";
  if (value >= 100) return Math.round(value).toLocaleString("en-US");
  return Number(value.toPrecision(3)).toString();
}

function escapeCell(text: string): string {
  return text.replaceAll("|", "\\|").replaceAll("\n", " ");
}
