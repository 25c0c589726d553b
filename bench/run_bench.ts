/**
 * One benchmark run: every figure of `deno task bench` in a fixed order, each phase on its
 * own daemons in one scratch directory that is removed at the end. A phase that fails gives
 * rows without values whose note names the failure; the others still run.
 *
 * @module
 */

import { join } from "node:path";
import { type BenchDaemon, startBenchDaemon } from "./daemon.ts";
import { resolvePython } from "../runtime/kernel/mod.ts";
import { benchAckLatencyPeer, benchAdmissionPeer } from "./peers/admission_rows.ts";
import { benchAgentLoop } from "./agent_loop.ts";
import { prepareBlockedState } from "./blocked_release.ts";
import { benchFlood } from "./flood.ts";
import { benchCellRoundTrip } from "./cell_round_trip.ts";
import { benchCodeOutline } from "./code_outline.ts";
import { benchContext } from "./context.ts";
import { benchGenerationSpawn } from "./generation_spawn.ts";
import { runJupyterPeer } from "./jupyter_peer.ts";
import { describeMachine } from "./machine.ts";
import { memoryRows, type MemorySamples } from "./memory.ts";
import { measureRawCommits } from "./raw_commit.ts";
import { type MeasuredReplay, measureReplay, replayRow, seedRecords } from "./replay.ts";
import { startPeer } from "./peers/spawn.ts";
import { loopPeerRows, loopPeerSamples, measureLoopPeers } from "./peers/loop_rows.ts";
import { ratePerSecond } from "./stats.ts";
import { measurePageOpen, measureWireOpen, pageOpenRows } from "./page_open.ts";
import { HEAD_PAGE } from "../ui/src/lane_client.ts";
import { type BenchRow, failedRows, type RowSpec, sortRows } from "./row.ts";
import { residentBytes, workingDenoPid } from "./rss.ts";
import { benchStartup } from "./startup.ts";
import type { BenchReport } from "./table.ts";

/** How much each figure measures. */
export interface BenchCounts {
  /** Inputs per admission run (figure 1). */
  admissionInputs: number;
  /** The in-flight bound of the windowed admission run. */
  admissionWindow: number;
  /** Raw commits per ceiling measurement (figures 3e and 10). */
  rawCommits: number;
  /** Inputs timed one at a time while attention.plan is blocked (figure 2). */
  latencyInputs: number;
  /** Records in the log a since=0 client replays (figure 4). */
  replayRecords: number;
  /** Timed `1+1` cells, workbench and Jupyter each (figure 3). */
  cells: number;
  /** Timed raw echo frames (figure 3). */
  echoes: number;
  /** Untimed rounds before each timed series. */
  warmup: number;
  /** Jupyter kernels started and timed (figure 5d). */
  jupyterStarts: number;
  /** Workbench generations and bare interpreters started (figure 5c). */
  spawns: number;
  /** Restarts of serve and the bare server (figures 5b, 6a). */
  restarts: number;
  /** How long a process settles before its size is read, in ms. */
  settleMs: number;
  /** Timed outlines of the 5,000-line file, cold and cached each (figure 7). */
  outlines: number;
  /** The largest history of figure 8, in provider items (also a tenth and a hundredth). */
  contextItems: number;
  /** The largest store of figure 9, in records (also a tenth and a hundredth). */
  contextRecords: number;
  /** Timed turns of each agent-loop series (figure 10, 2d, 3e). */
  loopTurns: number;
  /** Interleaved repeats of each klbr-against-peer series (1a, 1b). */
  peerRepeats: number;
}

/** The counts the issue asks for. */
export const FULL_COUNTS: BenchCounts = {
  admissionInputs: 10_000,
  admissionWindow: 64,
  rawCommits: 3_000,
  latencyInputs: 2_000,
  replayRecords: 100_000,
  cells: 1_000,
  echoes: 5_000,
  warmup: 50,
  jupyterStarts: 3,
  spawns: 10,
  restarts: 3,
  settleMs: 1_000,
  outlines: 50,
  contextItems: 100_000,
  contextRecords: 1_000_000,
  loopTurns: 100,
  peerRepeats: 3,
};

