/**
 * Figures 1a, 1b, 2a, 2b against the durable peer server (`durable_server.ts`): the same
 * driver (`bench/lane_driver.ts`) admits the same inputs to klbr and to the peer, the two sides
 * interleaved and repeated, since the machine is noisy; each row gives the medians, their ratio
 * and the spread of the per-repeat ratios.
 *
 * @module
 */

import { join } from "node:path";
import { type BenchDaemon, startBenchDaemon } from "../daemon.ts";
import { startInstantModel } from "../instant_model.ts";
import { KlbrError } from "../../runtime/core/mod.ts";
import { type LaneDriver, openLane } from "../lane_driver.ts";
import { type BenchRow, type Goal, makeRow } from "../row.ts";
import { percentile, ratePerSecond } from "../stats.ts";
import { startPeer } from "./spawn.ts";

/** A goal on the ratio to the peer: at least `min` (throughput) or at most `max` (latency). */
export function ratioGoal(bound: { min?: number; max?: number }, text: string): Goal {
  return {
    text,
    test: (value, peer) => {
      if (peer === null || peer === 0) return null;
      const ratio = value / peer;
      return (bound.min === undefined || ratio >= bound.min) &&
        (bound.max === undefined || ratio <= bound.max);
    },
  };
}

/** The median of `values`. */
export function median(values: readonly number[]): number {
  return percentile(values, 50);
}

/** "ratios 0.61–0.93 over 3 repeats" from paired klbr and peer samples. */
export function spread(ours: readonly number[], theirs: readonly number[]): string {
  const ratios = ours.map((value, i) => value / theirs[i]).sort((a, b) => a - b);
  return `per-repeat ratios ${ratios[0].toFixed(2)}–${ratios.at(-1)!.toFixed(2)} over ` +
    `${ratios.length} interleaved repeats`;
}

/** Options for {@linkcode benchAdmissionPeer}. */
export interface AdmissionPeerOptions {
  root: string;
  inputs: number;
  window: number;
  repeats: number;
}

/**
 * Rows 1a and 1b: admission throughput of a daemon in use (checkout behaviour, a fake model
 * answering `wait()`) and of the peer server, all at once and with `window` in flight.
 *
 * @throws {KlbrError} `internal` when an input is not acknowledged exactly once.
 */
export async function benchAdmissionPeer(options: AdmissionPeerOptions): Promise<BenchRow[]> {
  const fake = startInstantModel(() => ({ code: "wait()" }));
  const peer = await startPeer("durable_server.ts", [join(options.root, "peer.sqlite")]);
  let daemon: BenchDaemon | undefined;
  try {
    const stateDir = join(options.root, "admission-state");
    const workspace = join(options.root, "admission-ws");
    daemon = await startBenchDaemon({ modelUrl: fake.url, stateDir, workspace });
    const ours = (await openLane({ port: daemon.port, token: daemon.token, client: "bench" })).lane;
    const theirs = (await openLane({ port: peer.port, token: "", client: "bench" })).lane;
    const windows = [Infinity, options.window];
    const rates = windows.map(() => ({ ours: [] as number[], theirs: [] as number[] }));
    for (let r = 0; r < options.repeats; r++) {
      for (const [w, window] of windows.entries()) {
        const prefix = `r${r}w${w}`;
        const sides = [
          async () => rates[w].ours.push(await admitRate(ours, options.inputs, window, prefix)),
          async () => rates[w].theirs.push(await admitRate(theirs, options.inputs, window, prefix)),
        ];
        // Alternate which side goes first; let klbr's turns consume its inputs before the peer runs.
        for (const side of r % 2 === 0 ? sides : sides.reverse()) {
          await side();
          await waitUntilDrained(daemon.url, 60_000);
        }
      }
    }
    await ours.close();
    await theirs.close();
    const n = options.inputs.toLocaleString("en-US");
    return rates.map((rate, w) =>
      makeRow({
        id: w === 0 ? "1a" : "1b",
        figure: w === 0
          ? `admission throughput, ${n} inputs sent at once`
          : `admission throughput, ${n} inputs, ${options.window} in flight`,
        unit: "inputs/s",
        value: median(rate.ours),
        peer: { label: "durable peer server", value: median(rate.theirs) },
        goal: ratioGoal({ min: 0.8 }, "≥ 0.8× peer"),
        note: `medians; ${spread(rate.ours, rate.theirs)}; through /v2 on a live daemon ` +
          `(checkout behaviour, fake model answering wait(), its turns drained between runs); ` +
          `peer: bench/peers/durable_server.ts, same driver, its own process (ack after the ` +
          `synchronous=FULL commit, dedupe by source key, log row + inbox row, fan-out, ` +
          `group commit when idle)`,
      })
    );
  } finally {
    await daemon?.stop();
    await peer.stop();
    await fake.close();
  }
}

