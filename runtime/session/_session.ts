/**
 * One running session: the owner of its running frame, the release that frame is pinned to,
 * its running cells, its hook counters and its offered skills, and of the loop
 * ({@linkcode SessionRuntime}) that takes its frames. The host RPCs and the operator commands
 * act on it through named methods; its ports (the provider, the hook worker, the workbench)
 * are reached only through the named wrappers `meteredProvider`, `TracedHooks` and
 * `CancellableKernel`.
 *
 * `SessionRuntime` stays a class of its own under `Session`: it is the durable frame loop
 * (plans, frames, retries, expiry, continuation) and knows nothing of processes, releases or
 * skills; `Session` is what one turn of that loop runs with. Together they would pass the
 * 400-line limit, and the loop is tested alone with a scripted turn.
 *
 * @module
 */

import { appendEvent } from "../../store/tables/events.ts";
import { activateRelease, getRelease, markLastGood } from "../../store/tables/releases.ts";
import { requireSession } from "../../store/tables/sessions.ts";
import { verifyRelease } from "../../store/maintenance/snapshot_hash.ts";
import type { Compaction } from "../../store/tables/context_summaries.ts";
import type { FrameRecord } from "../../store/tables/frames.ts";
import { DEFAULT_CELL_TIMEOUT_MS, faultPoint, KlbrError } from "../core/mod.ts";
import { compactContext, repairContext } from "../context/mod.ts";
import type { Route } from "../config/mod.ts";
import { loadSkills, type SkillChange } from "../kernel/mod.ts";
import { contractMessage, isMaintenanceInput, type OfferedSkills } from "./_contract.ts";
import type { RunningFrame } from "./_local_send.ts";
import { runModelTurn } from "./_model_turn.ts";
import { CancellableKernel, meteredProvider, type MeterScope } from "./_port_wrappers.ts";
import { adaptedRoutes } from "./_route_mode.ts";
import { SessionRuntime } from "./_session_runtime.ts";
import type {
  HookWorkerPort,
  SessionOptions,
  SessionWorkers,
  WorkbenchPort,
} from "./_session_ports.ts";
import { type HookCounters, type Pin, TracedHooks } from "./_traced_hooks.ts";
import type { ModelTurnOptions } from "./_turn_scope.ts";
import type { HookCaller, TurnContext, TurnResult } from "./_turn_types.ts";

/** One activation request: the release, the epoch it expects, and why. */
export interface Activation {
  releaseId: string;
  expectedEpoch: number;
  reason: string;
}

/** The frame whose turn is running, as the RPCs and the jobs it starts see it. */
export interface Frame extends RunningFrame {
  policyRevision: string;
}

/**
 * One session's state and its turn.
 *
 * @example
 * ```ts
 * const session = new Session("default", options, (s) => new DaemonWorkers(deps, s));
 * session.start(recoverSession(store, "default", { log }));
 * session.cancelCell("cell_…");
 * ```
 */
export class Session {
  /** The session's id. */
  readonly id: string;
  /** The loop that takes this session's frames. */
  readonly runtime: SessionRuntime;
  /** The workbench port. */
  readonly kernel: WorkbenchPort;
  /** The hook-worker port. */
  readonly hooks: HookWorkerPort;
  readonly #o: SessionOptions;
  readonly #workers: SessionWorkers;
  readonly #cells: CancellableKernel;
  /** What each turn of this session runs with (`runModelTurn`). */
  readonly #turnOptions: ModelTurnOptions;
  /** The active release: hooks between turns come from it; activation replaces it. */
  #active: { releaseId: string; path: string };
  /** The release the running turn is pinned to (its frame's); null between turns. */
  #pin: Pin | null = null;
  #frame: Frame | null = null;
  #counters: HookCounters = { calls: 0, failures: 0 };
  #skills: OfferedSkills | null = null;
  #skillsChanged: SkillChange | null = null;
  #maintenance = false;

