/**
 * The owner of a session's current kernel generation: spawns, records and replaces
 * workbench processes, and routes cells to the live one.
 *
 * @module
 */

import { type HookName, KlbrError } from "../core/mod.ts";
import { type LoadedSkills, loadSkills, type SkillRoots } from "./_skills.ts";
import { runInWorkspace } from "./_workspace_run.ts";
import { type CellResult, hostEndedResult } from "./_parts.ts";
import type { WorkbenchHandle } from "./_handle.ts";
import type { ExecuteOptions, RpcHandler, WorkbenchExit } from "./_types.ts";
import { spawnWorkbench, type WorkbenchOptions } from "./_spawn.ts";

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
}

type Awaitable<T> = T | Promise<T>;

/** Options of {@linkcode KernelSupervisor}. */
export interface KernelSupervisorOptions {
  /** The interpreter to run (`resolvePython` finds the real one). */
  python: string;
  /** The session the generations belong to. */
  session: string;
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
  /** More RPC handlers (e.g. `local.send`); `workspace.run` is built in. */
  rpc?: Record<string, RpcHandler>;
  /** Byte cap of each output stream of a `workspace.run`. @default 1 MiB */
  runOutputCapBytes?: number;
  /**
   * Waits for a process slot before each `workspace.run` and returns its release, so the
   * daemon's process budget covers these children. @default no limit
   */
  runSlot?: (signal: AbortSignal) => Promise<() => void>;
  /** Workbench process settings (frame cap, grace and deadlines, `PATH`). */
  workbench?: Omit<WorkbenchOptions, "cwd" | "repoRoot" | "rpc" | "onExit">;
}

/**
 * Owns the current kernel generation of one session.
 *
 * A generation is spawned lazily on first use, and again after the previous one died
 * (killed by the cancellation ladder, a framing failure, an exit) or on `reset`. Each spawn
 * reads the skill roots afresh and awaits `recordGeneration` before the worker runs a cell,
 * so a skill written during a turn is offered from the next generation on.
 *
 * @example
 * ```ts
 * const kernel = new KernelSupervisor({ python, session: "default", workspace, repoRoot,
 *   skillRoots, recordGeneration: (g) => store.recordGeneration(g) });
 * const result = await kernel.execute("cell_01…", "print(1 + 1)");
 * ```
 */
export class KernelSupervisor {
  readonly #options: KernelSupervisorOptions;
  #current: WorkbenchHandle | null = null;
  #generation: number;
  #spawning: Promise<WorkbenchHandle> | null = null;
  #nextReason = "start";
  #closed = false;

  /** Creates a supervisor; nothing is spawned until first use. */
  constructor(options: KernelSupervisorOptions) {
    this.#options = options;
    this.#generation = (options.firstGeneration ?? 1) - 1;
  }

  /** The number of the last recorded generation (0 before the first spawn). */
  get generation(): number {
    return this.#generation;
  }

  /** The live workbench, or null when none is running. */
  get current(): WorkbenchHandle | null {
    return this.#current?.alive ? this.#current : null;
  }

