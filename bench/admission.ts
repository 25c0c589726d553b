/**
 * Figure 1 — admission throughput: local inputs through the daemon's WebSocket, each counted
 * when its acknowledgement (sent only after its commit) arrives, against the raw
 * `node:sqlite` insert+commit rate at the same durability setting.
 *
 * 1a/1b run the daemon as in use: the checkout's behaviour and a fake model over real HTTP
 * that answers every turn with a `wait()` cell, so turns consume the inputs while they arrive.
 * 1c runs on figure 2's daemon, whose `attention.plan` blocks, so no turn competes; 1d calls
 * `admitInput` in-process without a daemon. Together they show where the gap to the ceiling
 * goes: the store's transaction, the socket path, or the turns.
 *
 * @module
 */

import { join } from "node:path";
import { startFakeOpenAI } from "../tests/fakes/openai_server.ts";
import { startTestDaemon, type TestDaemon } from "../tests/_helpers/daemon.ts";
import { KlbrError } from "../runtime/core/mod.ts";
import { localDedupeKey } from "../store/dedupe_keys.ts";
import { admitInput } from "../store/inputs.ts";
import { ensureSession } from "../store/sessions.ts";
import { openStore } from "../store/store.ts";
import { type AdmitManyResult, openLane } from "./lane_driver.ts";
import type { RawCommitResult } from "./raw_commit.ts";
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
  /** The raw ceiling measured in the same run. */
  ceiling: RawCommitResult;
}

const GOAL = atLeastOfPeer(0.5, "within 2x of ceiling");

/**
 * Measures figure 1: one run with every input sent at once, one with a bounded window.
 *
 * @throws {KlbrError} `internal` when an input is not acknowledged exactly once;
 *   `worker_timeout` when the daemon does not acknowledge in time.
 */
export async function benchAdmission(options: AdmissionOptions): Promise<BenchRow[]> {
  const fake = startFakeOpenAI({ fallback: () => ({ toolCall: { code: "wait()" } }) });
  let daemon: TestDaemon | undefined;
  try {
    const stateDir = join(options.root, "admission-state");
    const workspace = join(options.root, "admission-ws");
    await Deno.mkdir(workspace, { recursive: true });
    await Deno.mkdir(stateDir, { recursive: true });
    daemon = await startTestDaemon({ modelUrl: fake.url, stateDir, workspace });
    const { lane } = await openLane({ port: daemon.port, token: daemon.token, client: "bench" });
    const runs: { window: number; prefix: string; rate: number; drained: boolean }[] = [];
    for (const [window, prefix] of [[Infinity, "all"], [options.window, "win"]] as const) {
      const result = checked(
        await lane.admitMany(options.inputs, { window, prefix }),
        options.inputs,
      );
      const drained = await waitUntilDrained(daemon.url, 60_000);
      runs.push({ window, prefix, rate: ratePerSecond(result.acks, result.elapsedMs), drained });
    }
    await lane.close();
    const peer = { label: "raw insert+commit", value: options.ceiling.perSecond };
    const n = options.inputs.toLocaleString("en-US");
    const how = `through /v2 on a live daemon (checkout behaviour, fake model answering wait())`;
    const ceiling = `ceiling: ${options.ceiling.count} single-row BEGIN IMMEDIATE/INSERT/COMMIT ` +
      `in WAL, synchronous=FULL, same filesystem`;
    const undrained = (drained: boolean) =>
      drained ? "" : "; the turns had not consumed every input 60 s later";
    return [
      makeRow({
        id: "1a",
        figure: `admission throughput, ${n} inputs sent at once`,
        unit: "inputs/s",
        value: runs[0].rate,
        peer,
        goal: GOAL,
        note:
          `${how}; counted at each ack; inputs that arrive together share one commit (group commit), each ack after its commit; ${ceiling}` +
          undrained(runs[0].drained),
      }),
      makeRow({
        id: "1b",
        figure: `admission throughput, ${n} inputs, ${options.window} in flight`,
        unit: "inputs/s",
        value: runs[1].rate,
        peer,
        goal: GOAL,
        note: `the same daemon after the first run's inputs were consumed` +
          undrained(runs[1].drained),
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
  options: { daemon: TestDaemon; inputs: number; ceiling: RawCommitResult },
): Promise<BenchRow> {
  const { daemon, inputs, ceiling } = options;
  const { lane } = await openLane({ port: daemon.port, token: daemon.token, client: "blocked" });
  try {
    const result = checked(await lane.admitMany(inputs, { window: Infinity, prefix: "b" }), inputs);
    return makeRow({
      id: "1c",
      figure: `admission throughput, ${inputs.toLocaleString("en-US")} inputs sent at once, ` +
        `attention.plan blocked`,
      unit: "inputs/s",
      value: ratePerSecond(result.acks, result.elapsedMs),
      peer: { label: "raw insert+commit", value: ceiling.perSecond },
      goal: GOAL,
      note: "the figure 2 daemon: no turn runs, so only admission and the record fan-out to " +
        "the sending client use the daemon; ceiling measured again just before",
    });
  } finally {
    await lane.close();
  }
}

/**
 * Measures figure 1d: `admitInput` called in-process on a fresh store, one transaction each,
 * no socket — the store's share of the gap between the daemon and the raw ceiling.
 *
 * @throws {KlbrError} what `openStore` and `admitInput` throw.
 */
export function benchStoreAdmission(
  options: { dir: string; inputs: number; ceiling: RawCommitResult },
): BenchRow {
  const store = openStore(options.dir);
  try {
    ensureSession(store, "default");
    const started = performance.now();
    for (let i = 0; i < options.inputs; i++) {
      admitInput(store, {
        session: "default",
        sourceKind: "local",
        dedupeKey: localDedupeKey("bench", `s-${i}`),
        conversationId: "local:default",
        author: "owner",
        body: `bench input ${i}`,
      });
    }
    return makeRow({
      id: "1d",
      figure: `admitInput in-process, ${options.inputs.toLocaleString("en-US")} inputs`,
      unit: "inputs/s",
      value: ratePerSecond(options.inputs, performance.now() - started),
      peer: { label: "raw insert+commit", value: options.ceiling.perSecond },
      goal: GOAL,
      note: "the store's admission transaction alone (dedupe lookup, seq, event, input row), " +
        "each committed at synchronous=FULL, no daemon and no socket",
    });
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
