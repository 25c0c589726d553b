/**
 * Figures 8 and 9 — context management as history grows: building one request, its size and
 * one compaction step at 1k / 10k / 100k provider items (figure 8), and `serve`'s start-up
 * and idle size at 10k / 100k / 1M records (figure 9), each against its value at the smallest
 * size. The goal is growth under 2× from the smallest size to the largest.
 *
 * Histories are seeded in the daemon's shape (`seed_history.ts`); the store is compacted as
 * the daemon keeps it (a summary covering all but the newest items) before a request is built.
 *
 * @module
 */

import { join } from "node:path";
import {
  buildRequest,
  compactContext,
  type ContextBudget,
  rawLimits,
} from "../runtime/context/mod.ts";
import { SILENT_LOGGER } from "../runtime/core/mod.ts";
import { PYTHON_TOOL } from "../runtime/model/mod.ts";
import { contractMessage } from "../runtime/session/mod.ts";
import { estimateTokens } from "../store/tables/provider_items.ts";
import { ensureSession } from "../store/tables/sessions.ts";
import { openStore } from "../store/store.ts";
import { below, belowPeer, type BenchRow, makeRow, type Unit } from "./row.ts";
import { residentBytes, workingDenoPid } from "./rss.ts";
import { ITEMS_PER_TURN, RECORDS_PER_TURN, seedHistory } from "./seed_history.ts";
import { prepareServe, restartAfterCleanStop } from "./startup.ts";
import { summarize } from "./stats.ts";

/** Options for {@linkcode benchContext}. */
export interface ContextBenchOptions {
  /** A scratch directory the run may fill. */
  root: string;
  /** The largest history of figure 8, in provider items; the others are a tenth and a hundredth. */
  items: number;
  /** The largest history of figure 9, in records; the others are a tenth and a hundredth. */
  records: number;
  /** Timed builds per size (their p50 is reported). */
  runs: number;
  /** How long an idle daemon settles before its size is read, in ms. */
  settleMs: number;
}

/** The default route budget: what a daemon without `context_tokens` uses. */
const BUDGET: ContextBudget = { contextTokens: 32_768, compactAt: 0.75, summaryShare: 0.1 };

/** New turns one compaction step covers at the default budget (about its threshold). */
const STEP_TURNS = 80;

const sizes = (largest: number) => [largest / 100, largest / 10, largest].map(Math.round);

/** Rows of one series, each against the smallest size's value; the largest carries the goal. */
function series(
  spec: { id: number; letters: string; figure: string; unit: Unit; what: string; note: string },
  points: { size: number; value: number }[],
): BenchRow[] {
  const base = points[0];
  return points.map((point, i) =>
    makeRow({
      id: `${spec.id}${spec.letters[i]}`,
      figure: `${spec.figure} at ${point.size.toLocaleString("en-US")} ${spec.what}`,
      unit: spec.unit,
      value: point.value,
      peer: { label: `at ${base.size.toLocaleString("en-US")} ${spec.what}`, value: base.value },
      goal: i === points.length - 1 ? belowPeer("< 2× of the smallest", 2) : null,
      note: spec.note,
    })
  );
}

type Deps = Parameters<typeof compactContext>[0];

async function withStore<T>(dir: string, fn: (deps: Deps) => Promise<T>): Promise<T> {
  const store = openStore(dir);
  try {
    return await fn({ store, log: SILENT_LOGGER, contextBudget: () => BUDGET });
  } finally {
    store.close();
  }
}

const keepOf = (store: Deps["store"]) => ({
  tokens: rawLimits(store, "default", "main", BUDGET).keep,
});

/**
 * Compacts the store in `dir` as the daemon keeps it (a summary covers all but the newest
 * items), then builds one request untimed and `runs` timed; returns their p50 in ms and the
 * request's JSON size with the tool schema in KB.
 *
 * @example
 * ```ts
 * const { p50 } = await timeRequestBuilds(stateDir, 50);
 * ```
 */
export function timeRequestBuilds(dir: string, runs: number): Promise<{ p50: number; kb: number }> {
  return withStore(dir, async (deps) => {
    await compactContext(deps, "default", { keep: keepOf(deps.store), model: false });
    const parts = { route: "main", budget: BUDGET, system: contractMessage("/work"), opening: [] };
    const times: number[] = [];
    let built = buildRequest(deps.store, "default", parts);
    for (let i = 0; i < runs; i++) {
      const started = performance.now();
      built = buildRequest(deps.store, "default", parts);
      times.push(performance.now() - started);
    }
    const body = { messages: built.messages, tools: [PYTHON_TOOL] };
    return {
      p50: summarize(times).p50,
      kb: new TextEncoder().encode(JSON.stringify(body)).length / 1000,
    };
  });
}

