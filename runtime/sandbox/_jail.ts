/**
 * One confined process tree's limits: the wrapper operations that make its cgroup, write the
 * limits and join it before bubblewrap starts; reading whether the tree hit a limit; and
 * removing the cgroup (killing what is left in it) when the tree has ended.
 *
 * @module
 */

import { join } from "node:path";
import { formatBytes, type LimitsPlan } from "./_limits.ts";
import { REMOVE_CGROUPS, runShell } from "./_shell.ts";

/** A limit a tree reached: `processes` (fork refused) or `memory` (a process OOM-killed). */
export type LimitHit = "processes" | "memory";

/** One tree's cgroup, or its rlimits. */
export interface Jail {
  /** The wrapper's arguments before `--`: the directories to make, then its operations. */
  readonly wrapperArgs: string[];
  /**
   * The limit the tree has reached, phrased as `reached the process limit (256)`, or null;
   * once reached it stays so (the tree is ended for it). Always null under rlimits (nothing
   * to read).
   */
  breach(): Promise<string | null>;
  /** Kills what is left of the tree and removes its cgroup; idempotent, never throws. */
  release(): Promise<void>;
}

/** The phrase naming a reached limit. */
export function limitPhrase(hit: LimitHit, plan: LimitsPlan): string {
  return hit === "processes"
    ? `reached the process limit (${plan.settings.maxProcesses})`
    : `reached the memory limit (${formatBytes(plan.settings.memoryBytes)})`;
}

/** The files whose counters say a limit was reached, by mode. */
function counterFiles(plan: LimitsPlan, dirs: Record<string, string>): string[] {
  if (plan.mode === "cgroup2") {
    return [join(dirs.unified, "pids.events"), join(dirs.unified, "memory.events")];
  }
  return [join(dirs.pids, "pids.events"), join(dirs.memory, "memory.oom_control")];
}

/** `max N` (pids) and `oom_kill N` (memory) from the counter files' text. */
function counters(text: string): { processes: number; memory: number } {
  const read = (key: string) => Number(new RegExp(`^${key} (\\d+)$`, "m").exec(text)?.[1] ?? 0);
  return { processes: read("max"), memory: read("oom_kill") };
}

/** The limits written into a new cgroup, by mode. */
function limitWrites(plan: LimitsPlan, dirs: Record<string, string>): string[] {
  const { maxProcesses, memoryBytes, cpuWeight } = plan.settings;
  const w = (dir: string, file: string, value: string | number) => [
    "-w",
    join(dir, file),
    String(value),
  ];
  if (plan.mode === "cgroup2") {
    const dir = dirs.unified;
    return [
      ...w(dir, "pids.max", maxProcesses),
      ...w(dir, "memory.max", memoryBytes),
      ...(plan.swapFile ? w(dir, "memory.swap.max", 0) : []),
      ...(plan.cpu ? w(dir, "cpu.weight", cpuWeight) : []),
      "-j",
      join(dir, "cgroup.procs"),
    ];
  }
  return [
    ...w(dirs.pids, "pids.max", maxProcesses),
    ...w(dirs.memory, "memory.limit_in_bytes", memoryBytes),
    ...(plan.swapFile ? w(dirs.memory, "memory.memsw.limit_in_bytes", memoryBytes) : []),
    ...(dirs.cpu === undefined ? [] : w(dirs.cpu, "cpu.shares", Math.round(cpuWeight * 10.24))),
    ...Object.values(dirs).flatMap((dir) => ["-j", join(dir, "cgroup.procs")]),
  ];
}

/**
 * The jail of the next tree under `plan`: a fresh cgroup per hierarchy (or rlimits), and the
 * file size limit in every mode.
 *
 * @example
 * ```ts
 * const jail = openJail(plan);
 * // /bin/sh -c WRAPPER klbr <filter> ...jail.wrapperArgs -- bwrap ...
 * ```
 */
export function openJail(plan: LimitsPlan): Jail {
  const { settings } = plan;
  // RLIMIT_FSIZE in 512-byte blocks (dash's unit), in every mode: cgroups do not limit disk.
  const fsize = ["-u", "-f", String(Math.max(1, Math.floor(settings.fileSizeBytes / 512)))];
  if (plan.mode === "rlimit") {
    return {
      wrapperArgs: [
        "0",
        "-u",
        "-v",
        String(Math.floor(settings.memoryBytes / 1024)),
        ...(plan.nproc === null ? [] : ["-n", String(plan.nproc)]),
        ...fsize,
      ],
      breach: () => Promise.resolve(null),
      release: () => Promise.resolve(),
    };
  }
  const leaf = String(plan.next++);
  const dirs = Object.fromEntries(
    Object.entries(plan.parents).map(([controller, parent]) => [controller, join(parent, leaf)]),
  );
  return new CgroupJail(plan, dirs, [...limitWrites(plan, dirs), ...fsize]);
}

class CgroupJail implements Jail {
  readonly wrapperArgs: string[];
  readonly #plan: LimitsPlan;
  readonly #dirs: string[];
  readonly #files: string[];
  #hit: string | null = null;
  #released: Promise<void> | null = null;

  constructor(plan: LimitsPlan, dirs: Record<string, string>, ops: string[]) {
    this.#plan = plan;
    this.#dirs = Object.values(dirs);
    this.#files = counterFiles(plan, dirs);
    this.wrapperArgs = [String(this.#dirs.length), ...this.#dirs, ...ops];
  }

  async breach(): Promise<string | null> {
    if (this.#hit !== null || this.#released !== null) return this.#hit;
    const out = await runShell('for f; do cat "$f" 2>/dev/null; done', this.#files)
      .catch(() => null);
    if (out === null || this.#hit !== null) return this.#hit;
    // The cgroup is the tree's own from its start: any count at all is this tree's.
    const now = counters(out.stdout);
    const hit: LimitHit | null = now.memory > 0 ? "memory" : now.processes > 0 ? "processes" : null;
    this.#hit = hit === null ? null : limitPhrase(hit, this.#plan);
    return this.#hit;
  }

  release(): Promise<void> {
    this.#released ??= runShell(REMOVE_CGROUPS, this.#dirs).then(() => {}, () => {});
    return this.#released;
  }
}

/** How often a running cell's or program's tree is checked for a reached limit. */
export const LIMIT_POLL_MS = 300;

/**
 * Checks `jail` every {@linkcode LIMIT_POLL_MS} while something runs and calls `onHit` with
 * the phrase of the first limit reached; `stop()` ends the checks and resolves once none is
 * in flight. A null jail watches nothing.
 *
 * @example
 * ```ts
 * const watch = watchLimits(jail, (hit) => void kill(`the cell ${hit}`));
 * try { await cell; } finally { await watch.stop(); }
 * ```
 */
export function watchLimits(
  jail: Jail | null | undefined,
  onHit: (hit: string) => void,
): { stop(): Promise<void> } {
  if (jail === null || jail === undefined) return { stop: () => Promise.resolve() };
  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let inFlight: Promise<void> = Promise.resolve();
  const tick = () => {
    inFlight = jail.breach().then((hit) => {
      if (stopped) return;
      if (hit !== null) return onHit(hit);
      timer = setTimeout(tick, LIMIT_POLL_MS);
    });
  };
  timer = setTimeout(tick, LIMIT_POLL_MS);
  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await inFlight;
    },
  };
}
