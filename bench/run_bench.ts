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
import { type BenchRow, failedRows, sortRows, type Unit } from "./row.ts";
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

/** The bench's phases in the order they run: the `--only` name, then the name logs give. */
const PHASE_NAMES = {
  startup: "start-up",
  admission: "admission",
  blocked: "blocked attention.plan",
  replay: "replay",
  page: "page open",
  cells: "cells",
  loop: "agent loop",
  outline: "code outline",
  context: "context",
};

/** Each phase's rows (phase, id, figure, unit); a phase that fails gives them without values. */
const PHASE_ROWS: [Phase, string, string, Unit][] = [
  ["startup", "5a", "serve answers /health, first start", "s"],
  ["startup", "5b", "serve answers /health, restart", "s"],
  ["admission", "1a", "admission throughput, all sent at once", "inputs/s"],
  ["admission", "1b", "admission throughput, windowed", "inputs/s"],
  ["admission", "1k", "daemon resident size, peak during a flood", "MB"],
  ["admission", "1l", "send → ack p99 of a second client during a flood", "ms"],
  ["admission", "1m", "/health answer p99 during a flood", "ms"],
  ["blocked", "2a", "send → ack p50, idle daemon", "ms"],
  ["blocked", "2b", "send → ack p99, idle daemon", "ms"],
  ["replay", "4a", "replay to a since=0 client", "records/s"],
  ["page", "12a", "page shows the newest message of a long session", "ms"],
  ["page", "12b", "page heap with a long session open", "MB"],
  ["cells", "3a", "cell round trip 1+1, p50", "ms"],
  ["cells", "3b", "cell round trip 1+1, p99", "ms"],
  ["cells", "3c", "cell round trip 1+1, p50, against Jupyter", "ms"],
  ["cells", "3d", "cell round trip 1+1, p99, against Jupyter", "ms"],
  ["cells", "5c", "spawn a workbench generation", "ms"],
  ["cells", "5d", "spawn a workbench generation, against Jupyter", "ms"],
  ["cells", "5e", "spawn a workbench generation as the daemon does", "ms"],
  ["loop", "2d", "send → ack p50, while a turn runs", "ms"],
  ["loop", "3e", "cell round trip 1+1 through the daemon, p50", "ms"],
  ["loop", "3f", "cell round trip through the daemon, against Jupyter", "ms"],
  ["loop", "10a", "ack → first model request", "ms"],
  ["loop", "10b", "tool call → next model request", "ms"],
  ["loop", "10c", "message → send record", "ms"],
  ["loop", "10d", "message → turn.ended record", "ms"],
  ["loop", "10e", "daemon CPU per one-step turn", "ms"],
  ["loop", "10f", "commits per one-step turn", "count"],
  ["loop", "10g", "hook calls per one-step turn", "count"],
  ["loop", "10h", "time in COMMIT per one-step turn", "ms"],
  ["loop", "10i", "daemon CPU per one-step turn, against the durable SDK loop", "ms"],
  ["loop", "10j", "message → send, against the durable pi-agent-core loop", "ms"],
  ["outline", "7a", "outline of a 5,000-line file, cold", "ms"],
  ["outline", "7b", "outline of a 5,000-line file, cached", "ms"],
  ["context", "8a", "build one request", "ms"],
  ["context", "8b", "build one request", "ms"],
  ["context", "8c", "build one request", "ms"],
  ["context", "8d", "request size", "KB"],
  ["context", "8e", "request size", "KB"],
  ["context", "8f", "request size", "KB"],
  ["context", "8g", "one compaction step", "ms"],
  ["context", "8h", "one compaction step", "ms"],
  ["context", "8i", "one compaction step", "ms"],
  ["context", "8j", "the contract message (message 0)", "count"],
  ["context", "9a", "serve answers /health", "s"],
  ["context", "9b", "serve answers /health", "s"],
  ["context", "9c", "serve answers /health", "s"],
  ["context", "9d", "daemon resident size, idle", "MB"],
  ["context", "9e", "daemon resident size, idle", "MB"],
  ["context", "9f", "daemon resident size, idle", "MB"],
];

/** One of {@linkcode PHASES}. */
export type Phase = keyof typeof PHASE_NAMES;

/** The bench's phases, in the order they run, as `--only` names them. */
export const PHASES = Object.keys(PHASE_NAMES) as Phase[];

/** A finished run: the report and the phases that failed. */
export interface BenchRun {
  report: BenchReport;
  /** `"<phase>: <message>"` for each phase that failed; empty when all ran. */
  failures: string[];
}

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
  const phase = async (key: Phase, fn: () => Promise<void>) => {
    if (!selected.has(key)) return;
    const name = PHASE_NAMES[key];
    const specs = PHASE_ROWS.filter(([of]) => of === key);
    const ids = specs.map(([, id]) => id);
    log(`${name} (${ids.join(", ")}) at ${((performance.now() - started) / 1000).toFixed(1)} s`);
    try {
      await fn();
    } catch (error) {
      failures.push(`${name}: ${error instanceof Error ? error.message : error}`);
      const done = new Set(rows.map((row) => row.id));
      const missing = specs.filter(([, id]) => !done.has(id));
      rows.push(
        ...failedRows(missing.map(([, id, figure, unit]) => ({ id, figure, unit })), error),
      );
    }
  };

  try {
    const machine = await describeMachine();

    await phase("startup", async () => {
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

    await phase("admission", async () => {
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
    await phase("blocked", async () => {
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

    await phase("replay", async () => {
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

    await phase("page", async () => {
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

    await phase("cells", async () => {
      const python = (await resolvePython("python3")).executable;
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

    await phase("loop", async () => {
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
    });

    await phase("outline", async () => {
      rows.push(...await benchCodeOutline({ scratch: await dir("code"), count: counts.outlines }));
    });
    await phase("context", async () => {
      rows.push(
        ...await benchContext({
          root: await dir("context"),
          items: counts.contextItems,
          records: counts.contextRecords,
          runs: 50,
          settleMs: counts.settleMs,
        }),
      );
    });

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
