/**
 * `deno task bench --scale` — figure 11, how klbr scales with its history: `serve`'s start-up,
 * its idle resident size, building one request, answering `/health` and replaying the log to a
 * `since=0` client, at 1k / 100k / 1M records, each as a ratio to its value at 1k. Not part of
 * the default run (the 1M store takes minutes to seed).
 *
 * One store grows from size to size: seeded turns in the daemon's shape (`seed_history.ts`,
 * direct batched inserts, 5,000 turns to a transaction), compacted in-process as the daemon
 * keeps it, then `serve` restarted on it with the serve task's permissions.
 *
 * @module
 */

import { readOperatorToken } from "../runtime/lanes/mod.ts";
import { openStore } from "../store/store.ts";
import { searchHistory } from "../store/tables/history_index.ts";
import { openLane } from "./lane_driver.ts";
import { type BenchRow, type Goal, makeRow, type Unit, withinPeer } from "./row.ts";
import { residentBytes, workingDenoPid } from "./rss.ts";
import { RECORDS_PER_TURN, seedHistory } from "./seed_history.ts";
import { timeRequestBuilds } from "./context.ts";
import { prepareServe, restartAfterCleanStop } from "./startup.ts";
import { ratePerSecond, summarize } from "./stats.ts";

/** Options for {@linkcode benchScale}. */
export interface ScaleOptions {
  /** A scratch directory the run may fill. */
  root: string;
  /** The history sizes, in records, smallest first. @default [1_000, 100_000, 1_000_000] */
  sizes?: number[];
  /** Timed request builds and `/health` calls per size. @default 50 */
  runs?: number;
  /** How long the idle daemon settles before its size is read, in ms. @default 1_000 */
  settleMs?: number;
  /** Receives progress lines. */
  log?: (line: string) => void;
}

/** One measured point of every series. */
export interface ScalePoint {
  records: number;
  startupS: number;
  rssMb: number;
  requestMs: number;
  healthMs: number;
  replayPerSecond: number;
  /** `history.search` for a word of every turn, p99 after a first (untimed) search. */
  searchMs: number;
  /** How long seeding up to this size took, in s. */
  seedS: number;
}

/** What {@linkcode benchScale} measured: the rows and the points they came from. */
export interface ScaleResult {
  rows: BenchRow[];
  points: ScalePoint[];
}

/** Flat from the smallest size to the largest: at most twice the smallest's value. */
const FLAT = withinPeer(2, "≤ 2× the smallest");

/** The series of figure 11, in row order, each with its goal at the largest size. */
export const SCALE_SERIES: {
  key: keyof Omit<ScalePoint, "records" | "seedS">;
  figure: string;
  unit: Unit;
  goal?: Goal;
}[] = [
  {
    key: "startupS",
    figure: "serve answers /health",
    unit: "s",
    goal: FLAT,
  },
  {
    key: "rssMb",
    figure: "daemon resident size, idle",
    unit: "MB",
    goal: FLAT,
  },
  { key: "requestMs", figure: "build one request", unit: "ms", goal: FLAT },
  { key: "healthMs", figure: "GET /health p50", unit: "ms", goal: FLAT },
  { key: "replayPerSecond", figure: "replay to a since=0 client", unit: "records/s" },
  {
    key: "searchMs",
    figure: "history.search p99, a word of every turn",
    unit: "ms",
    goal: { text: "≤ 20 ms", test: (value) => value <= 20 },
  },
];

/** Builds figure 11's rows: each point against the smallest size's. */
export function scaleRows(points: ScalePoint[]): BenchRow[] {
  const letters = "abcdefghijklmnopqrstuvwxyz";
  const base = points[0];
  const rows: BenchRow[] = [];
  SCALE_SERIES.forEach((series, s) => {
    points.forEach((point, i) => {
      const last = i === points.length - 1;
      rows.push(makeRow({
        id: `11${letters[s * points.length + i]}`,
        figure: `${series.figure} at ${point.records.toLocaleString("en-US")} records`,
        unit: series.unit,
        value: point[series.key],
        peer: {
          label: `at ${base.records.toLocaleString("en-US")} records`,
          value: base[series.key],
        },
        goal: last ? series.goal ?? null : null,
        note: i === 0 ? NOTES[series.key] : null,
      }));
    });
  });
  return rows;
}

