/**
 * Unattended work of one daemon, put together: the budgets, the timer scheduler, the job
 * runner, child model calls, the RPCs of cells and jobs, the maintenance schedule, and what
 * `status`, `/health` and the operator commands show of them.
 *
 * Everything it admits (fired timers, finished jobs) goes through the coordinator's one
 * admission path, given as `admit`.
 *
 * @module
 */

import { appendEvent } from "../../store/tables/events.ts";
import { getJob, type JobRecord, listJobs } from "../../store/tables/jobs.ts";
import { failOpenModelCalls } from "../../store/tables/model_calls.ts";
import {
  createTimer,
  dueTimerCount,
  listTimers,
  markTimerFired,
  type TimerRecord,
} from "../../store/tables/timers.ts";
import { workCounts } from "../../store/tables/work_counts.ts";
import type { Store } from "../../store/store.ts";
import type { BudgetConfig, CleanupConfig } from "../config/mod.ts";
import type { EventBus, Logger } from "../core/mod.ts";
import type { BoundRpc, KernelSupervisor, RoleFingerprint, SkillRoots } from "../kernel/mod.ts";
import type { SandboxBase } from "../sandbox/mod.ts";
import type { Provider } from "../model/mod.ts";
import { HOST_TIMERS, type TurnHealth } from "../session/mod.ts";
import { Budget } from "./_budget.ts";
import { runChildAgent } from "./_child_agent.ts";
import { timerInput } from "./_inputs.ts";
import { type AdmitFn, JobRunner } from "./_job_runner.ts";
import { jobKernel, runCodeJob } from "./_job_workbench.ts";
import { MaintenanceSchedule } from "./_maintenance.ts";
import { childCall, meteredProvider, type ModelCallDeps } from "./_model_calls.ts";
import { type RpcScope, unattendedRpcsOf } from "./_rpc.ts";
import type { Release } from "./_slots.ts";
import { type HostTimers, TimerScheduler } from "./_timers.ts";
import { jobView, timerView } from "./_views.ts";

/** What the domain is built from. */
export interface JobsOptions {
  store: Store;
  bus: EventBus;
  log: Logger;
  python: string;
  repoRoot: string;
  skillRoots: SkillRoots;
  provider: (route: string) => Provider;
  budget: BudgetConfig;
  cleanup: CleanupConfig;
  /** How long one cell of a child agent may run. */
  cellTimeoutMs: number;
  /**
   * Where jobs report their artifact writes for `/health`, as the agent's turns do (a full disk
   * shows there whoever hit it). Their model calls are not reported: a job's refused or failed
   * call is the job's, not the route's. @default nobody
   */
  health?: TurnHealth;
  /** The coordinator's admission path; `within` runs in the transaction that admits the input. */
  admit: AdmitFn;
  /** The session whose log records maintenance runs. */
  maintenanceSession: string;
  /** Host timers for the scheduler and maintenance; `setTimeout` unless a test injects its own. */
  timers?: HostTimers;
  /** Confines every job's workbench and its `workspace.run` children, as the session's. */
  sandbox?: SandboxBase;
  /** The state directory's real path: never part of a job's workspace. */
  stateDir?: string;
  /** The programs `workspace.run` may start (`KLBR_RUN_PROGRAMS`); undefined means any. */
  runPrograms?: string[];
}

/**
 * The daemon's timers, jobs, child calls and budgets.
 *
 * @example
 * ```ts
 * const jobs = new Jobs({ ...deps, admit: (session, input, within) => coordinator.admitUnattended(…) });
 * jobs.startSession("default");
 * const rpc = jobs.rpcs({ session: "default", frame, release, workspace });
 * ```
 */
export class Jobs {
  /** The daemon's budgets. */
  readonly budget: Budget;
  readonly #o: JobsOptions;
  readonly #scheduler: TimerScheduler;
  readonly #runner: JobRunner;
  readonly #maintenance: MaintenanceSchedule;
  readonly #calls: ModelCallDeps;
  #started = false;

