/**
 * Figure 1 — admission throughput: local inputs through the daemon's WebSocket, each counted
 * when its acknowledgement (sent only after its commit) arrives, against the raw
 * `node:sqlite` batched insert+commit rate at the same durability setting and at the batch
 * size admission achieved (its inputs per commit, read from `op.status` before and after).
 *
 * 1a/1b run the daemon as in use: the checkout's behaviour and a fake model over real HTTP
 * that answers every turn with a `wait()` cell, so turns consume the inputs while they arrive.
 * 1c runs on figure 2's daemon, whose `attention.plan` blocks, so no turn competes; 1d calls
 * `admitInputs` in-process, 64 to a transaction, without a daemon. 1e–1h are the raw ceilings
 * themselves at 1, 8, 64 and 512 rows per commit. Together they show where the gap to the
 * ceiling goes: the store's transaction, the socket path, or the turns.
 *
 * @module
 */

import { join } from "node:path";
import { type BenchDaemon, startBenchDaemon } from "./daemon.ts";
import { startInstantModel } from "./instant_model.ts";
import { KlbrError } from "../runtime/core/mod.ts";
import { localDedupeKey } from "../store/dedupe_keys.ts";
import { type AdmitInput, admitInputs } from "../store/inputs.ts";
import { ensureSession } from "../store/sessions.ts";
import { openStore } from "../store/store.ts";
import { type AdmitManyResult, type LaneDriver, openLane } from "./lane_driver.ts";
import { measureRawAdmission } from "./raw_admission.ts";
import { measureRawBatches, type RawBatchResult } from "./raw_commit.ts";
import { atLeastOfPeer, type BenchRow, makeRow } from "./row.ts";
import { ratePerSecond } from "./stats.ts";

/** Options for {@linkcode benchAdmission}. */
export interface AdmissionOptions {
  /** A scratch directory the run may fill. */
  root: string;
  /** Inputs per run. */
  inputs: number;
  /** The in-flight bound of the windowed run. */
  window: number;
}

const GOAL = atLeastOfPeer(0.8, "≥ 0.8× raw batched");

/** Admission's commits and inputs so far, from `op.status`. */
async function admissionStats(lane: LaneDriver): Promise<{ commits: number; inputs: number }> {
  const status = await lane.operate({ kind: "op.status" });
  return status.admission as { commits: number; inputs: number };
}

/** Inputs per commit between two `admissionStats`, at least 1. */
function perCommit(
  before: { commits: number; inputs: number },
  after: { commits: number; inputs: number },
): number {
  const commits = after.commits - before.commits;
  return commits > 0 ? Math.max(1, (after.inputs - before.inputs) / commits) : 1;
}

/** The raw batched ceiling at `batch` (rounded) rows per commit, `rows` rows in all. */
function ceilingAt(dir: string, batch: number, rows: number): RawBatchResult {
  return measureRawBatches({ dir, batch: Math.max(1, Math.round(batch)), rows });
}

function ceilingPeer(ceiling: RawBatchResult) {
  return { label: `raw batched insert+commit, ${ceiling.batch}/commit`, value: ceiling.perSecond };
}

const CEILING_NOTE = "ceiling: raw node:sqlite BEGIN IMMEDIATE, that many INSERTs of rows " +
  "shaped like inputs (its columns, checks, unique key and indexes; no history index, no " +
  "event row), COMMIT, in WAL at synchronous=FULL on the same filesystem, measured right " +
  "after the run at the batch size the run achieved";

/**
 * Measures figure 1: one run with every input sent at once, one with a bounded window.
 *
 * @throws {KlbrError} `internal` when an input is not acknowledged exactly once;
 *   `worker_timeout` when the daemon does not acknowledge in time.
 */
