/**
 * The limits of each confined process tree — processes (threads count), memory, CPU weight and
 * file size — and how this host enforces them: cgroup v2 (a writable subtree with the `pids`
 * and `memory` controllers), cgroup v1 (writable `pids` and `memory` hierarchies), else rlimits
 * set by the wrapper before bubblewrap starts. The decision is made once at start, with the
 * reason, and every tree then gets its own cgroup (`_jail.ts`).
 *
 * Each daemon keeps its trees under one directory per hierarchy, `klbr-<hash of the state
 * directory>`; the owner lock means no live daemon shares it, so at start whatever is left in
 * it (a SIGKILLed daemon's trees) is killed and removed.
 *
 * @module
 */

import { createHash } from "node:crypto";
import { dirname, join } from "node:path";
import { REMOVE_CGROUPS, RM_CG, runShell } from "./_shell.ts";

/** The limits of one confined process tree, as configured. */
export interface LimitSettings {
  /** Processes and threads at once. */
  maxProcesses: number;
  /** Memory (cgroups: of the tree; rlimits: address space of each process), in bytes. */
  memoryBytes: number;
  /** CPU weight against the daemon's 100 (cgroup v2 units; v1 shares are 10.24 times it). */
  cpuWeight: number;
  /** The largest file a process may write (RLIMIT_FSIZE), in bytes. */
  fileSizeBytes: number;
}

/** How the limits are enforced here. */
export type LimitsMode = "cgroup2" | "cgroup1" | "rlimit";

/** The decision {@linkcode planLimits} made. */
export interface LimitsPlan {
  mode: LimitsMode;
  /** One sentence: where the cgroups live, or why there are none. */
  reason: string;
  settings: LimitSettings;
  /**
   * The directory each tree's cgroup is made in, by controller (`pids`, `memory`, `cpu` for
   * v1; `unified` for v2); empty in rlimit mode.
   */
  parents: Record<string, string>;
  /** Whether the memory limit also caps swap (the file exists). */
  swapFile: boolean;
  /** Whether the CPU weight can be set (the cpu controller is there). */
  cpu: boolean;
  /** RLIMIT_NPROC in rlimit mode; null where it cannot bind (uid 0) or in a cgroup mode. */
  nproc: number | null;
  /** The next tree's number. */
  next: number;
}

/** Where the cgroup file systems are, so a test can point at a fake tree. */
export interface CgroupPlaces {
  /** The cgroup mount root. @default "/sys/fs/cgroup" */
  root?: string;
  /** The file naming this process's cgroups. @default "/proc/self/cgroup" */
  self?: string;
}

/** The directory name of a state directory's trees under each hierarchy. */
export function cgroupName(stateDir: string): string {
  return `klbr-${createHash("sha256").update(stateDir).digest("hex").slice(0, 12)}`;
}

/** `1073741824` → `1 GiB`. */
export function formatBytes(bytes: number): string {
  for (const [unit, size] of [["GiB", 2 ** 30], ["MiB", 2 ** 20], ["KiB", 2 ** 10]] as const) {
    if (bytes >= size && bytes % size === 0) return `${bytes / size} ${unit}`;
  }
  return `${bytes} bytes`;
}

/** The settings as one phrase, e.g. `256 processes, 1 GiB memory, CPU weight 50`. */
export function describeSettings(settings: LimitSettings): string {
  return `${settings.maxProcesses} processes, ${
    formatBytes(settings.memoryBytes)
  } memory, CPU weight ${settings.cpuWeight}, files up to ${formatBytes(settings.fileSizeBytes)}`;
}

/**
 * Decides how the limits are enforced here, makes this daemon's cgroup directories and
 * removes what a previous daemon of the same state directory left in them. Never throws: a
 * host without usable cgroups gets rlimits, and the plan says why; `rlimitsOnly` (the reason)
 * skips the cgroups.
 *
 * @example
 * ```ts
 * const plan = await planLimits(settings, { stateDir });
 * console.log(plan.mode, plan.reason);
 * ```
 */