/** Figure 8: request build time and size, and compaction time, by history length. */
async function requestFigures(options: ContextBenchOptions): Promise<BenchRow[]> {
  const dir = join(options.root, "context-items");
  await Deno.mkdir(dir, { recursive: true });
  const created = openStore(dir);
  ensureSession(created, "default");
  created.close();
  const build: { size: number; value: number }[] = [];
  const bytes: { size: number; value: number }[] = [];
  const compaction: { size: number; value: number }[] = [];
  for (const size of sizes(options.items)) {
    const turns = Math.ceil(size / ITEMS_PER_TURN);
    seedHistory(dir, turns);
    const request = await timeRequestBuilds(dir, options.runs);
    build.push({ size, value: request.p50 });
    bytes.push({ size, value: request.kb });
    // Compaction steps: the turns a threshold holds, then the step that covers them (p50 of 3).
    const steps: number[] = [];
    for (let step = 1; step <= 3; step++) {
      seedHistory(dir, turns + step * STEP_TURNS);
      await withStore(dir, async (deps) => {
        const started = performance.now();
        await compactContext(deps, "default", { keep: keepOf(deps.store), model: false });
        steps.push(performance.now() - started);
      });
    }
    compaction.push({ size, value: summarize(steps).p50 });
  }
  const note = "in-process against a seeded store (turns of input, frame, 3 items, cell, send) " +
    "with the default 32,768-token budget; the store compacted as the daemon keeps it";
  return [
    ...series({
      id: 8,
      letters: "abc",
      figure: "build one request",
      unit: "ms",
      what: "items",
      note: `${note}; p50 of ${options.runs}`,
    }, build),
    ...series({
      id: 8,
      letters: "def",
      figure: "request size",
      unit: "KB",
      what: "items",
      note: `${note}; the request's JSON with the tool schema`,
    }, bytes),
    ...series({
      id: 8,
      letters: "ghi",
      figure: "one compaction step (extractive)",
      unit: "ms",
      what: "items",
      note: `${note}; p50 of 3 steps, each covering the ${STEP_TURNS} turns after the last summary`,
    }, compaction),
    contractRow(),
  ];
}

/**
 * Row 8j: the contract message's size, as the first request of a session with the checkout's
 * skills sends it (the token estimate requests are sized with).
 */
function contractRow(): BenchRow {
  const skills = Object.fromEntries(
    [...Deno.readDirSync(join(import.meta.dirname!, "..", "skills"))]
      .filter((entry) => entry.isDirectory).map((entry) => [entry.name, ""]),
  );
  const text = contractMessage("/home/owner/project", {
    skills: { revision: "0".repeat(64), bodies: skills },
  });
  return makeRow({
    id: "8j",
    figure: "the contract message (message 0)",
    unit: "count",
    value: estimateTokens(text),
    // What it is measured against: the context budget every request must fit.
    peer: { label: "the default context budget", value: BUDGET.contextTokens },
    goal: below(1_000, "< 1,000 tokens"),
    note: `raw token estimate of ${text.length} characters, the checkout's skills listed; ` +
      "byte-stable across turns",
  });
}

/** Figure 9: serve's start-up and idle size, by records in the store. */
async function startupFigures(options: ContextBenchOptions): Promise<BenchRow[]> {
  const serve = await prepareServe(options.root, "context");
  const startup: { size: number; value: number }[] = [];
  const memory: { size: number; value: number }[] = [];
  const firstStarts: string[] = [];
  for (const records of sizes(options.records)) {
    seedHistory(serve.stateDir, Math.ceil(records / RECORDS_PER_TURN));
    // The row is the restart after the daemon's own clean stop; the first start after seeding
    // checks the whole file (the seeder wrote it last) and goes into the note.
    const { daemon, firstMs } = await restartAfterCleanStop(serve);
    firstStarts.push(`${(firstMs / 1000).toFixed(2)} s`);
    try {
      startup.push({ size: records, value: daemon.readyMs / 1000 });
      await new Promise((resolve) => setTimeout(resolve, options.settleMs));
      memory.push({
        size: records,
        value: (await residentBytes(await workingDenoPid(daemon.pid))) / 1e6,
      });
    } finally {
      await daemon.stop();
    }
  }
  const note = "serve restarted after its own clean stop on a seeded store (12 records a turn: " +
    "input, frame, 6 events, 3 provider items, cell), nothing pending; the first start after " +
    `seeding, which checks the whole file (PRAGMA quick_check), took ${firstStarts.join(", ")}`;
  return [
    ...series({
      id: 9,
      letters: "abc",
      figure: "serve answers /health",
      unit: "s",
      what: "records",
      note,
    }, startup),
    ...series({
      id: 9,
      letters: "def",
      figure: "daemon resident size, idle",
      unit: "MB",
      what: "records",
      note: `${note}; VmRSS after ${options.settleMs} ms`,
    }, memory),
  ];
}

/**
 * Measures figures 8 and 9.
 *
 * @throws {KlbrError} when a daemon does not start, or the store refuses.
 */
export async function benchContext(options: ContextBenchOptions): Promise<BenchRow[]> {
  return [...await requestFigures(options), ...await startupFigures(options)];
}