export async function benchAdmission(options: AdmissionOptions): Promise<BenchRow[]> {
  const fake = startInstantModel(() => ({ code: "wait()" }));
  let daemon: BenchDaemon | undefined;
  try {
    const stateDir = join(options.root, "admission-state");
    const workspace = join(options.root, "admission-ws");
    await Deno.mkdir(workspace, { recursive: true });
    await Deno.mkdir(stateDir, { recursive: true });
    daemon = await startBenchDaemon({ modelUrl: fake.url, stateDir, workspace });
    const { lane } = await openLane({ port: daemon.port, token: daemon.token, client: "bench" });
    const runs: { rate: number; drained: boolean; batch: number; ceiling: RawBatchResult }[] = [];
    for (const [window, prefix] of [[Infinity, "all"], [options.window, "win"]] as const) {
      const before = await admissionStats(lane);
      const result = checked(
        await lane.admitMany(options.inputs, { window, prefix }),
        options.inputs,
      );
      const batch = perCommit(before, await admissionStats(lane));
      const drained = await waitUntilDrained(daemon.url, 60_000);
      const ceiling = ceilingAt(options.root, batch, options.inputs);
      runs.push({ rate: ratePerSecond(result.acks, result.elapsedMs), drained, batch, ceiling });
    }
    await lane.close();
    const n = options.inputs.toLocaleString("en-US");
    const how = `through /v2 on a live daemon (checkout behaviour, fake model answering wait())`;
    const ceiling = CEILING_NOTE;
    const undrained = (drained: boolean) =>
      drained ? "" : "; the turns had not consumed every input 60 s later";
    return [
      makeRow({
        id: "1a",
        figure: `admission throughput, ${n} inputs sent at once`,
        unit: "inputs/s",
        value: runs[0].rate,
        peer: ceilingPeer(runs[0].ceiling),
        goal: GOAL,
        note: `${how}; counted at each ack; ${runs[0].batch.toFixed(1)} inputs per commit ` +
          `achieved (group commit across connections), each ack after its commit; ${ceiling}` +
          undrained(runs[0].drained),
      }),
      makeRow({
        id: "1b",
        figure: `admission throughput, ${n} inputs, ${options.window} in flight`,
        unit: "inputs/s",
        value: runs[1].rate,
        peer: ceilingPeer(runs[1].ceiling),
        goal: GOAL,
        note: `the same daemon after the first run's inputs were consumed; ` +
          `${runs[1].batch.toFixed(1)} inputs per commit achieved` + undrained(runs[1].drained),
      }),
    ];
  } finally {
    await daemon?.stop();
    await fake.close();
  }
}

/**
 * Measures figure 1c on a daemon whose `attention.plan` is blocked (no turn competes with
 * admission): every input sent at once.
 *
 * @throws {KlbrError} `internal` when an input is not acknowledged exactly once.
 */
export async function benchBlockedAdmission(
  options: { daemon: BenchDaemon; inputs: number; dir: string },
): Promise<BenchRow> {
  const { daemon, inputs } = options;
  const { lane } = await openLane({ port: daemon.port, token: daemon.token, client: "blocked" });
  try {
    const before = await admissionStats(lane);
    const result = checked(await lane.admitMany(inputs, { window: Infinity, prefix: "b" }), inputs);
    const batch = perCommit(before, await admissionStats(lane));
    const ceiling = ceilingAt(options.dir, batch, inputs);
    return makeRow({
      id: "1c",
      figure: `admission throughput, ${inputs.toLocaleString("en-US")} inputs sent at once, ` +
        `attention.plan blocked`,
      unit: "inputs/s",
      value: ratePerSecond(result.acks, result.elapsedMs),
      peer: ceilingPeer(ceiling),
      goal: GOAL,
      note: "the figure 2 daemon: no turn runs, so only admission and the record fan-out to " +
        `the sending client use the daemon; ${batch.toFixed(1)} inputs per commit achieved; ` +
        CEILING_NOTE,
    });
  } finally {
    await lane.close();
  }
}

/**
 * Measures figure 1d: `admitInputs` called in-process on a fresh store, 64 inputs to a call,
 * no socket — the store's share of the gap between the daemon and the raw ceiling.
 *
 * @throws {KlbrError} what `openStore` and `admitInputs` throw.
 */