  /** Builds the session; `workers` makes its worker processes (given the session they serve). */
  constructor(id: string, options: SessionOptions, workers: (session: Session) => SessionWorkers) {
    this.id = id;
    this.#o = options;
    this.#active = { releaseId: options.behavior.releaseId, path: options.behavior.path };
    this.#workers = workers(this);
    this.kernel = this.#workers.kernel;
    this.hooks = this.#workers.hooks;
    this.#cells = new CancellableKernel(this.kernel);
    this.#turnOptions = {
      ...options,
      provider: meteredProvider(options.provider, {
        meter: options.meter,
        scope: this.meterScope.bind(this),
      }),
      hooks: this.hookCaller.bind(this),
      system: this.#contract.bind(this),
      kernel: this.#cells,
    };
    this.runtime = new SessionRuntime({
      ...options,
      session: id,
      hooks: this.hookCaller.bind(this),
      turn: this.#runTurn.bind(this),
      boundary: this.#boundary.bind(this),
      configPath: options.configPath ?? null,
    });
  }

  /** Starts the loop, continuing first the frames recovery adopted. */
  start(resumed: FrameRecord[]): void {
    this.runtime.resumeFrames(resumed);
  }

  /** Wakes the loop: new inputs, or a release that may plan what a broken one left. */
  wake(): void {
    this.runtime.wake();
  }

  /** The frame whose turn is running, for routing sends; null between turns. */
  runningFrame(): Frame | null {
    return this.#frame;
  }

  /** The active release (the workers load it at spawn). */
  activeRelease(): { releaseId: string; path: string } {
    return this.#active;
  }

  /** The release a cell's hooks come from: its turn's pin, the active one outside a turn. */
  pinnedRelease(): { releaseId: string; frameId: string | null } {
    const pin = this.#pin ?? { frameId: null, ...this.#active };
    return { releaseId: pin.releaseId, frameId: pin.frameId };
  }

  /** Who a model call is charged to now: this session and its running frame. */
  meterScope(): MeterScope {
    return { session: this.id, frameId: this.#frame?.id ?? null };
  }

  /** The hook caller of the running turn's pinned release, else of the active one. */
  hookCaller(): HookCaller {
    const { store, log, hookRunning } = this.#o;
    return new TracedHooks({
      store,
      log,
      session: this.id,
      hooks: this.hooks,
      counters: this.#counters,
      running: hookRunning,
    }, this.#pin ?? { frameId: null, ...this.#active });
  }

  /**
   * Cancels one running cell of this session's turn: the worker's cancellation ladder ends it
   * `cancelled`, the model is told so, and the turn goes on.
   *
   * @throws {KlbrError} `not_found` when no cell of that id is running.
   */
  cancelCell(cellId: string): void {
    this.#cells.cancel(cellId);
  }

  /**
   * Activates a published release. It applies from the next frame: a running turn keeps the
   * release its frame recorded for every hook call until it ends. The workbench heap is kept;
   * only the hook worker is replaced, when it is idle. The one path of the operator's
   * `activate`/`rollback` and the agent's `behavior.activate`/`rollback`.
   *
   * @returns the new epoch
   * @throws {KlbrError} `not_found` for a release never published, `release_invalid` when it no
   * longer verifies, `epoch_moved` when the epoch is not `expectedEpoch`.
   */
  async activate(activation: Activation): Promise<number> {
    const { store } = this.#o;
    const { releaseId, expectedEpoch, reason } = activation;
    const release = getRelease(store, releaseId);
    if (release === undefined) {
      throw new KlbrError(
        "not_found",
        `cannot activate release ${
          releaseId.slice(0, 12)
        }: it was never published (got ${releaseId})`,
      );
    }
    await verifyRelease(release.path);
    const session = this.id;
    const { epoch } = activateRelease(store, { session, expectedEpoch, releaseId, reason });
    // The epoch swap is durable; the hook worker still runs the old release.
    faultPoint("activation-during-cell");
    this.#active = { releaseId, path: release.path };
    this.hooks.retire(`behaviour activated: release ${releaseId.slice(0, 12)} at epoch ${epoch}`);
    // Inputs a broken hook left pending get a fresh try under the new release.
    this.runtime.wake();
    return epoch;
  }

  /** The skills the contract offers, or null before a generation loaded them. */
  get skills(): OfferedSkills | null {
    return this.#skills;
  }

  /** A workbench generation loaded `skills`: the contract names them. */
  skillsLoaded(skills: OfferedSkills): void {
    this.#skills = { revision: skills.revision, bodies: skills.bodies };
  }

  /** A cell wrote or deleted a managed skill: the next boundary offers the changed set. */
  skillsChanged(change: SkillChange): void {
    this.#skillsChanged = change;
  }

  /** The operator's `compact`: extractive (no model, no hook), keeping the newest 20 items. */
  compact(): Promise<Compaction | undefined> {
    return compactContext(this.#o, this.id, { keep: { items: 20 }, model: false });
  }

  /** The operator's `repair`: every item becomes an extractive summary (no model, no hook). */
  repair(reason: string): Promise<Compaction | undefined> {
    return repairContext(this.#o, this.id, { by: "operator", reason });
  }

  /** The session's part of `status` and `/health`: its loop, release, workers and hook calls. */
  status(): Record<string, unknown> {
    const row = requireSession(this.#o.store, this.id);
    return {
      ...this.runtime.status(),
      head_seq: row.nextSeq - 1,
      behavior_epoch: row.behaviorEpoch,
      active_release: row.activeRelease,
      last_good_release: row.lastGoodRelease,
      kernel_generation: this.kernel.generation,
      hook_calls: this.#counters.calls,
      routes_adapted: adaptedRoutes(this.#o.store, {
        session: this.id,
        routeOf: this.#configuredRoute.bind(this),
      }),
      kernel_alive: this.kernel.current !== null,
      // What each live process role loaded (null when it is not running).
      fingerprints: { workbench: this.kernel.fingerprint, hooks: this.hooks.fingerprint },
    };
  }

  /** A route's configuration, or undefined when `name` is not a configured route. */
  #configuredRoute(name: string): Route | undefined {
    const route = this.#o.provider(name).route;
    return route.name === name ? route : undefined;
  }

  /**
   * Records why the daemon stops (`daemon.stopping`), lets the accepted turn finish within
   * `graceMs` (then stops it, so its cells end `killed` with the outcome recorded), and ends
   * both worker processes.
   */
  async shutdown(graceMs: number, reason: string): Promise<void> {
    try {
      appendEvent(this.#o.store, this.id, "daemon.stopping", { reason, grace_ms: graceMs });
    } catch (error) {
      this.#o.log.error("daemon.record_failed", `cannot record the shutdown: ${error}`);
    }
    const drained = this.runtime.drain();
    const timer = setTimeout(() => void this.runtime.stop(reason), graceMs);
    await drained;
    clearTimeout(timer);
    this.runtime.dispose();
    await this.kernel.shutdown();
    await this.hooks.shutdown();
  }

  /**
   * The session's turn: the model turn, with the running frame exposed for routing and the
   * release marked last good when a whole turn ran with every hook answering.
   */
  async #runTurn(ctx: TurnContext): Promise<TurnResult> {
    await this.#beginTurn(ctx);
    try {
      const result = await runModelTurn(this.#turnOptions, ctx);
      this.#markLastGood(ctx, result);
      return result;
    } finally {
      this.#frame = null;
      this.#pin = null;
      if (this.#maintenance) this.#o.afterMaintenanceTurn?.();
      this.#maintenance = false;
    }
  }

  /** What a turn starts with: its frame exposed, its release pinned. */
  async #beginTurn(ctx: TurnContext): Promise<void> {
    const { id, routing, policyRevision } = ctx.frame;
    this.#frame = { id, routing, policyRevision };
    this.#pin = this.#pinOf(ctx.frame);
    this.#counters.failures = 0;
    this.#maintenance = ctx.inputs.some(isMaintenanceInput);
    // Before the workbench's first generation, name what its first load will offer.
    if (this.kernel.current === null) {
      const skills = await loadSkills(this.#o.skillRoots).then((s) => s.payload, () => null);
      this.#skills = skills && { revision: skills.revision, bodies: skills.bodies };
    }
  }

  /** Pins the turn of `frame` to the release it recorded (the active one if that is gone). */
  #pinOf(frame: TurnContext["frame"]): Pin {
    const release = getRelease(this.#o.store, frame.policyRevision);
    if (release === undefined) {
      this.#o.log.warn(
        "frame.pin",
        `frame ${frame.number} names release ${
          frame.policyRevision.slice(0, 12)
        }, which is not published; its turn uses the active release`,
      );
      return { frameId: frame.id, ...this.#active };
    }
    return { frameId: frame.id, releaseId: release.id, path: release.path };
  }

  /** A whole turn on the active release with every hook answering makes it the last good. */
  #markLastGood(ctx: TurnContext, result: TurnResult): void {
    const { store } = this.#o;
    const row = requireSession(store, this.id);
    if (
      result.ok && this.#counters.failures === 0 &&
      row.activeRelease === ctx.frame.policyRevision &&
      row.lastGoodRelease !== row.activeRelease
    ) {
      markLastGood(store, this.id, row.activeRelease);
    }
  }

  /** The contract message of a request on a route of `maxSteps` steps a turn. */
  #contract(route: { maxSteps: number }): string {
    const cellTimeoutMs = this.#o.cellTimeoutMs ?? DEFAULT_CELL_TIMEOUT_MS;
    return contractMessage(this.#o.workspace, {
      skills: this.#skills,
      maintenance: this.#maintenance,
      limits: { maxSteps: route.maxSteps, cellTimeoutMs },
    });
  }

  /** Between frames: stale roles replaced, then a changed skill set offered. Never rejects. */
  async #boundary(): Promise<void> {
    try {
      await this.#workers.refreshRoles();
      await this.#offerChangedSkills();
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      this.#o.log.warn("session.boundary", `checking process roles failed: ${message}`);
    }
  }

  /**
   * After a cell wrote or deleted a managed skill: the workbench is replaced by a new
   * generation (its heap is lost, and the next request says so), which offers the changed set.
   * Nothing is replaced when no generation is live (the next one loads what is on disk) or when
   * the live one already offers that set.
   */
  async #offerChangedSkills(): Promise<void> {
    const change = this.#skillsChanged;
    if (change === null) return;
    this.#skillsChanged = null;
    if (this.kernel.current === null || this.kernel.fingerprint?.skills === change.revision) return;
    const reason = `skills changed: ${change.action} ${change.id} (revision ${
      change.revision.slice(0, 12)
    })`;
    this.#o.log.info("skills.changed", `${reason}; the workbench starts a new generation`, {
      id: change.id,
      action: change.action,
    });
    await this.kernel.reset(reason);
  }
}