/** Smaller counts for `--quick`: the same figures, noisier. */
export const QUICK_COUNTS: BenchCounts = {
  admissionInputs: 1_000,
  admissionWindow: 64,
  rawCommits: 500,
  latencyInputs: 300,
  replayRecords: 10_000,
  cells: 200,
  echoes: 1_000,
  warmup: 20,
  jupyterStarts: 1,
  spawns: 3,
  restarts: 1,
  settleMs: 500,
  outlines: 15,
  // Figure 8's smallest size must already fill a request, or its growth says nothing.
  contextItems: 100_000,
  contextRecords: 100_000,
  loopTurns: 30,
  peerRepeats: 2,
};

/** Options for {@linkcode runBench}. */
export interface RunBenchOptions {
  /** Use {@linkcode QUICK_COUNTS}. */
  quick: boolean;
  /** Overrides the counts (tests use tiny ones). */
  counts?: BenchCounts;
  /** Receives progress lines. @default nothing */
  log?: (line: string) => void;
  /**
   * Runs only these phases ({@linkcode PHASES}); `replay` runs `blocked` first, which it
   * needs. Rows that combine phases (6a–6c) are left out. @default every phase
   */
  only?: readonly Phase[];
}

/** The bench's phases, in the order they run, as `--only` names them. */
export const PHASES = [
  "startup",
  "admission",
  "blocked",
  "replay",
  "page",
  "cells",
  "loop",
  "outline",
  "context",
] as const;

/** One of {@linkcode PHASES}. */
export type Phase = (typeof PHASES)[number];

/** A finished run: the report and the phases that failed. */
export interface BenchRun {
  report: BenchReport;
  /** `"<phase>: <message>"` for each phase that failed; empty when all ran. */
  failures: string[];
}