const NOTES: Record<(typeof SCALE_SERIES)[number]["key"], string> = {
  startupS: "`deno run <serve task flags> main.ts serve` restarted on the seeded store, after " +
    "its own clean stop (the first start after seeding checks the whole file; the log gives its " +
    "time), until /health answers 200, polled every 5 ms (two Deno processes: launcher and daemon)",
  rssMb: "VmRSS of the daemon process after it settled, no client, no Python process",
  requestMs: "buildRequest in-process on the same store (daemon stopped), compacted as the " +
    "daemon keeps it, default 32,768-token budget, p50",
  healthMs: "GET /health on the running daemon, one at a time, p50; the seeded history has " +
    "nothing pending (the backlog counters are figure 2's and the health counters' tests)",
  replayPerSecond: "hello since=0 with batch: true until replayed, every record parsed by the " +
    "client and checked 1…head in order",
  searchMs: "searchHistory in-process on the same store after the daemon stopped, the word " +
    "'answer' (in every turn), limit 10, p99 of the runs after one untimed search (which " +
    "indexes what the daemon's start left behind; its time is in the log)",
};

function timeSearch(stateDir: string, runs: number, log: (line: string) => void): number {
  const store = openStore(stateDir);
  try {
    const first = performance.now();
    searchHistory(store, "default", { text: "answer" });
    log(`scale: first search ${(performance.now() - first).toFixed(1)} ms`);
    const times: number[] = [];
    for (let i = 0; i < runs; i++) {
      const started = performance.now();
      searchHistory(store, "default", { text: "answer" });
      times.push(performance.now() - started);
    }
    return summarize(times).p99;
  } finally {
    store.close();
  }
}

async function timeHealth(url: string, runs: number): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < runs + 5; i++) {
    const started = performance.now();
    await (await fetch(`${url}/health`)).arrayBuffer();
    if (i >= 5) times.push(performance.now() - started);
  }
  return summarize(times).p50;
}

/**
 * Measures figure 11.
 *
 * @throws {KlbrError} when a daemon does not start, the store refuses, or a replay is not
 *   1…head in order.
 */
export async function benchScale(options: ScaleOptions): Promise<ScaleResult> {
  const sizes = options.sizes ?? [1_000, 100_000, 1_000_000];
  const runs = options.runs ?? 50;
  const settleMs = options.settleMs ?? 1_000;
  const log = options.log ?? (() => {});
  const serve = await prepareServe(options.root, "scale");
  const points: ScalePoint[] = [];
  for (const records of sizes) {
    const seedStarted = performance.now();
    seedHistory(serve.stateDir, Math.ceil(records / RECORDS_PER_TURN));
    const seedS = (performance.now() - seedStarted) / 1000;
    log(`scale: ${records.toLocaleString("en-US")} records seeded in ${seedS.toFixed(1)} s`);
    const requestMs = (await timeRequestBuilds(serve.stateDir, runs)).p50;
    // The figure is the restart after the daemon's own clean stop, as an owner's restart is.
    const { daemon, firstMs } = await restartAfterCleanStop(serve);
    log(`scale: first start after seeding ${(firstMs / 1000).toFixed(2)} s`);
    const startupS = daemon.readyMs / 1000;
    let rssMb = 0;
    let healthMs = 0;
    let replayPerSecond = 0;
    try {
      await new Promise((resolve) => setTimeout(resolve, settleMs));
      rssMb = (await residentBytes(await workingDenoPid(daemon.pid))) / 1e6;
      healthMs = await timeHealth(daemon.url, runs);
      const { lane, replay } = await openLane({
        port: daemon.port,
        token: await readOperatorToken(serve.stateDir),
        client: "scale",
        since: 0,
        batch: true,
        timeoutMs: 600_000,
      });
      await lane.close();
      if (!replay.contiguous) {
        throw new Error(`the replay at ${records} records was not 1…head in order`);
      }
      replayPerSecond = ratePerSecond(replay.records, replay.elapsedMs);
    } finally {
      await daemon.stop();
    }
    const searchMs = timeSearch(serve.stateDir, runs, log);
    points.push({
      records,
      startupS,
      rssMb,
      requestMs,
      healthMs,
      replayPerSecond,
      searchMs,
      seedS,
    });
    log(`scale: ${JSON.stringify(points.at(-1))}`);
  }
  return { rows: scaleRows(points), points };
}
