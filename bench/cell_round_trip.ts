/**
 * Figure 3 — cell round trip for `1+1` on a live workbench (the daemon's host side, without
 * its durable records), p50 and p99, against a raw framed echo with the same Python (the
 * ceiling) and against a Jupyter kernel's execute round trip (the peer).
 *
 * @module
 */

import { join } from "node:path";
import { REPO_ROOT } from "../runtime/setup/mod.ts";
import { KlbrError, newId } from "../runtime/core/mod.ts";
import { encodeFrame, FrameDecoder, KernelSupervisor } from "../runtime/kernel/mod.ts";
import type { SandboxBase } from "../runtime/sandbox/mod.ts";
import type { JupyterPeerResult } from "./jupyter_peer.ts";
import { below, belowPeer, type BenchRow, makeRow } from "./row.ts";
import { type LatencySummary, summarize } from "./stats.ts";

/** Options for {@linkcode benchCellRoundTrip}. */
export interface CellRoundTripOptions {
  /** The real interpreter (`resolvePython`'s `executable`). */
  python: string;
  /** A scratch directory: the workspace and managed skills root. */
  scratch: string;
  /** Timed cells. */
  cells: number;
  /** Timed echo frames. */
  echoes: number;
  /** Untimed rounds before each timed series. */
  warmup: number;
  /** The Jupyter peer's result, measured in the same run. */
  jupyter: JupyterPeerResult;
}

/**
 * Times `1+1` cells on a workbench that a {@linkcode KernelSupervisor} spawned, from
 * `execute` to its result.
 *
 * @throws {KlbrError} `cell_failed` when a cell does not answer `2`; `worker_failed` when the
 *   workbench cannot start.
 */
export async function timeCells(
  options: { python: string; scratch: string; cells: number; warmup: number },
): Promise<LatencySummary> {
  const supervisor = newSupervisor(options.python, options.scratch);
  try {
    await supervisor.ready();
    const samples: number[] = [];
    for (let i = 0; i < options.warmup + options.cells; i++) {
      const t0 = performance.now();
      const result = await supervisor.execute(newId("cell"), "1+1", { timeoutMs: 10_000 });
      const elapsed = performance.now() - t0;
      if (result.outcome !== "ok" || result.value !== "2") {
        throw new KlbrError(
          "cell_failed",
          `cannot time cells: 1+1 did not answer 2 (got ${result.outcome} ${result.value})`,
        );
      }
      if (i >= options.warmup) samples.push(elapsed);
    }
    return summarize(samples);
  } finally {
    await supervisor.shutdown();
  }
}

/**
 * Times a raw framed echo: an execute-shaped frame written to `framed_echo.py`'s stdin until
 * it is decoded back from its stdout.
 *
 * @throws {KlbrError} `worker_failed` when the echo process ends early or answers wrongly.
 */
export async function timeEcho(
  options: { python: string; echoes: number; warmup: number },
): Promise<LatencySummary> {
  const child = new Deno.Command(options.python, {
    args: [join(REPO_ROOT, "bench", "framed_echo.py")],
    stdin: "piped",
    stdout: "piped",
    stderr: "null",
  }).spawn();
  const writer = child.stdin.getWriter();
  // Read as the daemon's channel reads (kernel/_channel.ts): chunks into a FrameDecoder.
  const reader = child.stdout.getReader();
  const decoder = new FrameDecoder();
  const frames: unknown[] = [];
  const nextFrame = async (): Promise<unknown> => {
    while (frames.length === 0) {
      const { value, done } = await reader.read();
      if (done) return undefined;
      decoder.push(value, (frame) => frames.push(frame));
    }
    return frames.shift();
  };
  try {
    const samples: number[] = [];
    for (let i = 0; i < options.warmup + options.echoes; i++) {
      const id = newId("request");
      const t0 = performance.now();
      await writer.write(encodeFrame({ kind: "execute", id, cell: newId("cell"), code: "1+1" }));
      const value = await nextFrame();
      const elapsed = performance.now() - t0;
      if ((value as { id?: string } | undefined)?.id !== id) {
        throw new KlbrError("worker_failed", `cannot time the echo: frame ${i} did not come back`);
      }
      if (i >= options.warmup) samples.push(elapsed);
    }
    return summarize(samples);
  } finally {
    await writer.close().catch(() => {});
    await reader.cancel().catch(() => {});
    await child.status;
  }
}

/**
 * Measures figure 3's rows.
 *
 * @throws {KlbrError} as {@linkcode timeCells} and {@linkcode timeEcho}.
 */
export async function benchCellRoundTrip(options: CellRoundTripOptions): Promise<BenchRow[]> {
  const echo = await timeEcho(options);
  const cells = await timeCells(options);
  const jupyter = options.jupyter;
  const jupyterNote = jupyter.ok
    ? `peer: ${jupyter.versions}, execute_request until execute_reply and execute_result, ` +
      `${jupyter.roundTrip.count} timed`
    : `no Jupyter peer: ${jupyter.reason}`;
  return [
    makeRow({
      id: "3a",
      figure: "cell round trip 1+1, p50",
      unit: "ms",
      value: cells.p50,
      peer: { label: "raw framed echo", value: echo.p50 },
      goal: below(2, "< 2 ms"),
      note: `${cells.count} cells through KernelSupervisor.execute on one generation (frames, ` +
        `zod, the Python kernel; without the daemon's two durable cell records); ceiling: ` +
        `${echo.count} execute-shaped frames through bench/framed_echo.py, same interpreter`,
    }),
    makeRow({
      id: "3b",
      figure: "cell round trip 1+1, p99",
      unit: "ms",
      value: cells.p99,
      peer: { label: "raw framed echo", value: echo.p99 },
    }),
    makeRow({
      id: "3c",
      figure: "cell round trip 1+1, p50, against Jupyter",
      unit: "ms",
      value: cells.p50,
      peer: { label: "Jupyter kernel", value: jupyter.ok ? jupyter.roundTrip.p50 : null },
      goal: belowPeer("below Jupyter's"),
      note: jupyterNote,
    }),
    makeRow({
      id: "3d",
      figure: "cell round trip 1+1, p99, against Jupyter",
      unit: "ms",
      value: cells.p99,
      peer: { label: "Jupyter kernel", value: jupyter.ok ? jupyter.roundTrip.p99 : null },
    }),
  ];
}

/** A supervisor like the daemon's, without durable records, in `scratch`. */
export function newSupervisor(
  python: string,
  scratch: string,
  confined?: { sandbox: SandboxBase | undefined; stateDir: string },
): KernelSupervisor {
  return new KernelSupervisor({
    python,
    ...(confined === undefined ? {} : { sandbox: confined.sandbox, stateDir: confined.stateDir }),
    session: "bench",
    workspace: scratch,
    repoRoot: REPO_ROOT,
    skillRoots: {
      builtinRoot: join(REPO_ROOT, "skills"),
      managedRoot: join(scratch, "skills"),
    },
    recordGeneration: () => {},
  });
}