export function benchStoreAdmission(options: { dir: string; inputs: number }): BenchRow[] {
  const batch = 64;
  const store = openStore(options.dir);
  try {
    ensureSession(store, "default");
    const started = performance.now();
    for (let i = 0; i < options.inputs; i += batch) {
      const inputs: AdmitInput[] = [];
      for (let j = i; j < Math.min(i + batch, options.inputs); j++) {
        inputs.push({
          session: "default",
          sourceKind: "local",
          dedupeKey: localDedupeKey("bench", `s-${j}`),
          conversationId: "local:default",
          author: "owner",
          body: `bench input ${j}`,
        });
      }
      admitInputs(store, inputs);
    }
    const value = ratePerSecond(options.inputs, performance.now() - started);
    const ceiling = ceilingAt(options.dir, batch, options.inputs);
    const sameSql = measureRawAdmission({ dir: options.dir, batch, rows: options.inputs });
    const sameSqlPeer = {
      label: `raw admission SQL, ${batch}/commit`,
      value: sameSql.perSecond,
    };
    return [
      makeRow({
        id: "1d",
        figure: `admitInputs in-process, ${options.inputs.toLocaleString("en-US")} inputs, ` +
          `${batch} per commit`,
        unit: "inputs/s",
        value,
        peer: ceilingPeer(ceiling),
        goal: GOAL,
        note:
          "the store's admission transaction alone (dedupe lookups, one seq bump, event, input row, " +
          `work counters; the history index is written later, off the ack path), ${batch} to a commit at synchronous=FULL, no daemon ` +
          `and no socket; ${CEILING_NOTE}`,
      }),
      makeRow({
        id: "1i",
        figure: `raw admission SQL, ${batch} per commit`,
        unit: "inputs/s",
        value: sameSql.perSecond,
        peer: ceilingPeer(ceiling),
        note: "what the schema alone costs: the statements admitInputs runs for each input " +
          "(dedupe lookups, one seq bump a batch, input.admitted event row, input row with the real schema, " +
          "indexes and foreign keys; the inputs' history index is no longer in that " +
          "transaction) through raw node:sqlite on a migrated store, no klbr code; against " +
          "1d's ceiling",
      }),
      makeRow({
        id: "1j",
        figure: `admitInputs in-process against its own SQL, ${batch} per commit`,
        unit: "inputs/s",
        value,
        peer: sameSqlPeer,
        note: "1d against 1i: what klbr's store layer (checks, ids, record validation, " +
          "statement cache, error classification) costs on top of the SQL it runs",
      }),
    ];
  } finally {
    store.close();
  }
}

function checked(result: AdmitManyResult, inputs: number): AdmitManyResult {
  if (result.acks !== inputs || result.admitted !== inputs) {
    throw new KlbrError(
      "internal",
      `cannot count admission: expected ${inputs} new inputs acknowledged once (got ${result.acks} acks, ${result.admitted} new)`,
    );
  }
  return result;
}

/** Polls `/health` until no input is pending; `false` when `timeoutMs` passed first. */
async function waitUntilDrained(url: string, timeoutMs: number): Promise<boolean> {
  const started = performance.now();
  while (performance.now() - started < timeoutMs) {
    const response = await fetch(`${url}/health`, { signal: AbortSignal.timeout(5_000) });
    const health = await response.json() as { pending_inputs?: number };
    if (health.pending_inputs === 0) return true;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return false;
}

/** The batch sizes of rows 1e–1h. */
export const RAW_BATCHES = [1, 8, 64, 512] as const;

/**
 * Measures rows 1e–1h: the raw batched insert+commit ceiling itself at 1, 8, 64 and 512 rows
 * per commit, `rows` rows each, each beside the one-row-per-commit rate.
 *
 * @throws {KlbrError} what {@linkcode measureRawBatches} throws.
 */
export function benchRawBatches(options: { dir: string; rows: number }): BenchRow[] {
  const results = RAW_BATCHES.map((batch) =>
    measureRawBatches({ dir: options.dir, batch, rows: Math.max(batch, options.rows) })
  );
  const single = { label: "raw, 1 row per commit", value: results[0].perSecond };
  return results.map((result, i) =>
    makeRow({
      id: `1${"efgh"[i]}`,
      figure: `raw batched insert+commit, ${result.batch} per commit`,
      unit: "rows/s",
      value: result.perSecond,
      peer: single,
      note: `${result.rows.toLocaleString("en-US")} rows in ${result.commits} commits; ` +
        "BEGIN IMMEDIATE, INSERTs of rows shaped like inputs, COMMIT, WAL, synchronous=FULL, " +
        "a fresh file on the scratch filesystem",
    })
  );
}
