/**
 * Figure 6 — memory: the daemon's resident size idle (against a bare `Deno.serve`), and
 * after a 100,000-record log was replayed (against its idle size). The sizes are read with
 * `ps` by the phases that run those daemons; this module turns them into rows.
 *
 * @module
 */

import { below, type BenchRow, makeRow } from "./row.ts";

/** Resident sizes in bytes; `null` where the phase that reads one failed. */
export interface MemorySamples {
  /** The idle daemon (the Deno process that serves), after start-up settled. */
  idleDaemonBytes: number | null;
  /** `serve`'s launcher process, when `serve` runs the daemon as a child; else `null`. */
  launcherBytes: number | null;
  /** A bare `Deno.serve` answering `/health`, idle. */
  floorBytes: number | null;
  /** The daemon restarted on the large log, before any client connected. */
  beforeReplayBytes: number | null;
  /** The same daemon right after a `since=0` client received every record. */
  afterReplayBytes: number | null;
  /** The same daemon once the client had gone and it settled again. */
  settledAfterReplayBytes: number | null;
  /** How many records the large log held. */
  records: number | null;
}

const MB = 1e6;

function fixed(bytes: number | null): string {
  return bytes === null ? "—" : (bytes / MB).toFixed(1);
}

/**
 * Builds figure 6's rows (6c only when `serve` is a separate launcher process).
 *
 * @throws {KlbrError} `invalid_input` when a size is negative or not finite.
 * @example
 * ```ts
 * rows.push(...memoryRows(samples));
 * ```
 */
export function memoryRows(samples: MemorySamples): BenchRow[] {
  const mb = (bytes: number | null) => (bytes === null ? null : bytes / MB);
  const records = samples.records === null ? "100,000" : samples.records.toLocaleString("en-US");
  const rows = [
    makeRow({
      id: "6a",
      figure: "daemon resident size, idle",
      unit: "MB",
      value: mb(samples.idleDaemonBytes),
      peer: { label: "bare Deno.serve", value: mb(samples.floorBytes) },
      goal: below(120, "< 120 MB"),
      note: "VmRSS by `ps -o rss=` of the Deno process that serves, 1 MB = 10^6 bytes, after " +
        "start-up settled with no client, no input and no Python process",
    }),
    makeRow({
      id: "6b",
      figure: `daemon resident size after replaying ${records} records`,
      unit: "MB",
      value: mb(samples.afterReplayBytes),
      peer: { label: "idle daemon", value: mb(samples.idleDaemonBytes) },
      note: `right after the since=0 client received every record; the same daemon read ` +
        `${fixed(samples.beforeReplayBytes)} MB before the client connected (large log, hook ` +
        `worker blocked) and ${fixed(samples.settledAfterReplayBytes)} MB once the client had ` +
        `gone and it settled`,
    }),
  ];
  if (samples.launcherBytes !== null) {
    rows.push(makeRow({
      id: "6c",
      figure: "serve launcher resident size, idle",
      unit: "MB",
      value: mb(samples.launcherBytes),
      peer: { label: "bare Deno.serve", value: mb(samples.floorBytes) },
      note: "serve derives the daemon's permissions and runs it as a child Deno process; " +
        "this parent stays resident beside it",
    }));
  }
  return rows;
}