const SPECS: Record<string, Omit<RowSpec, "value">> = {
  "1a": { id: "1a", figure: "admission throughput, all sent at once", unit: "inputs/s" },
  "1b": { id: "1b", figure: "admission throughput, windowed", unit: "inputs/s" },
  "1k": { id: "1k", figure: "daemon resident size, peak during a flood", unit: "MB" },
  "1l": { id: "1l", figure: "send → ack p99 of a second client during a flood", unit: "ms" },
  "1m": { id: "1m", figure: "/health answer p99 during a flood", unit: "ms" },
  "2d": { id: "2d", figure: "send → ack p50, while a turn runs", unit: "ms" },
  "3e": { id: "3e", figure: "cell round trip 1+1 through the daemon, p50", unit: "ms" },
  "3f": { id: "3f", figure: "cell round trip through the daemon, against Jupyter", unit: "ms" },
  ...Object.fromEntries(
    [
      ["10a", "ack → first model request", "ms"],
      ["10b", "tool call → next model request", "ms"],
      ["10c", "message → send record", "ms"],
      ["10d", "message → turn.ended record", "ms"],
      ["10e", "daemon CPU per one-step turn", "ms"],
      ["10f", "commits per one-step turn", "count"],
      ["10g", "hook calls per one-step turn", "count"],
      ["10h", "time in COMMIT per one-step turn", "ms"],
      ["10i", "daemon CPU per one-step turn, against the durable SDK loop", "ms"],
      ["10j", "message → send, against the durable pi-agent-core loop", "ms"],
    ].map(([id, figure, unit]) => [id, { id, figure, unit: unit as RowSpec["unit"] }]),
  ),
  "2a": { id: "2a", figure: "send → ack p50, idle daemon", unit: "ms" },
  "2b": { id: "2b", figure: "send → ack p99, idle daemon", unit: "ms" },
  "3a": { id: "3a", figure: "cell round trip 1+1, p50", unit: "ms" },
  "3b": { id: "3b", figure: "cell round trip 1+1, p99", unit: "ms" },
  "3c": { id: "3c", figure: "cell round trip 1+1, p50, against Jupyter", unit: "ms" },
  "3d": { id: "3d", figure: "cell round trip 1+1, p99, against Jupyter", unit: "ms" },
  "4a": { id: "4a", figure: "replay to a since=0 client", unit: "records/s" },
  "5a": { id: "5a", figure: "serve answers /health, first start", unit: "s" },
  "12a": { id: "12a", figure: "page shows the newest message of a long session", unit: "ms" },
  "12b": { id: "12b", figure: "page heap with a long session open", unit: "MB" },
  "5b": { id: "5b", figure: "serve answers /health, restart", unit: "s" },
  "5c": { id: "5c", figure: "spawn a workbench generation", unit: "ms" },
  "5d": { id: "5d", figure: "spawn a workbench generation, against Jupyter", unit: "ms" },
  "5e": { id: "5e", figure: "spawn a workbench generation as the daemon does", unit: "ms" },
  "7a": { id: "7a", figure: "outline of a 5,000-line file, cold", unit: "ms" },
  "7b": { id: "7b", figure: "outline of a 5,000-line file, cached", unit: "ms" },
  ...Object.fromEntries(
    [
      ["8a", "build one request", "ms"],
      ["8b", "build one request", "ms"],
      ["8c", "build one request", "ms"],
      ["8d", "request size", "KB"],
      ["8e", "request size", "KB"],
      ["8f", "request size", "KB"],
      ["8g", "one compaction step", "ms"],
      ["8h", "one compaction step", "ms"],
      ["8i", "one compaction step", "ms"],
      ["9a", "serve answers /health", "s"],
      ["9b", "serve answers /health", "s"],
      ["9c", "serve answers /health", "s"],
      ["9d", "daemon resident size, idle", "MB"],
      ["9e", "daemon resident size, idle", "MB"],
      ["9f", "daemon resident size, idle", "MB"],
    ].map(([id, figure, unit]) => [id, { id, figure, unit: unit as RowSpec["unit"] }]),
  ),
};

/**
 * Runs every figure and returns the report; never throws for a failing phase.
 *
 * @throws {KlbrError} only when the scratch directory cannot be created.
 * @example
 * ```ts
 * const { report } = await runBench({ quick: true });
 * console.log(formatTable(report));
 * ```
 */
