/**
 * The owner of a session's current kernel generation: spawns, records and replaces
 * workbench processes, and routes cells to the live one.
 *
 * @module
 */

import { type HookName, KlbrError } from "../core/mod.ts";
import { type PrepareArgs, prepareMessages } from "./_prepare_messages.ts";
import { loadSkills } from "./_skills.ts";
import { type CellResult, hostEndedResult } from "./_parts.ts";
import type { WorkbenchHandle } from "./_handle.ts";
import { environmentChange, type RoleFingerprint, type WorkerFingerprint } from "./_fingerprint.ts";
import type { ExecuteOptions, HookOptions } from "./_types.ts";
import {
  type GenerationRecord,
  generationRecord,
  type KernelSupervisorOptions,
  spawnGenerationWorker,
} from "./_generation.ts";

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
  /** Requests in flight per worker, so a retired worker ends only when they are done. */
  #users = new Map<WorkbenchHandle, number>();
  /** Retired workers still finishing their requests; `shutdown` waits for them. */
  #retired = new Set<Promise<unknown>>();

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

  /** The fingerprint of the live generation, or null when none is running. */
  get fingerprint(): RoleFingerprint | null {
    return this.current === null ? null : this.#lastRecord?.fingerprint ?? null;
  }

  /**
   * Says why the live generation no longer matches `current` (the interpreter or the
   * package on disk), or returns null when it does or none is running.
   */
  staleAgainst(current: WorkerFingerprint): string | null {
    const loaded = this.fingerprint;
    return loaded === null ? null : environmentChange(loaded, current);
  }

  /**
   * Asks the live generation (spawned first when there is none) for a fingerprint of what is
   * on disk now.
   * @throws {KlbrError} what `ready` throws; `worker_failed` when the worker does not answer.
   */
  async probe(): Promise<WorkerFingerprint> {
    return await this.#use((wb) => wb.fingerprint().then((reply) => reply.current));
  }

  /**
   * Replaces the live generation at its next boundary: requests already running on it
   * finish there, the next request starts a new generation (recorded with `reason`), and the
   * old process is shut down once it is idle. Nothing is killed.
   */
  retire(reason: string): void {
    const old = this.#current;
    if (old === null) return;
    this.#current = null;
    this.#nextReason = reason;
    if (!this.#users.has(old)) this.#endRetired(old);
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
    try {
      return await this.#with(wb, () => wb.execute(cell, code, options));
    } catch (error) {
      if (!(error instanceof KlbrError)) throw error;
      const failed = error.code === "worker_failed";
      const type = failed && error.cause instanceof KlbrError ? error.cause.code : error.code;
      return {
        ...hostEndedResult("killed", error.message, "", "", performance.now() - started),
        outcome: failed ? "killed" : "error",
        error: { type, message: error.message, traceback: "" },
      };
    }
  }

  /**
   * Runs a policy hook on the live generation, from `options.behavior` when given (else the
   * release the generation was given at `init`). `context.prepare`'s messages go beside its
   * other arguments, and come back as the host's own when the hook left them unchanged
   * (`prepareMessages`).
   * @throws {KlbrError} `hook_failed`, `worker_timeout` or `worker_failed` (see the handle).
   */
  async hook(name: HookName, args: Record<string, unknown>, options: HookOptions = {}) {
    return await this.#use<unknown>((wb) =>
      name === "context.prepare" && Array.isArray(args.messages)
        ? prepareMessages(
          args as PrepareArgs,
          (fields) => wb.hook(name, fields.args, { ...options, messages: fields.messages }),
        )
        : wb.hook(name, args, options)
    );
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

  /** Shuts the current worker and any retired one down; later calls to `ready` are refused. */
  async shutdown(): Promise<void> {
    this.#closed = true;
    await this.#spawning?.catch(() => {});
    const old = this.#current;
    this.#current = null;
    await old?.shutdown();
    for (const wb of this.#users.keys()) if (wb !== old) await wb.kill("supervisor shut down");
    await Promise.all(this.#retired);
  }

  /**
   * Takes requests again after {@linkcode shutdown} (the operator's `resume` after a `drain`):
   * the next use spawns and records a new generation. Does nothing while it is open.
   */
  reopen(): void {
    if (!this.#closed) return;
    this.#closed = false;
    this.#nextReason = "resumed after a drain";
  }

  #lastRecord: GenerationRecord | null = null;

  /**
   * Runs `fn` on the live worker, counted as its user from this call on (a live worker is
   * counted at once, so a `retire` right after lets the request finish there).
   */
  #use<T>(fn: (wb: WorkbenchHandle) => Promise<T>, attempts = 3): Promise<T> {
    const live = !this.#closed && this.#current?.alive ? this.#current : null;
    if (live !== null) return this.#with(live, () => fn(live));
    return this.ready().then((wb) =>
      wb === this.#current || attempts <= 1
        ? this.#with(wb, () => fn(wb))
        : this.#use(fn, attempts - 1)
    );
  }

  /** Counts a request on `wb`; a retired `wb` is shut down when its last request ends. */
  async #with<T>(wb: WorkbenchHandle, fn: () => Promise<T>): Promise<T> {
    this.#users.set(wb, (this.#users.get(wb) ?? 0) + 1);
    try {
      return await fn();
    } finally {
      const left = this.#users.get(wb)! - 1;
      if (left > 0) this.#users.set(wb, left);
      else {
        this.#users.delete(wb);
        if (wb !== this.#current) this.#endRetired(wb);
      }
    }
  }

  #endRetired(wb: WorkbenchHandle): void {
    if (!wb.alive) return;
    const ending = wb.shutdown().finally(() => this.#retired.delete(ending));
    this.#retired.add(ending);
  }

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

  /** Starts the next generation: recorded before it is used, killed if it cannot start. */
  async #spawn(reason: string): Promise<WorkbenchHandle> {
    const o = this.#options;
    const generation = this.#generation + 1;
    const skills = await loadSkills(o.skillRoots);
    o.onSkillsLoaded?.(skills);
    const behavior = (await o.behavior?.()) ?? null;
    const workspace = await Deno.realPath(o.workspace);
    const deny = o.stateDir === undefined ? [] : [o.stateDir];
    const wb = spawnGenerationWorker(o, generation, { workspace, deny, behavior });
    try {
      const info = await wb.init({
        generation,
        session: o.session,
        workspace,
        deny,
        skills: skills.payload,
        behavior,
      });
      const record = generationRecord(o, { generation, reason, skills, behavior, info });
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
