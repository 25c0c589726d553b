/**
 * Figure 1 — admission throughput: local inputs through the daemon's WebSocket, each counted
 * when its acknowledgement (sent only after its commit) arrives, against the raw
 * `node:sqlite` batched insert+commit rate at the same durability setting and at the batch
 * size admission achieved (its inputs per commit, read from `op.status` before and after).
 *
 * 1a/1b (against the durable peer server) are in `peers/admission_rows.ts`. Here: 1c runs on
 * figure 2's daemon, whose `attention.plan` blocks, so no turn competes; 1d calls
 * `admitInputs` in-process, 64 to a transaction, without a daemon. Together they show where the
 * gap to the ceiling goes: the store's transaction or the socket path.
 *
 * @module
 */

import type { BenchDaemon } from "./daemon.ts";
import { KlbrError } from "../runtime/core/mod.ts";
import { localDedupeKey } from "../store/tables/dedupe_keys.ts";
import { type AdmitInput, admitInputs } from "../store/tables/inputs.ts";
import { ensureSession } from "../store/tables/sessions.ts";
import { openStore } from "../store/store.ts";
import { type AdmitManyResult, type LaneDriver, openLane } from "./lane_driver.ts";
import { measureRawAdmission } from "./raw_admission.ts";
import { measureRawBatches, type RawBatchResult } from "./raw_commit.ts";
import { atLeastOfPeer, type BenchRow, makeRow } from "./row.ts";
import { ratePerSecond } from "./stats.ts";

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