export async function runBench(options: RunBenchOptions): Promise<BenchRun> {
  const counts = options.counts ?? (options.quick ? QUICK_COUNTS : FULL_COUNTS);
  const log = options.log ?? (() => {});
  const started = performance.now();
  const root = await Deno.makeTempDir({ prefix: "klbr-bench-" });
  const rows: BenchRow[] = [];
  const failures: string[] = [];
  const memory: MemorySamples = {
    idleDaemonBytes: null,
    launcherBytes: null,
    floorBytes: null,
    beforeReplayBytes: null,
    afterReplayBytes: null,
    settledAfterReplayBytes: null,
    records: null,
  };
  const dir = async (name: string) => {
    const path = join(root, name);
    await Deno.mkdir(path, { recursive: true });
    return path;
  };
  const selected = new Set<string>(options.only ?? PHASES);
  if (selected.has("page")) selected.add("replay");
  if (selected.has("replay")) selected.add("blocked");
  const keys: Record<string, Phase> = {
    "start-up": "startup",
    "admission": "admission",
    "blocked attention.plan": "blocked",
    "replay": "replay",
    "page open": "page",
    "cells": "cells",
    "agent loop": "loop",
    "code outline": "outline",
    "context": "context",
  };
  const phase = async (name: string, ids: string[], fn: () => Promise<void>) => {
    if (!selected.has(keys[name])) return;
    log(`${name} (${ids.join(", ")}) at ${((performance.now() - started) / 1000).toFixed(1)} s`);
    try {
      await fn();
    } catch (error) {
      failures.push(`${name}: ${error instanceof Error ? error.message : error}`);
      const done = new Set(rows.map((row) => row.id));
      rows.push(...failedRows(ids.filter((id) => !done.has(id)).map((id) => SPECS[id]), error));
    }
  };

  try {
    const machine = await describeMachine();

    await phase("start-up", ["5a", "5b"], async () => {
      const result = await benchStartup({
        root: await dir("startup"),
        restarts: counts.restarts,
        settleMs: counts.settleMs,
      });
      rows.push(...result.rows);
      memory.idleDaemonBytes = result.idleDaemonBytes;
      memory.launcherBytes = result.launcherBytes;
      memory.floorBytes = result.floorBytes;
    });

    const admissionIds = ["1a", "1b", "1k", "1l", "1m"];
    await phase("admission", admissionIds, async () => {
      rows.push(
        ...await benchAdmissionPeer({
          root: await dir("admission"),
          inputs: counts.admissionInputs,
          window: counts.admissionWindow,
          repeats: counts.peerRepeats,
        }),
      );
      // A client that writes twice figure 1's inputs and reads nothing (20,000 in full).
      rows.push(
        ...await benchFlood({
          root: await dir("flood"),
          inputs: 2 * counts.admissionInputs,
          samples: Math.min(counts.latencyInputs, 500),
        }),
      );
    });

    const stateDir = join(root, "blocked", "state");
    const workspace = await dir("blocked/ws");
    let blocked = false;
    let seededHead: number | undefined;
    await phase("blocked attention.plan", ["2a", "2b"], async () => {
      await Deno.mkdir(stateDir, { recursive: true });
      await prepareBlockedState({ stateDir, workspace, scratch: await dir("blocked/scratch") });
      blocked = true;
      const daemon = await startBenchDaemon({ stateDir, workspace });
      try {
        rows.push(
          ...await benchAckLatencyPeer({
            daemon,
            root: await dir("ack-peer"),
            count: counts.latencyInputs,
            settleMs: counts.settleMs,
          }),
        );
      } finally {
        await daemon.kill();
      }
    });

    await phase("replay", ["4a"], async () => {
      if (!blocked) throw new Error("the blocked state directory could not be prepared");
      const seed = seedRecords(stateDir, counts.replayRecords);
      const ours: number[] = [];
      const theirs: number[] = [];
      let first: MeasuredReplay | undefined;
      for (let r = 0; r < counts.peerRepeats; r++) {
        // Cold each time: a daemon just started, then the bare server just started.
        let daemon: BenchDaemon | undefined;
        try {
          daemon = await startBenchDaemon({ stateDir, workspace });
          await new Promise((resolve) => setTimeout(resolve, counts.settleMs));
          const pid = await workingDenoPid(daemon.pid);
          if (r === 0) memory.beforeReplayBytes = await residentBytes(pid);
          const replay = await measureReplay({
            port: daemon.port,
            token: daemon.token,
            head: seed.head,
            pid,
          });
          ours.push(ratePerSecond(replay.records, replay.elapsedMs));
          if (r === 0) {
            first = replay;
            memory.afterReplayBytes = await residentBytes(pid);
            memory.records = replay.records;
            await new Promise((resolve) => setTimeout(resolve, counts.settleMs));
            memory.settledAfterReplayBytes = await residentBytes(pid);
          }
        } finally {
          await daemon?.kill();
        }
        const peer = await startPeer("replay_server.ts", [join(stateDir, "runtime.sqlite")]);
        try {
          const replay = await measureReplay({ port: peer.port, token: "", head: seed.head });
          theirs.push(ratePerSecond(replay.records, replay.elapsedMs));
        } finally {
          await peer.stop();
        }
        seededHead = seed.head;
      }
      rows.push(replayRow(seed, first!, { ours, theirs }));
    });

    await phase("page open", ["12a", "12b"], async () => {
      if (seededHead === undefined) throw new Error("the replay phase did not seed a session");
      const daemon = await startBenchDaemon({ stateDir, workspace });
      try {
        const wireMs = await measureWireOpen({
          port: daemon.port,
          token: daemon.token,
          page: HEAD_PAGE,
        });
        const open = await measurePageOpen(`${daemon.url}/#token=${daemon.token}`, {
          head: seededHead,
          scratch: await dir("page"),
        });
        const empty = await measurePageOpen(
          `${daemon.url}/?session=empty#token=${daemon.token}`,
          { head: 0, scratch: await dir("page-empty") },
        );
        rows.push(
          ...pageOpenRows(open, wireMs, {
            records: seededHead,
            page: HEAD_PAGE,
            emptyHeapBytes: empty.heapBytes,
          }),
        );
      } finally {
        await daemon.kill();
      }
    });

    let python = "python3";
    await phase("cells", ["3a", "3b", "3c", "3d", "5c", "5d", "5e"], async () => {
      python = (await resolvePython("python3")).executable;
      const jupyter = await runJupyterPeer({
        count: counts.cells,
        warmup: counts.warmup,
        starts: counts.jupyterStarts,
        scratch: await dir("jupyter"),
      });
      const scratch = await dir("cells");
      rows.push(...await benchCellRoundTrip({ ...counts, python, scratch, jupyter }));
      rows.push(
        ...await benchGenerationSpawn({ python, scratch, spawns: counts.spawns, jupyter }),
      );
    });

    await phase(
      "agent loop",
      [
        "2d",
        "3e",
        "3f",
        "10a",
        "10b",
        "10c",
        "10d",
        "10e",
        "10f",
        "10g",
        "10h",
        "10i",
        "10j",
      ],
      async () => {
        const cell = rows.find((row) => row.id === "3a");
        const jupyterCell = rows.find((row) => row.id === "3c")?.peer?.value ?? null;
        const raw = measureRawCommits({ dir: await dir("raw-4"), count: counts.rawCommits });
        const peers = loopPeerSamples();
        const peerRun = async () =>
          await measureLoopPeers({
            root: await dir("loop-peers"),
            python: (await resolvePython("python3")).executable,
            turns: counts.loopTurns,
            warmup: Math.min(10, counts.loopTurns),
          }, peers);
        await peerRun();
        rows.push(
          ...await benchAgentLoop({
            stateDir: await dir("loop/state"),
            workspace: await dir("loop/ws"),
            turns: counts.loopTurns,
            warmup: Math.min(10, counts.loopTurns),
            rawCommitMs: raw.latency.p50,
            rawEchoMs: cell?.peer?.value ?? 0.03,
            bareCellMs: cell?.value ?? null,
            jupyterCellMs: jupyterCell,
          }),
        );
        await peerRun();
        rows.push(...loopPeerRows(rows, peers));
      },
    );

    await phase("code outline", ["7a", "7b"], async () => {
      rows.push(...await benchCodeOutline({ scratch: await dir("code"), count: counts.outlines }));
    });
    await phase(
      "context",
      [
        "8a",
        "8b",
        "8c",
        "8d",
        "8e",
        "8f",
        "8g",
        "8h",
        "8i",
        "8j",
        "9a",
        "9b",
        "9c",
        "9d",
        "9e",
        "9f",
      ],
      async () => {
        rows.push(
          ...await benchContext({
            root: await dir("context"),
            items: counts.contextItems,
            records: counts.contextRecords,
            runs: 50,
            settleMs: counts.settleMs,
          }),
        );
      },
    );

    if (options.only === undefined) rows.push(...memoryRows(memory));
    return {
      report: {
        generatedAt: new Date().toISOString(),
        machine,
        quick: options.quick,
        counts: { ...counts },
        ...(options.only === undefined ? {} : { only: options.only }),
        rows: sortRows(rows),
      },
      failures,
    };
  } finally {
    await Deno.remove(root, { recursive: true }).catch(() => {});
  }
}