/**
 * Rows 2a and 2b: send → ack, one input at a time, on figure 2's daemon (its `attention.plan`
 * blocked, so no turn runs: admission on an idle daemon) and on the peer, interleaved input by
 * input.
 *
 * @throws {KlbrError} `internal` when an input was a duplicate.
 */
export async function benchAckLatencyPeer(
  options: { daemon: BenchDaemon; root: string; count: number; settleMs: number },
): Promise<BenchRow[]> {
  const peer = await startPeer("durable_server.ts", [join(options.root, "peer-latency.sqlite")]);
  const { daemon } = options;
  const ours = (await openLane({ port: daemon.port, token: daemon.token, client: "lat" })).lane;
  const theirs = (await openLane({ port: peer.port, token: "", client: "lat" })).lane;
  try {
    // The first input wakes the loop: the hook worker starts and attention.plan blocks.
    await ours.admit("warm-0", "wake the planner");
    await new Promise((resolve) => setTimeout(resolve, options.settleMs));
    const samples = { ours: [] as number[], theirs: [] as number[] };
    for (let i = 0; i < options.count; i++) {
      const pair = i % 2 === 0 ? ["ours", "theirs"] as const : ["theirs", "ours"] as const;
      for (const side of pair) {
        const lane = side === "ours" ? ours : theirs;
        const t0 = performance.now();
        const ack = await lane.admit(`lat-${i}`, `latency input ${i}`);
        samples[side].push(performance.now() - t0);
        if (ack.duplicate) throw new KlbrError("internal", `cannot time ack: lat-${i} duplicate`);
      }
    }
    const note = `${options.count.toLocaleString("en-US")} inputs one at a time to each side, ` +
      `interleaved input by input, send to ack through the same driver; klbr: the figure 2 ` +
      `daemon (attention.plan blocked, no turn runs); peer: bench/peers/durable_server.ts`;
    return ([["2a", 50, 1.25], ["2b", 99, 2]] as const).map(([id, p, max]) =>
      makeRow({
        id,
        figure: `send → ack p${p}, idle daemon`,
        unit: "ms",
        value: percentile(samples.ours, p),
        peer: { label: `durable peer server p${p}`, value: percentile(samples.theirs, p) },
        goal: ratioGoal({ max }, `≤ ${max}× peer`),
        note: id === "2a" ? note : null,
      })
    );
  } finally {
    await ours.close();
    await theirs.close();
    await peer.stop();
  }
}

async function admitRate(lane: LaneDriver, inputs: number, window: number, prefix: string) {
  // A loaded machine (2 cores shared) can take minutes; the driver's default is 2.
  const result = await lane.admitMany(inputs, { window, prefix, timeoutMs: 600_000 });
  if (result.acks !== inputs || result.admitted !== inputs) {
    throw new KlbrError(
      "internal",
      `cannot count admission: expected ${inputs} new inputs acknowledged once (got ${result.acks} acks, ${result.admitted} new)`,
    );
  }
  return ratePerSecond(result.acks, result.elapsedMs);
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