  /** Builds the parts; nothing runs until {@linkcode Jobs.startSession}. */
  constructor(options: JobsOptions) {
    this.#o = options;
    const { store, log } = options;
    const timers = options.timers ?? HOST_TIMERS;
    this.budget = new Budget(store, options.budget);
    this.#calls = {
      store,
      provider: options.provider,
      budget: this.budget,
      overBudget: (job, spent) => this.#runner.overBudget(job, spent),
      timers,
    };
    this.#scheduler = new TimerScheduler({
      store,
      log,
      timers,
      fire: (t) => this.#fire(t),
      // Finished jobs not announced yet are retried with the timers, on the same pause.
      retry: () => this.#runner.announceWaiting(),
    });
    this.#runner = new JobRunner({
      store,
      log,
      budget: this.budget,
      admit: options.admit,
      kernelFor: (job) =>
        jobKernel(this.#workbenchDeps(job), job, this.rpcs(this.#jobScope(job.id))),
      run: (job, kernel, signal) => this.#runJob(job.id, kernel, signal),
      timers,
      retryLater: () => this.#scheduler.retryLater(),
    });
    this.#maintenance = new MaintenanceSchedule({
      store,
      log,
      cleanup: options.cleanup,
      session: options.maintenanceSession,
    }, timers);
  }

  /** The host RPCs of a scope, bound: a session's cells, or a job's workbench. */
  rpcs(scope: RpcScope): BoundRpc[] {
    return unattendedRpcsOf({
      ...this.#calls,
      runner: this.#runner,
      pokeTimers: () => this.#scheduler.poke(),
    }, scope);
  }

  /** The agent's provider for `route`, metered against the hourly budgets. */
  meter(route: string, scope: () => { session: string; frameId: string | null }): Provider {
    return meteredProvider(this.#calls, route, scope);
  }

  /**
   * A process slot for each `workspace.run` of a scope: taken at once when one is free;
   * otherwise the run waits, with a `budget.exhausted` record saying so. Giving it back starts
   * a job that was queued for a process slot.
   */
  processSlot(session: string): (signal: AbortSignal) => Promise<Release> {
    return async (signal) => {
      let release = this.budget.processes.tryTake();
      if (release === undefined) {
        const { inUse, limit } = this.budget.processes;
        appendEvent(this.#o.store, session, "budget.exhausted", {
          what: "concurrent_processes",
          limit,
          used: inUse,
          until: null,
          effect: "workspace.run waits for a process slot",
        });
        release = await this.budget.processes.take(signal);
      }
      // A pending job may wait for this very slot, and nothing else would start it.
      return () => {
        release();
        this.#runner.pump();
      };
    };
  }

  /**
   * Recovers a session's unattended work after a restart — calls left without an answer are
   * `failed`, jobs left running are `interrupted` and announced — then fires every timer that
   * fell due while the daemon was down and starts pending jobs. The first call also starts the
   * timer scheduler and the maintenance schedule.
   */
  startSession(session: string): void {
    failOpenModelCalls(this.#o.store, session, "the daemon restarted before the answer arrived");
    this.#runner.recover(session);
    if (!this.#started) {
      this.#started = true;
      this.#scheduler.start();
      this.#maintenance.start();
    } else {
      this.#scheduler.poke();
    }
    this.#runner.pump();
  }

  /**
   * Sets a durable timer of the runtime itself (no cell or job set it) in `conversation`,
   * unless one is already pending there; returns the pending one. The maintenance-turn schedule
   * keeps one such timer armed.
   */
  ensureTimer(
    session: string,
    timer: { conversation: string; dueAt: number; note: string },
  ): TimerRecord {
    const pending = listTimers(this.#o.store, session, { limit: 1000 })
      .find((t) => t.conversation === timer.conversation && t.cellId === null && t.jobId === null);
    if (pending !== undefined) return pending;
    const created = createTimer(this.#o.store, { session, ...timer });
    this.#scheduler.poke();
    return created;
  }

  /** Counts for `status` and `/health`: jobs running and pending, timers pending and due. */
  status(session?: string): Record<string, number> {
    // Counted from the indexes of open work (`store/tables/work_counts.ts`).
    const counts = workCounts(this.#o.store, session);
    return {
      running_jobs: counts.runningJobs,
      pending_jobs: counts.pendingJobs,
      pending_timers: counts.pendingTimers,
      due_timers: dueTimerCount(this.#o.store, this.#o.store.clock(), session),
    };
  }

  /** What the workbench of each running job of `session` loaded, for `status`. */
  fingerprints(session: string): (RoleFingerprint & { job_id: string })[] {
    return this.#runner.fingerprints(session);
  }

  /** The operator's view of a session: its jobs and timers with their states. */
  listing(session: string): Record<string, unknown> {
    return {
      session,
      jobs: listJobs(this.#o.store, session).map((job) => jobView(job)),
      timers: listTimers(this.#o.store, session, { all: true, limit: 50 }).map(timerView),
      ...this.status(session),
      budget: this.budget.status(),
    };
  }

  /**
   * Cancels a job for the operator; the agent is woken with its `cancelled` outcome.
   *
   * @throws {KlbrError} `not_found` for an unknown job.
   */
  async cancelJob(id: string, session?: string): Promise<Record<string, unknown>> {
    const before = this.#runner.require(session, id);
    const after = await this.#runner.cancel(session, id, "cancelled by the operator");
    return {
      ...jobView(after),
      cancelled: before.state !== after.state && after.state === "cancelled",
    };
  }

  /** Stops the scheduler and maintenance, and every job's group (reported `interrupted` next start). */
  async shutdown(): Promise<void> {
    this.#scheduler.stop();
    await this.#maintenance.stop();
    await this.#runner.shutdown();
  }

  #fire(timer: TimerRecord): boolean {
    return this.#o.admit(
      timer.session,
      timerInput(timer),
      (inputId) => markTimerFired(this.#o.store, timer.id, inputId),
    );
  }

  #workbenchDeps(job: JobRecord) {
    return {
      store: this.#o.store,
      python: this.#o.python,
      repoRoot: this.#o.repoRoot,
      skillRoots: this.#o.skillRoots,
      runSlot: (signal: AbortSignal) => this.processSlot(job.session)(signal),
      log: this.#o.log,
      sandbox: this.#o.sandbox,
      stateDir: this.#o.stateDir,
      runPrograms: this.#o.runPrograms,
    };
  }

  #jobScope(id: string): RpcScope {
    const job = getJob(this.#o.store, id)!;
    return {
      session: job.session,
      frame: () => null,
      release: () => job.releaseId,
      workspace: job.workspace,
      job,
    };
  }

  #runJob(id: string, kernel: KernelSupervisor, signal: AbortSignal) {
    const job = getJob(this.#o.store, id)!;
    const artifactBytes = this.budget.artifactBytes;
    const artifactWrite = this.#o.health?.artifactWrite.bind(this.#o.health);
    if (job.kind === "code") {
      const code = { store: this.#o.store, artifactBytes, artifactWrite };
      return runCodeJob(code, { job, kernel, signal });
    }
    return runChildAgent({
      store: this.#o.store,
      bus: this.#o.bus,
      call: (request) => childCall(this.#calls, request),
      routeOf: (route) => this.#o.provider(route).route,
      cellTimeoutMs: Math.min(this.#o.cellTimeoutMs, job.budget.wall_time_ms),
      artifactBytes,
      artifactWrite,
    }, { job, kernel, signal });
  }
}
