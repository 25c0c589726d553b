/**
 * The worker processes of one daemon session: its workbench (each generation recorded
 * durably, its skills told to the session) and its hook worker (its generations logged), both
 * kernel supervisors given the session's active release; and the boundary check that replaces
 * a role whose interpreter or package changed on disk — the hook worker once it is idle, the
 * workbench by a new generation (its heap is lost: the code it ran is gone).
 *
 * @module
 */

import { currentGeneration, startGeneration } from "../../store/tables/kernel_generations.ts";
import { appendEvent } from "../../store/tables/events.ts";
import {
  type BoundRpc,
  type GenerationRecord,
  KernelSupervisor,
  type LoadedSkills,
  replaceStaleRoles,
  roleLoadedBody,
} from "../kernel/mod.ts";
import type { SandboxBase } from "../sandbox/mod.ts";
import type { Session, SessionOptions, SessionWorkers } from "../session/mod.ts";

/** What every session of the daemon is built from: the session's options and its processes'. */
export interface SessionDeps extends SessionOptions {
  python: string;
  repoRoot: string;
  /** Waits for a process slot before each `workspace.run` of the session's cells. */
  runSlot?: (session: string) => (signal: AbortSignal) => Promise<() => void>;
  /** Confines every worker and `workspace.run` program; undefined runs them unconfined. */
  sandbox?: SandboxBase;
  /** The state directory's real path: never part of a worker's workspace. */
  stateDir?: string;
  /** What of the workspace cells may not change; `code.patch` refuses it too. */
  protect?: string[];
  /** The programs `workspace.run` may start (`KLBR_RUN_PROGRAMS`); undefined means any. */
  runPrograms?: string[];
}

/**
 * One session's workbench and hook worker, as kernel supervisors.
 *
 * @example
 * ```ts
 * const session = new Session(id, deps, (s) => new DaemonWorkers(deps, s, rpcOf(s)));
 * ```
 */
export class DaemonWorkers implements SessionWorkers {
  /** The workbench: cells run here, one generation after another. */
  readonly kernel: KernelSupervisor;
  /** The hook worker: policy hooks run here, never in the workbench. */
  readonly hooks: KernelSupervisor;
  readonly #deps: SessionDeps;
  readonly #session: Session;

  /** Builds both supervisors; no process starts before the first use. */
  constructor(deps: SessionDeps, session: Session, rpc: BoundRpc[]) {
    this.#deps = deps;
    this.#session = session;
    this.kernel = new KernelSupervisor({
      ...this.#base(),
      role: "workbench",
      firstGeneration: (currentGeneration(deps.store, session.id)?.generation ?? 0) + 1,
      onSkillsLoaded: this.#skillsLoaded.bind(this),
      recordGeneration: this.#workbenchGeneration.bind(this),
      rpc,
      runSlot: deps.runSlot?.(session.id),
    });
    this.hooks = new KernelSupervisor({
      ...this.#base(),
      role: "hooks",
      recordGeneration: this.#hookGeneration.bind(this),
    });
  }

  /**
   * Replaces each process role whose interpreter or package changed on disk: the hook worker
   * once it is idle, the workbench by a new generation. Called only between frames.
   */
  async refreshRoles(): Promise<void> {
    const replaced = await replaceStaleRoles(this.hooks, [
      { role: "hooks", supervisor: this.hooks, replace: "retire" },
      { role: "workbench", supervisor: this.kernel, replace: "reset" },
    ]);
    for (const { role, change } of replaced) {
      this.#deps.log.info("role.stale", `${role}: ${change}; replaced`, { role });
    }
  }

  /** What both workers share: they run the same package, each given the active release. */
  #base() {
    const deps = this.#deps;
    return {
      python: deps.python,
      session: this.#session.id,
      workspace: deps.workspace,
      repoRoot: deps.repoRoot,
      skillRoots: deps.skillRoots,
      behavior: this.#release.bind(this),
      sandbox: deps.sandbox,
      stateDir: deps.stateDir,
      runPrograms: deps.runPrograms,
    };
  }

  /** The release a worker loads at spawn: the session's active one. */
  #release(): { revision: string; path: string } {
    const { releaseId, path } = this.#session.activeRelease();
    return { revision: releaseId, path };
  }

  /** A workbench generation loaded its skills: the session's contract names them. */
  #skillsLoaded(skills: LoadedSkills): void {
    this.#session.skillsLoaded(skills.payload);
  }

  /** A workbench generation is recorded durably (`kernel.reset`), and what it loaded. */
  #workbenchGeneration(record: GenerationRecord): void {
    startGeneration(this.#deps.store, {
      session: this.#session.id,
      reason: record.reason,
      skillsRevision: record.skillsRevision,
      behaviorRevision: record.behaviorRevision,
    });
    this.#roleLoaded(record);
  }

  /** A hook worker's generation is logged, not recorded as a kernel generation. */
  #hookGeneration(record: GenerationRecord): void {
    this.#deps.log.info(
      "hooks.generation",
      `hook worker generation ${record.generation} (${record.reason})`,
      { generation: record.generation, reason: record.reason },
    );
    this.#roleLoaded(record);
  }

  /** Records a role's new process (`role.loaded`): what it loaded and was given. */
  #roleLoaded(record: GenerationRecord): void {
    appendEvent(this.#deps.store, this.#session.id, "role.loaded", roleLoadedBody(record));
  }
}
