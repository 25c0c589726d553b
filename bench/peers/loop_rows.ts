/**
 * Figures 10i and 10j: klbr's agent loop against the durable loop peers
 * (`agent_loop_peer.ts`), on the bare `openai` SDK and on `@mariozechner/pi-agent-core`, each
 * in its own process against the same instant model: message → send wall time, and the
 * process's CPU per one-step turn. The two peers are driven turn by turn, interleaved, before
 * and after klbr's series; klbr's figures are rows 10c and 10e of the same run.
 *
 * @module
 */

import { fileURLToPath } from "node:url";
import { join } from "node:path";
import { KlbrError } from "../../runtime/core/mod.ts";
import { cpuMs } from "../cpu_time.ts";
import { startInstantModel } from "../instant_model.ts";
import type { BenchRow } from "../row.ts";
import { makeRow } from "../row.ts";
import { median, ratioGoal } from "./admission_rows.ts";
import { type PeerProcess, startPeer } from "./spawn.ts";

/** The peers' samples: wall ms message → send, and CPU ms per turn, by peer. */
export interface LoopPeerSamples {
  sendMs: { sdk: number[]; pi: number[] };
  cpuMs: { sdk: number[]; pi: number[] };
}

/** An empty sample set, filled by {@linkcode measureLoopPeers}. */
export function loopPeerSamples(): LoopPeerSamples {
  return { sendMs: { sdk: [], pi: [] }, cpuMs: { sdk: [], pi: [] } };
}

/**
 * Runs `turns` one-step turns on each peer (after `warmup` untimed ones), interleaved turn by
 * turn, and adds the samples to `into` (the series' CPU per turn once per call).
 *
 * @throws {KlbrError} `worker_failed` when a peer does not start or answers an error.
 */
export async function measureLoopPeers(
  options: { root: string; python: string; turns: number; warmup: number },
  into: LoopPeerSamples,
): Promise<void> {
  const model = startInstantModel(() => ({ code: "send('done')\nwait()" }));
  const peers: Partial<Record<"sdk" | "pi", PeerProcess & { socket: WebSocket }>> = {};
  try {
    for (const kind of ["sdk", "pi"] as const) {
      const db = join(options.root, `${kind}-${crypto.randomUUID()}.sqlite`);
      const peer = await startLoopPeer([kind, db, model.url, options.python]);
      const socket = new WebSocket(`ws://127.0.0.1:${peer.port}/`);
      await new Promise((resolve, reject) => {
        socket.onopen = resolve;
        socket.onerror = () => reject(new KlbrError("worker_failed", `cannot reach ${kind}`));
      });
      peers[kind] = { ...peer, socket };
    }
    const cpuBefore = { sdk: 0, pi: 0 };
    for (let i = 0; i < options.warmup + options.turns; i++) {
      for (const kind of i % 2 === 0 ? ["sdk", "pi"] as const : ["pi", "sdk"] as const) {
        const peer = peers[kind]!;
        if (i === options.warmup) cpuBefore[kind] = await cpuMs(peer.pid);
        const sendMs = await oneTurn(peer.socket, `turn ${i}`);
        if (i >= options.warmup) into.sendMs[kind].push(sendMs);
      }
    }
    for (const kind of ["sdk", "pi"] as const) {
      into.cpuMs[kind].push((await cpuMs(peers[kind]!.pid) - cpuBefore[kind]) / options.turns);
    }
  } finally {
    for (const peer of Object.values(peers)) {
      peer.socket.close();
      await peer.stop();
    }
    await model.close();
  }
}

/** Sends one message and resolves with the ms until its send, once the turn has ended. */
function oneTurn(socket: WebSocket, text: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    let sendMs = -1;
    socket.onmessage = (event) => {
      const message = JSON.parse(String(event.data));
      if (message.kind === "send" && sendMs < 0) sendMs = performance.now() - t0;
      else if (message.kind === "error") {
        reject(new KlbrError("worker_failed", `cannot run a peer turn: ${message.message}`));
      } else if (message.kind === "turn.ended") {
        if (sendMs < 0) reject(new KlbrError("worker_failed", "cannot run a peer turn: no send"));
        else resolve(sendMs);
      }
    };
    socket.send(JSON.stringify({ kind: "input", text }));
  });
}

async function startLoopPeer(args: string[]): Promise<PeerProcess> {
  const lock = fileURLToPath(new URL("../../tests/deno.lock", import.meta.url));
  return await startPeer("agent_loop_peer.ts", args, {
    flags: [`--lock=${lock}`, "--allow-run", "--allow-env", "--allow-sys"],
    timeoutMs: 120_000,
  });
}

/**
 * Rows 10i and 10j from klbr's rows 10c (message → send) and 10e (CPU per turn) and the
 * peers' samples.
 */
export function loopPeerRows(rows: readonly BenchRow[], samples: LoopPeerSamples): BenchRow[] {
  const value = (id: string) => rows.find((row) => row.id === id)?.value ?? null;
  const spreadOf = (values: number[]) =>
    values.length === 0
      ? "no samples"
      : `${Math.min(...values).toFixed(2)}–${Math.max(...values).toFixed(2)} ms`;
  const note = "peers: bench/peers/agent_loop_peer.ts in its own process, the same instant " +
    "model (streamed), cell `send('done')` then `wait()` in a persistent Python process " +
    "(bench/peers/cell_runner.py), every message committed at synchronous=FULL before the " +
    "loop goes on, driven turn by turn (the two peers interleaved) before and after klbr's " +
    "series";
  const orNull = (values: number[]) => values.length === 0 ? null : median(values);
  return [
    makeRow({
      id: "10i",
      figure: "daemon CPU per one-step turn, against the durable SDK loop",
      unit: "ms",
      value: value("10e"),
      peer: { label: "durable openai-SDK loop, CPU per turn", value: orNull(samples.cpuMs.sdk) },
      goal: ratioGoal({ max: 2 }, "≤ 2× SDK loop"),
      note: `klbr: row 10e; the SDK loop's runs ${spreadOf(samples.cpuMs.sdk)}, pi's ` +
        `${spreadOf(samples.cpuMs.pi)}; ${note}`,
    }),
    makeRow({
      id: "10j",
      figure: "message → send, against the durable pi-agent-core loop",
      unit: "ms",
      value: value("10c"),
      peer: { label: "durable pi-agent-core loop, p50", value: orNull(samples.sendMs.pi) },
      goal: ratioGoal({ max: 2 }, "≤ 2× pi loop"),
      note: `klbr: row 10c; the SDK loop's p50 ${orNull(samples.sendMs.sdk)?.toFixed(2)} ms`,
    }),
  ];
}
