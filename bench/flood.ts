/**
 * Figure 1k–1m — bounded input per client: one client writes many inputs over bare TCP and
 * reads nothing, while a second client sends inputs one at a time and /health is asked. The
 * rows are the daemon's peak resident size, the second client's send → ack p99 and /health's
 * p99 during the flood, each against the same figure on the same daemon before it. Once the
 * first client reads again, every one of its inputs must be acknowledged exactly once, in the
 * order it sent them, or the run fails.
 *
 * @module
 */

import { join } from "node:path";
import { type BenchDaemon, startBenchDaemon } from "./daemon.ts";
import { startInstantModel } from "./instant_model.ts";
import { openSilentLane, type SilentMessage } from "./silent_lane.ts";
import { KlbrError } from "../runtime/core/mod.ts";
import { type LaneDriver, openLane } from "./lane_driver.ts";
import { below, type BenchRow, makeRow } from "./row.ts";
import { residentBytes, workingDenoPid } from "./rss.ts";
import { summarize } from "./stats.ts";

/** Options for {@linkcode benchFlood}. */
export interface FloodOptions {
  /** A scratch directory the run may fill. */
  root: string;
  /** Inputs the silent client writes. */
  inputs: number;
  /** Inputs the second client times, before the flood and during it each. */
  samples: number;
}

const MB = 1024 * 1024;

/** Times `count` inputs of `lane`, one at a time, and as many /health answers between them. */
async function timeRound(
  lane: LaneDriver,
  url: string,
  options: { count: number; prefix: string },
): Promise<{ ackMs: number[]; healthMs: number[] }> {
  const ackMs: number[] = [];
  const healthMs: number[] = [];
  for (let i = 0; i < options.count; i++) {
    let started = performance.now();
    await lane.admit(`${options.prefix}-${i}`, `timed input ${i}`);
    ackMs.push(performance.now() - started);
    started = performance.now();
    await (await fetch(`${url}/health`)).arrayBuffer();
    healthMs.push(performance.now() - started);
  }
  return { ackMs, healthMs };
}

/**
 * Resolves once `/health` says a connection's messages waited for its answers (`input_paused`):
 * the flood has been taken up to its bound and its writes wait; or once `sending` resolved (a
 * flood smaller than the bound). Bounded: 30 s.
 *
 * @throws {KlbrError} `worker_timeout` when neither happens.
 */