export async function planLimits(
  settings: LimitSettings,
  options: { stateDir: string; rlimitsOnly?: string } & CgroupPlaces,
): Promise<LimitsPlan> {
  if (options.rlimitsOnly !== undefined) return await rlimitPlan(settings, options.rlimitsOnly);
  const root = options.root ?? "/sys/fs/cgroup";
  const name = cgroupName(options.stateDir);
  const plan = { settings, nproc: null, next: 1 };
  let found: { lines: string[]; v2: boolean };
  try {
    found = await readCgroups(root, options.self ?? "/proc/self/cgroup");
  } catch (error) {
    return await rlimitPlan(settings, `the cgroups cannot be read (${String(error)})`);
  }
  const tried = found.v2
    ? await prepareV2(root, name, { lines: found.lines, settings })
    : await prepareV1(root, name, { lines: found.lines, settings });
  if ("parents" in tried) return { ...plan, ...tried };
  return await rlimitPlan(settings, tried.why);
}

/** The lines of `/proc/self/cgroup` (as the shell, a child, sees them) and whether `root` is v2. */
async function readCgroups(root: string, self: string): Promise<{ lines: string[]; v2: boolean }> {
  const out = await runShell(
    'cat "$2" || exit 1; if [ -f "$1/cgroup.controllers" ]; then echo "unified: v2"; fi',
    [root, self],
  );
  if (out.code !== 0) throw new Error(out.stderr.trim() || `exit ${out.code}`);
  const lines = out.stdout.split("\n").filter((line) => line !== "");
  return { lines: lines.filter((l) => l !== "unified: v2"), v2: lines.includes("unified: v2") };
}

type Prepared =
  | Pick<LimitsPlan, "mode" | "reason" | "parents" | "swapFile" | "cpu">
  | { why: string };

/** The own path of a v1 controller (`4:memory:/a/b` → `/a/b`), or undefined. */
function ownPath(lines: string[], controller: string): string | undefined {
  for (const line of lines) {
    const first = line.indexOf(":");
    const second = line.indexOf(":", first + 1);
    if (first < 0 || second < 0) continue;
    if (line.slice(first + 1, second).split(",").includes(controller)) {
      return line.slice(second + 1);
    }
  }
  return undefined;
}

/**
 * Makes each parent directory given before `--` and removes its leftovers, then checks each
 * control file given after it exists; prints `ok`, or says on stderr what failed.
 */
const PREPARE = `${RM_CG}
while [ "$1" != -- ]; do mkdir -p "$1" || exit 1; rm_children "$1"; shift; done
shift
for f; do [ -f "$f" ] || { echo "no $f" >&2; exit 1; }; done
echo ok`;

/** Makes the cpu parent `$1`, removes its leftovers and writes `$3` into its file `$2`. */
const PREPARE_CPU = `${RM_CG}
mkdir -p "$1" && rm_children "$1" && [ -f "$1/$2" ] && printf '%s\\n' "$3" > "$1/$2"`;

async function prepareV1(
  root: string,
  name: string,
  at: { lines: string[]; settings: LimitSettings },
): Promise<Prepared> {
  const { lines, settings } = at;
  const parents: Record<string, string> = {};
  for (const controller of ["pids", "memory", "cpu"]) {
    const own = ownPath(lines, controller);
    if (own !== undefined) parents[controller] = join(root, controller, own, name);
  }
  if (parents.pids === undefined || parents.memory === undefined) {
    return { why: `no cgroup v1 pids and memory hierarchies (${root})` };
  }
  const check = [join(parents.pids, "pids.max"), join(parents.memory, "memory.limit_in_bytes")];
  const out = await runShell(PREPARE, [parents.pids, parents.memory, "--", ...check]);
  if (out.code !== 0 || !out.stdout.includes("ok")) {
    return { why: `cgroup v1 is not writable here (${out.stderr.trim().slice(0, 200)})` };
  }
  if (parents.cpu !== undefined) {
    // All trees together weigh against the daemon as one: their parent gets the weight too.
    const shares = String(Math.round(settings.cpuWeight * 10.24));
    const cpu = await runShell(PREPARE_CPU, [parents.cpu, "cpu.shares", shares]);
    if (cpu.code !== 0) delete parents.cpu;
  }
  const swap = await runShell('[ -f "$1" ] && echo yes', [
    join(parents.memory, "memory.memsw.limit_in_bytes"),
  ]);
  return {
    mode: "cgroup1",
    cpu: parents.cpu !== undefined,
    reason: `cgroup v1: a cgroup per tree in the ${
      Object.keys(parents).join(", ")
    } hierarchies under ${root}`,
    parents,
    swapFile: swap.stdout.trim() === "yes",
  };
}

/**
 * cgroup v2: a tree's cgroup needs a parent whose subtree has the `pids` and `memory`
 * controllers and holds no process. The daemon's own cgroup holds the daemon, so the parent is
 * made beside it (in the cgroup above, where the controllers are already given), else inside
 * it where its controllers can still be given to children.
 */