  /**
   * Returns the live workbench, spawning and recording a new generation when there is none.
   * @throws {KlbrError} `shutting_down` after `shutdown`; `worker_failed` when the spawn or
   * `init` fails; whatever `recordGeneration` throws (the new worker is then killed).
   */
  ready(): Promise<WorkbenchHandle> {
    if (this.#closed) {
      return Promise.reject(
        new KlbrError(
          "shutting_down",
          `cannot start a kernel: the supervisor is shut down (got session ${this.#options.session})`,
        ),
      );
    }
    if (this.#current?.alive) return Promise.resolve(this.#current);
    this.#spawning ??= this.#replace().finally(() => {
      this.#spawning = null;
    });
    return this.#spawning;
  }

  /**
   * Runs a cell on the live generation (spawned, and its generation recorded, first). The
   * caller records the cell before and its outcome after: this module never touches the
   * store. A worker that dies under the cell gives outcome `killed` (the error names the
   * cause) and is replaced at the next use.
   * @throws {KlbrError} what `ready` throws.
   */
  async execute(cell: string, code: string, options: ExecuteOptions = {}): Promise<CellResult> {
    const wb = await this.ready();
    const started = performance.now();
    let result: CellResult;
    try {
      result = await wb.execute(cell, code, options);
    } catch (error) {
      if (!(error instanceof KlbrError)) throw error;
      const failed = hostEndedResult(
        "killed",
        error.message,
        "",
        "",
        performance.now() - started,
      );
      const code = error.code === "worker_failed" && error.cause instanceof KlbrError
        ? error.cause.code
        : error.code;
      result = error.code === "worker_failed"
        ? { ...failed, error: { type: code, message: error.message, traceback: "" } }
        : {
          ...failed,
          outcome: "error",
          error: { type: code, message: error.message, traceback: "" },
        };
    }
    return result;
  }

  /**
   * Runs a policy hook on the live generation.
   * @throws {KlbrError} `hook_failed`, `worker_timeout` or `worker_failed` (see the handle).
   */
  async hook(name: HookName, args: Record<string, unknown>, options: { timeoutMs?: number } = {}) {
    return await (await this.ready()).hook(name, args, options);
  }

  /** Runs the cancellation ladder on a running cell; `false` when it was not running. */
  async cancel(target: string): Promise<boolean> {
    return (await this.current?.cancel(target)) ?? false;
  }

  /**
   * Kills the current generation (its running cell ends `killed`) and starts the next one,
   * recorded with `reason` and `heapRestored: false`.
   * @throws {KlbrError} as {@linkcode KernelSupervisor.ready}.
   */
  async reset(reason: string): Promise<GenerationRecord> {
    await this.#spawning?.catch(() => {});
    const old = this.#current;
    this.#current = null;
    this.#nextReason = reason;
    if (old) await old.kill(`reset: ${reason}`);
    await this.ready();
    return this.#lastRecord!;
  }

  /** Shuts the current worker down; later calls to `ready` are refused. */
  async shutdown(): Promise<void> {
    this.#closed = true;
    await this.#spawning?.catch(() => {});
    const old = this.#current;
    this.#current = null;
    await old?.shutdown();
  }

  #lastRecord: GenerationRecord | null = null;

  /** Retires a dead current worker (its group is dead first), then spawns the next one. */
  async #replace(): Promise<WorkbenchHandle> {
    const old = this.#current;
    if (old) {
      this.#current = null;
      const ending = old.ending;
      if (ending) this.#nextReason = `${ending.reason}: ${ending.message}`;
      await old.exited;
    }
    return await this.#spawn(this.#nextReason);
  }

  async #spawn(reason: string): Promise<WorkbenchHandle> {
    const o = this.#options;
    const generation = this.#generation + 1;
    const skills = await loadSkills(o.skillRoots);
    o.onSkillsLoaded?.(skills);
    const behavior = (await o.behavior?.()) ?? null;
    const workspace = await Deno.realPath(o.workspace);
    const cap = o.runOutputCapBytes;
    const rpc: Record<string, RpcHandler> = {
      "workspace.run": async (params, ctx) => {
        const release = await o.runSlot?.(ctx.signal);
        try {
          return await runInWorkspace(params as Parameters<typeof runInWorkspace>[0], {
            root: workspace,
            signal: ctx.signal,
            outputCapBytes: cap,
            env: { PATH: o.workbench?.env?.PATH },
          });
        } finally {
          release?.();
        }
      },
      ...o.rpc,
    };
    const wb = spawnWorkbench(o.python, {
      ...o.workbench,
      cwd: workspace,
      repoRoot: o.repoRoot,
      rpc,
      onExit: (exit) => o.onExit?.(generation, exit),
    });
    try {
      const info = await wb.init({
        generation,
        session: o.session,
        workspace,
        skills: skills.payload,
        behavior,
      });
      const record: GenerationRecord = {
        generation,
        reason,
        skillsRevision: skills.payload.revision,
        behaviorRevision: behavior?.revision ?? null,
        heapRestored: false,
        pid: info.pid,
      };
      await o.recordGeneration(record);
      if (!wb.alive) {
        throw new KlbrError(
          "worker_failed",
          `cannot start generation ${generation}: the worker ended during init`,
        );
      }
      this.#generation = generation;
      this.#lastRecord = record;
      this.#current = wb;
      this.#nextReason = "start";
      return wb;
    } catch (error) {
      await wb.kill(`generation ${generation} did not start`);
      throw error;
    }
  }
}
