/**
 * Figure 5c/5d — spawning a workbench generation: from asking a fresh
 * {@linkcode KernelSupervisor} for its kernel until the worker has answered `init`, against
 * starting the bare interpreter (`python -c pass`) and a Jupyter kernel's start-up. 5e spawns
 * what the daemon really runs: `prepareConfinement`'s interpreter (the one `KLBR_PYTHON`, default
 * `python3`, resolves to, no launcher shim) inside bubblewrap when the machine has it.
 *
 * @module
 */

import { SILENT_LOGGER } from "../runtime/core/mod.ts";
import { parseConfig } from "../runtime/config/mod.ts";
import { resolvePython } from "../runtime/kernel/mod.ts";
import { prepareConfinement } from "../runtime/sandbox/mod.ts";
import type { JupyterPeerResult } from "./jupyter_peer.ts";
import { newSupervisor } from "./cell_round_trip.ts";
import { type BenchRow, makeRow } from "./row.ts";
import { type LatencySummary, summarize } from "./stats.ts";

/** Options for {@linkcode benchGenerationSpawn}. */
export interface GenerationSpawnOptions {
  /** The real interpreter (`resolvePython`'s `executable`). */
  python: string;
  /** A scratch directory: the workspace and managed skills root. */
  scratch: string;
  /** Generations (and bare interpreters) to start. */
  spawns: number;
  /** The Jupyter peer's result, measured in the same run. */
  jupyter: JupyterPeerResult;
}

/**
 * Times `spawns` generations, each on a fresh supervisor that is shut down untimed.
 *
 * @throws {KlbrError} `worker_failed` when a generation cannot start.
 */
export async function timeGenerationSpawns(
  options: {
    python: string;
    scratch: string;
    spawns: number;
    confined?: Parameters<typeof newSupervisor>[2];
  },
): Promise<LatencySummary> {
  const samples: number[] = [];
  for (let i = 0; i < options.spawns; i++) {
    const supervisor = newSupervisor(options.python, options.scratch, options.confined);
    try {
      const t0 = performance.now();
      await supervisor.ready();
      samples.push(performance.now() - t0);
    } finally {
      await supervisor.shutdown();
    }
  }
  return summarize(samples);
}

/** Times `python -c pass` from spawn to exit, `count` times. */
async function timeBareInterpreter(python: string, count: number): Promise<LatencySummary> {
  const samples: number[] = [];
  for (let i = 0; i < count; i++) {
    const t0 = performance.now();
    await new Deno.Command(python, {
      args: ["-c", "pass"],
      stdin: "null",
      stdout: "null",
      stderr: "null",
    }).output();
    samples.push(performance.now() - t0);
  }
  return summarize(samples);
}

/**
 * Measures figure 5c/5d.
 *
 * @throws {KlbrError} as {@linkcode timeGenerationSpawns}.
 */
export async function benchGenerationSpawn(options: GenerationSpawnOptions): Promise<BenchRow[]> {
  const spawn = await timeGenerationSpawns(options);
  const bare = await timeBareInterpreter(options.python, options.spawns);
  const jupyter = options.jupyter;
  // What the daemon runs: the same confinement decision serve makes, on a scratch state dir.
  const stateDir = `${options.scratch}/spawn-state`;
  await Deno.mkdir(stateDir, { recursive: true });
  const { sandbox } = parseConfig("", { file: "(defaults)" }).config;
  const confinement = await prepareConfinement({
    config: sandbox,
    limits: {
      maxProcesses: sandbox.max_processes,
      memoryBytes: sandbox.memory,
      cpuWeight: sandbox.cpu_weight,
      fileSizeBytes: sandbox.max_file_size,
    },
    selfEdit: false,
    python: await resolvePython(Deno.env.get("KLBR_PYTHON") ?? "python3"),
    bwrap: Deno.env.get("KLBR_BWRAP") ?? "bwrap",
    stateDir,
    workspace: options.scratch,
    repoRoot: `${options.scratch}/no-checkout`,
    log: SILENT_LOGGER,
  });
  const real = await timeGenerationSpawns({
    python: confinement.python,
    scratch: options.scratch,
    spawns: options.spawns,
    confined: { sandbox: confinement.base, stateDir: confinement.stateDir },
  }).finally(() => confinement.close());
  return [
    makeRow({
      id: "5e",
      figure: `spawn a workbench generation as the daemon does, p50 of ${real.count}`,
      unit: "ms",
      value: real.p50,
      peer: { label: "unconfined spawn (5c)", value: spawn.p50 },
      note: `KernelSupervisor.ready() with prepareConfinement's interpreter ` +
        `(\`${confinement.python}\`) and confinement ${confinement.status.mode}` +
        `${confinement.base ? " (bubblewrap: new PID and net namespaces, read-only system)" : ""}` +
        `, as serve runs it`,
    }),
    makeRow({
      id: "5c",
      figure: `spawn a workbench generation, p50 of ${spawn.count}`,
      unit: "ms",
      value: spawn.p50,
      peer: { label: "python -c pass", value: bare.p50 },
      note: `KernelSupervisor.ready() on a fresh supervisor: load skills, spawn ` +
        `\`${options.python} -m klbr\` in its own process group, init reply; a pyenv shim ` +
        `instead of the real interpreter adds its own start-up to every spawn`,
    }),
    makeRow({
      id: "5d",
      figure: `spawn a workbench generation, p50, against Jupyter`,
      unit: "ms",
      value: spawn.p50,
      peer: { label: "Jupyter kernel start", value: jupyter.ok ? jupyter.start.p50 : null },
      note: jupyter.ok
        ? `peer: start_new_kernel() until kernel_info answers, p50 of ${jupyter.start.count}`
        : `no Jupyter peer: ${jupyter.reason}`,
    }),
  ];
}