async function floodHeld(url: string, sending: Promise<void>): Promise<void> {
  let sent = false;
  void sending.then(() => sent = true, () => sent = true);
  for (let i = 0; i < 600 && !sent; i++) {
    const health = await (await fetch(`${url}/health`)).json();
    if (health.lanes?.input_paused >= 1) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  if (!sent) {
    throw new KlbrError("worker_timeout", "cannot time the flood: its connection never waited");
  }
}

/** Reads the daemon's resident size every 50 ms until `stop` is called; returns the peak. */
function samplePeak(pid: number): { stop: () => Promise<number> } {
  let peak = 0;
  let running = true;
  const loop = (async () => {
    while (running) {
      peak = Math.max(peak, await residentBytes(pid));
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      return peak;
    },
  };
}

/**
 * Measures figures 1k–1m on a live daemon (checkout behaviour, a fake model that answers
 * every turn with text).
 *
 * @throws {KlbrError} `internal` when an input of the silent client is not acknowledged
 *   exactly once and in order; `worker_timeout` when its answers do not all arrive.
 */
export async function benchFlood(options: FloodOptions): Promise<BenchRow[]> {
  const fake = startInstantModel(() => ({ text: "noted" }));
  let daemon: BenchDaemon | undefined;
  try {
    const stateDir = join(options.root, "flood-state");
    const workspace = join(options.root, "flood-ws");
    daemon = await startBenchDaemon({ modelUrl: fake.url, stateDir, workspace });
    const pid = await workingDenoPid(daemon.pid);
    const { lane } = await openLane({ port: daemon.port, token: daemon.token, client: "timed" });
    const quiet = await timeRound(lane, daemon.url, { count: options.samples, prefix: "quiet" });
    const quietBytes = await residentBytes(pid);
    const sampler = samplePeak(pid);
    const silent = await openSilentLane({
      port: daemon.port,
      token: daemon.token,
      client: "flood",
    });
    const inputs = Array.from({ length: options.inputs }, (_, i) => ({
      kind: "input",
      request: `f${i}`,
      client_msg_id: `flood-${i}`,
      text: `flood input ${i}: a client that writes and never reads`,
    }));
    let peak = 0;
    let during: { ackMs: number[]; healthMs: number[] };
    try {
      // Not awaited: once the daemon stops reading the socket, the writes wait in the kernel.
      // The second client is timed from then on, when the flood has been taken up to its bound
      // (or, for a flood smaller than the bound, once it is written).
      const sending = silent.sendAll(inputs);
      await floodHeld(daemon.url, sending);
      during = await timeRound(lane, daemon.url, { count: options.samples, prefix: "during" });
      silent.startReading();
      await sending;
      const answers = (messages: SilentMessage[]) =>
        messages.filter((m) => m.kind === "ack" || m.kind === "error");
      await silent.until((m) => answers(m).length >= inputs.length, 300_000).catch((error) => {
        throw new KlbrError(
          "worker_timeout",
          `cannot finish the flood: ${
            answers(silent.messages).length
          } of ${inputs.length} answered (got ${error})`,
        );
      });
      checkAnswers(answers(silent.messages), inputs.length);
    } finally {
      peak = await sampler.stop();
      silent.close();
      await lane.close();
    }
    const n = options.inputs.toLocaleString("en-US");
    const quietAck = summarize(quiet.ackMs);
    const quietHealth = summarize(quiet.healthMs);
    const ack = summarize(during.ackMs);
    const health = summarize(during.healthMs);
    const how = `a client over bare TCP writes ${n} inputs at once and reads nothing until ` +
      `its messages wait for their answers and then ${options.samples} inputs of a second ` +
      `client were acknowledged (one at a time, /health ` +
      `asked after each); then it reads, and every one of its inputs was acknowledged once, in ` +
      `order; default lanes bounds (256 unacknowledged, 1 MiB unread)`;
    return [
      makeRow({
        id: "1k",
        figure: `daemon resident size, peak while a client writes ${n} inputs without reading`,
        unit: "MB",
        value: peak / MB,
        peer: { label: "the same daemon before the flood", value: quietBytes / MB },
        goal: below(150, "< 150 MB"),
        note: `${how}; sampled every 50 ms with ps`,
      }),
      makeRow({
        id: "1l",
        figure: `send → ack p99 of a second client while one writes ${n} inputs without reading`,
        unit: "ms",
        value: ack.p99,
        peer: { label: "the same client on the same daemon before the flood", value: quietAck.p99 },
        goal: below(50, "< 50 ms"),
        note: `${how}; p50 ${ack.p50.toFixed(2)} ms (before: ${quietAck.p50.toFixed(2)} ms)`,
      }),
      makeRow({
        id: "1m",
        figure: `/health answer p99 while a client writes ${n} inputs without reading`,
        unit: "ms",
        value: health.p99,
        peer: { label: "the same daemon before the flood", value: quietHealth.p99 },
        goal: below(50, "< 50 ms"),
        note: `${how}; max ${health.max.toFixed(1)} ms (before: ${quietHealth.max.toFixed(1)} ms)`,
      }),
    ];
  } finally {
    await daemon?.stop();
    await fake.close();
  }
}

/**
 * Checks the silent client's answers: one `ack` for each input, in the order sent, none a
 * duplicate, each a different input.
 *
 * @throws {KlbrError} `internal` naming the first answer that breaks it.
 */
function checkAnswers(answers: SilentMessage[], count: number): void {
  const ids = new Set<unknown>();
  for (let i = 0; i < count; i++) {
    const answer = answers[i];
    if (answer?.kind !== "ack" || answer.request !== `f${i}` || answer.duplicate !== false) {
      throw new KlbrError(
        "internal",
        `cannot accept the flood: answer ${i} is not the ack of f${i} (got ${
          JSON.stringify(answer).slice(0, 200)
        })`,
      );
    }
    ids.add(answer.input_id);
  }
  if (ids.size !== count) {
    throw new KlbrError(
      "internal",
      `cannot accept the flood: ${count} inputs acknowledged as ${ids.size} distinct ids (got ${ids.size})`,
    );
  }
}
