/**
 * Figure 2 — admission latency while `attention.plan` is blocked: one input at a time, from
 * sending it to its acknowledgement, against the raw commit latency measured in the same run.
 *
 * @module
 */

import type { BenchDaemon } from "./daemon.ts";
import { KlbrError } from "../runtime/core/mod.ts";
import { openLane } from "./lane_driver.ts";
import type { RawCommitResult } from "./raw_commit.ts";
import { type BenchRow, makeRow } from "./row.ts";
import { summarize } from "./stats.ts";

/** Options for {@linkcode benchAdmissionLatency}. */
export interface AdmissionLatencyOptions {
  /** A daemon whose active release blocks `attention.plan` (see `blocked_release.ts`). */
  daemon: BenchDaemon;
  /** Inputs to time, one at a time. */
  count: number;
  /** How long after the first input the hook is given to start and block, in ms. */
  settleMs: number;
  /** The raw ceiling measured in the same run. */
  ceiling: RawCommitResult;
  /** Give up after this long. @default 120_000 */
  timeoutMs?: number;
}

/**
 * Measures figure 2 and checks the block held: every input is still pending afterwards.
 *
 * @throws {KlbrError} `internal` when an input was consumed (the hook did not block) or
 *   acknowledged as a duplicate; `worker_timeout` after `timeoutMs`.
 */
export async function benchAdmissionLatency(options: AdmissionLatencyOptions): Promise<BenchRow[]> {
  const { daemon, count, ceiling } = options;
  const timeoutMs = options.timeoutMs ?? 120_000;
  const { lane } = await openLane({ port: daemon.port, token: daemon.token, client: "latency" });
  let timer: ReturnType<typeof setTimeout> | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(
          new KlbrError(
            "worker_timeout",
            `cannot time admission: not done within ${timeoutMs} ms (got ${lane.records} records)`,
          ),
        ),
      timeoutMs,
    );
  });
  try {
    // The first input wakes the loop: the hook worker starts and attention.plan blocks.
    await Promise.race([lane.admit("warm-0", "wake the planner"), expired]);
    await Promise.race([new Promise((r) => setTimeout(r, options.settleMs)), expired]);
    const samples: number[] = [];
    for (let i = 0; i < count; i++) {
      const t0 = performance.now();
      const ack = await Promise.race([lane.admit(`lat-${i}`, `latency input ${i}`), expired]);
      samples.push(performance.now() - t0);
      if (ack.duplicate) {
        throw new KlbrError("internal", `cannot time admission: lat-${i} was a duplicate`);
      }
    }
    const health = await (await fetch(`${daemon.url}/health`)).json() as {
      pending_inputs: number;
    };
    if (health.pending_inputs !== count + 1) {
      throw new KlbrError(
        "internal",
        `cannot time admission while blocked: expected ${
          count + 1
        } pending inputs (got ${health.pending_inputs})`,
      );
    }
    const summary = summarize(samples);
    const note = `${count.toLocaleString("en-US")} inputs one at a time through /v2, send to ` +
      `ack, while the active release's attention.plan sleeps (nothing consumed: ` +
      `${health.pending_inputs} pending after); peer: raw insert+commit latency`;
    return [
      makeRow({
        id: "2a",
        figure: "admission latency p50, attention.plan blocked",
        unit: "ms",
        value: summary.p50,
        peer: { label: "raw commit p50", value: ceiling.latency.p50 },
        note,
      }),
      makeRow({
        id: "2b",
        figure: "admission latency p99, attention.plan blocked",
        unit: "ms",
        value: summary.p99,
        peer: { label: "raw commit p99", value: ceiling.latency.p99 },
      }),
    ];
  } finally {
    clearTimeout(timer);
    await lane.close();
  }
}
