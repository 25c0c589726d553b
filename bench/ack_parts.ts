/**
 * The raw parts of an acknowledgement (figures 2e–2g): an input's own commit through the store,
 * and a loopback WebSocket round trip to a bare echo server, so figure 2's send → ack latency
 * can be set beside what it cannot go below.
 *
 * @module
 */

import { KlbrError } from "../runtime/core/mod.ts";
import { admitInput } from "../store/tables/inputs.ts";
import { ensureSession } from "../store/tables/sessions.ts";
import { openStore } from "../store/store.ts";
import { startFloorServer } from "./ready_process.ts";
import type { RawCommitResult } from "./raw_commit.ts";
import { type BenchRow, makeRow } from "./row.ts";
import { summarize } from "./stats.ts";

/** What a lane client sends for one input, so the echo carries a message of the same size. */
const INPUT_MESSAGE = JSON.stringify({
  kind: "input",
  request: "b1234",
  client_msg_id: "lat-1234",
  text: "latency input 1234",
});

/**
 * `admitInput` alone, each input its own `BEGIN IMMEDIATE … COMMIT`, `count` times on a fresh
 * store in `dir`; per-call latency in ms.
 *
 * @throws {KlbrError} what `openStore` and `admitInput` throw.
 */
export function measureInputCommits(dir: string, count: number): number[] {
  const store = openStore(dir);
  try {
    ensureSession(store, "default");
    const samples: number[] = [];
    for (let i = 0; i < count; i++) {
      const started = performance.now();
      admitInput(store, {
        session: "default",
        sourceKind: "local",
        dedupeKey: `local:bench:one-${i}`,
        conversationId: "local:default",
        author: "owner",
        body: `latency input ${i}`,
      });
      samples.push(performance.now() - started);
    }
    return samples;
  } finally {
    store.close();
  }
}

/**
 * Round trips of an input-sized message through a WebSocket to `bench/floor_server.ts`'s
 * `/echo`, in another Deno process on loopback, one at a time; latency in ms.
 *
 * @throws {KlbrError} `worker_failed` or `worker_timeout` when the echo server does not start.
 */
export async function measureSocketEchoes(count: number): Promise<number[]> {
  const { server, port } = await startFloorServer();
  try {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/echo`);
    await new Promise((resolve, reject) => {
      ws.onopen = resolve;
      ws.onerror = () => reject(new KlbrError("worker_failed", "cannot open the echo socket"));
    });
    try {
      const samples: number[] = [];
      for (let i = 0; i < count; i++) {
        const started = performance.now();
        const echoed = new Promise((resolve) => (ws.onmessage = resolve));
        ws.send(INPUT_MESSAGE);
        await echoed;
        samples.push(performance.now() - started);
      }
      return samples;
    } finally {
      const closed = new Promise((resolve) => (ws.onclose = resolve));
      ws.close();
      await closed;
    }
  } finally {
    await server.stop();
  }
}

/**
 * Measures rows 2e–2g: an input's own commit, the socket round trip, and figure 2a against
 * their sum.
 *
 * @throws {KlbrError} what {@linkcode measureInputCommits} and
 *   {@linkcode measureSocketEchoes} throw.
 */
export async function benchAckParts(
  options: { dir: string; count: number; ceiling: RawCommitResult; ackP50: number | null },
): Promise<BenchRow[]> {
  const commit = summarize(measureInputCommits(options.dir, options.count)).p50;
  const echo = summarize(await measureSocketEchoes(options.count)).p50;
  const raw = { label: "raw commit p50", value: options.ceiling.latency.p50 };
  return [
    makeRow({
      id: "2e",
      figure: "one input's own commit in-process (admitInput), p50",
      unit: "ms",
      value: commit,
      peer: raw,
      note: `${options.count.toLocaleString("en-US")} admitInput calls, each its own ` +
        "transaction at synchronous=FULL (dedupe lookup, seq, event row, input row and its " +
        "indexes; the history-index row is written later, off the ack path), no daemon, no socket",
    }),
    makeRow({
      id: "2f",
      figure: "loopback WebSocket round trip to a bare echo, p50",
      unit: "ms",
      value: echo,
      peer: raw,
      note: `${options.count.toLocaleString("en-US")} round trips of an input-sized message ` +
        "to bench/floor_server.ts /echo (another Deno process), one at a time",
    }),
    makeRow({
      id: "2g",
      figure: "admission latency p50 (2a) against its raw parts",
      unit: "ms",
      value: options.ackP50,
      peer: { label: "2e + 2f", value: commit + echo },
      note: "what the daemon adds to an ack beyond the input's commit and the socket: " +
        "parsing and checking the message, the queue, the ack's encoding and the record " +
        "fan-out that follows it",
    }),
  ];
}
