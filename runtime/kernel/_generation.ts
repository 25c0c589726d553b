/**
 * One kernel generation: what a supervisor is given, how it starts a generation's worker (with
 * `workspace.run` built in) and what it records for it.
 *
 * @module
 */

import type { BehaviorRef, Logger } from "../core/mod.ts";
import type { ProcessRole, RoleFingerprint } from "./_fingerprint.ts";
import type { WorkbenchHandle } from "./_handle.ts";
import { type LoadedSkills, type SkillRoots } from "./_skills.ts";
import type { InitReply, WorkbenchExit } from "./_types.ts";
import { bindRpcs, type BoundRpc } from "./_rpc_registry.ts";
import { spawnWorkbench, type WorkbenchOptions } from "./_spawn.ts";
import { type SandboxBase, workerReadOnly } from "../sandbox/mod.ts";
import { workspaceRunRpc } from "./_workspace_rpc.ts";

/** What `recordGeneration` is given before a new generation runs anything. */
export interface GenerationRecord {
  /** The generation number, one more than the last recorded one. */
  generation: number;
  /** Why it was started (`start`, the `reset` reason, or what ended the previous one). */
  reason: string;
  /** The revision of the skill set it was given. */
  skillsRevision: string;
  /** The behaviour release it was pinned to, or null. */
  behaviorRevision: string | null;
  /** Always false: a new generation starts with an empty heap. */
  heapRestored: false;
  /** The worker's pid (= its process group). */
  pid: number;
  /** What the process loaded, as it reported at `init`, with what it was given. */
  fingerprint: RoleFingerprint;
}

type Awaitable<T> = T | Promise<T>;

/** Options of {@linkcode KernelSupervisor}. */
export interface KernelSupervisorOptions {
  /** The interpreter to run (`resolvePython` finds the real one). */
  python: string;
  /** The session the generations belong to. */
  session: string;
  /** The role its processes play, named in their fingerprints. @default "workbench" */
  role?: ProcessRole;
  /** The workspace: the worker's cwd and the root of `workspace.run`. */
  workspace: string;
  /** The checkout holding `workbench/`. */
  repoRoot: string;
  /** The skill roots, read afresh at every spawn. */
  skillRoots: SkillRoots;
  /** The behaviour release to pin each new generation to. @default none */
  behavior?: () => Awaitable<{ revision: string; path: string } | null>;
  /** The number of the first generation this supervisor spawns. @default 1 */
  firstGeneration?: number;
  /** Durably records a generation; awaited before the generation is used. */
  recordGeneration: (record: GenerationRecord) => Awaitable<void>;
  /** Sees each skill load (for logs and `doctor`). */
  onSkillsLoaded?: (skills: LoadedSkills) => void;
  /** Sees each generation's end. */
  onExit?: (generation: number, exit: WorkbenchExit) => void;
  /** More host RPCs, bound (e.g. `local.send`); `workspace.run` is built in. */
  rpc?: BoundRpc[];
  /** Byte cap of each output stream of a `workspace.run`. @default 1 MiB */
  runOutputCapBytes?: number;
  /**
   * Waits for a process slot before each `workspace.run` and returns its release, so the
   * daemon's process budget covers these children. @default no limit
   */
  runSlot?: (signal: AbortSignal) => Promise<() => void>;
  /** The programs `workspace.run` may start (`KLBR_RUN_PROGRAMS`). @default any */
  runPrograms?: string[];
  /**
   * The state directory: never bound into a confined worker, refused as a `workspace.run`
   * cwd and named to the worker so its workspace API refuses it too.
   */
  stateDir?: string;
  /** Confines the worker and every `workspace.run` program. @default unconfined */
  sandbox?: SandboxBase;
  /** Workbench process settings (frame cap, grace and deadlines, `PATH`). */
  workbench?: Omit<WorkbenchOptions, "cwd" | "repoRoot" | "rpc" | "role" | "log" | "onExit">;
  /** Where unexpected RPC failures are logged, with their stack. @default stderr */
  log?: Logger;
}

/**
 * Spawns the worker of generation `generation`: in the real workspace, with `workspace.run`
 * and the supervisor's RPCs, confined when a sandbox is given.
 *
 * @throws {KlbrError} from `spawnWorkbench` when the interpreter cannot be started.
 */
export function spawnGenerationWorker(
  o: KernelSupervisorOptions,
  generation: number,
  at: { workspace: string; deny: string[]; behavior: BehaviorRef | null },
): WorkbenchHandle {
  const { workspace, deny, behavior } = at;
  const run = bindRpcs([workspaceRunRpc], {
    options: {
      root: workspace,
      outputCapBytes: o.runOutputCapBytes,
      env: { PATH: o.workbench?.env?.PATH },
      programs: o.runPrograms,
      deny,
      sandbox: o.sandbox,
    },
    runSlot: o.runSlot,
  });
  return spawnWorkbench(o.python, {
    ...o.workbench,
    cwd: workspace,
    repoRoot: o.repoRoot,
    rpc: [...run, ...o.rpc ?? []],
    role: o.role ?? "workbench",
    log: o.log,
    onExit: (exit) => o.onExit?.(generation, exit),
    sandbox: o.sandbox === undefined ? undefined : {
      base: o.sandbox,
      readOnly: workerReadOnly(o.stateDir, behavior, o.skillRoots),
    },
  });
}

/** The record of a generation that answered `init`: what it was given and what it loaded. */
export function generationRecord(
  o: KernelSupervisorOptions,
  started: {
    generation: number;
    reason: string;
    skills: LoadedSkills;
    behavior: BehaviorRef | null;
    info: InitReply;
  },
): GenerationRecord {
  const { generation, reason, skills, behavior, info } = started;
  return {
    generation,
    reason,
    skillsRevision: skills.payload.revision,
    behaviorRevision: behavior?.revision ?? null,
    heapRestored: false,
    pid: info.pid,
    fingerprint: {
      ...info.fingerprint,
      role: o.role ?? "workbench",
      generation,
      pid: info.pid,
      skills: skills.payload.revision,
      release: behavior?.revision ?? null,
      loadedAt: Date.now(),
    },
  };
}