async function prepareV2(
  root: string,
  name: string,
  at: { lines: string[]; settings: LimitSettings },
): Promise<Prepared> {
  const { lines, settings } = at;
  const own = lines.find((line) => line.startsWith("0::"))?.slice(3);
  if (own === undefined) return { why: "cgroup v2 without this process's cgroup" };
  const self = join(root, own);
  const candidates = own === "/" ? [self] : [dirname(self), self];
  const why: string[] = [];
  for (const under of candidates) {
    const parent = join(under, name);
    const out = await runShell(ENABLE_V2, [
      under,
      parent,
      String(settings.cpuWeight),
      under === self ? "own" : "above",
    ]);
    if (out.code === 0 && /\bpids\b/.test(out.stdout) && /\bmemory\b/.test(out.stdout)) {
      const swap = await runShell('[ -f "$1" ] && echo yes', [join(parent, "memory.swap.max")]);
      return {
        mode: "cgroup2",
        reason: `cgroup v2: a cgroup per tree under ${under}`,
        parents: { unified: parent },
        swapFile: swap.stdout.trim() === "yes",
        cpu: /\bcpu\b/.test(out.stdout),
      };
    }
    why.push(`${under}: ${(out.stderr.trim() || out.stdout.trim()).slice(0, 160)}`);
    await runShell(REMOVE_CGROUPS, [parent]);
  }
  return {
    why: `cgroup v2 has no writable subtree with the pids and memory controllers here (${
      why.join("; ")
    }); run the daemon in a delegated cgroup (e.g. systemd-run --user --scope -p Delegate=yes)`,
  };
}

/**
 * Gives `$1`'s controllers to `$2` (made, its leftovers removed, its CPU weight `$3`) and
 * prints what `$2` gives its children. Only the daemon's own cgroup (`$4` = `own`) gets
 * controllers enabled; the one above is used only as it is (its other children are not ours).
 */
const ENABLE_V2 = `${RM_CG}
at=$1; p=$2
if ! grep -qw pids "$at/cgroup.subtree_control" || ! grep -qw memory "$at/cgroup.subtree_control"; then
  [ "$4" = own ] || { echo "its subtree lacks the pids or memory controller" >&2; exit 1; }
  printf '+pids +memory\\n' > "$at/cgroup.subtree_control" || exit 1
fi
mkdir -p "$p" || exit 1
rm_children "$p"
want=
for c in pids memory cpu; do grep -qw "$c" "$p/cgroup.controllers" && want="$want +$c"; done
[ -n "$want" ] && printf '%s\\n' "$want" > "$p/cgroup.subtree_control"
[ -f "$p/cpu.weight" ] && printf '%s\\n' "$3" > "$p/cpu.weight"
cat "$p/cgroup.subtree_control"`;

/** rlimits: RLIMIT_NPROC counts every task of the real uid, so it is set above their count now. */
async function rlimitPlan(settings: LimitSettings, why: string): Promise<LimitsPlan> {
  const out = await runShell('u=$(id -u); echo "$u"; ps -e -L -o uid= | grep -c "^ *$u$"').catch(
    () => ({ code: 1, stdout: "", stderr: "" }),
  );
  const [uid, count] = out.stdout.trim().split("\n").map(Number);
  const nproc = uid > 0 && Number.isInteger(count) ? count + settings.maxProcesses : null;
  const processes = nproc === null
    ? "no process limit (RLIMIT_NPROC does not bind uid 0)"
    : `at most ${nproc} tasks of uid ${uid} (its ${count} now + ${settings.maxProcesses})`;
  return {
    mode: "rlimit",
    reason: `rlimits, since ${why}: ${
      formatBytes(settings.memoryBytes)
    } address space a process, ${processes}, no CPU weight`,
    settings,
    parents: {},
    swapFile: false,
    cpu: false,
    nproc,
    next: 1,
  };
}

/**
 * Kills what is left in this daemon's cgroups and removes them (at exit; a SIGKILLed daemon's
 * are removed by the next start). Never throws.
 */
export async function closeLimits(plan: LimitsPlan): Promise<void> {
  const parents = Object.values(plan.parents);
  if (parents.length === 0) return;
  const args = parents.flatMap((parent) => ["-r", parent, parent]);
  await runShell(REMOVE_CGROUPS, args).catch(() => {});
}
