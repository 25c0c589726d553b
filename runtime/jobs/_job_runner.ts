/**
 * The job runner: the single owner of running jobs. It starts pending jobs when a job slot and
 * a process slot are free, runs each in its own workbench, ends it with a cause, reaps its
 * process group, and admits its completion input (source `job`) that wakes the agent.
 *
 * A job is never resumed: at start-up a job the dead daemon left `running` is ended
 * `interrupted` and the agent is woken with that; nothing re-runs its code or replays a cell.
 * A job still `pending` never ran any code (its code is sent only after `running` is
 * committed), so starting it then is its first run.
 *
 * @module
 */

import {
  announceJob,
  type CreateJob,
  createJob,
  getJob,
  isJobEnded,
  type JobRecord,
  listJobs,
  moveJob,
  openChildJobs,
  openJobs,
  unannouncedJobs,
} from "../../store/tables/jobs.ts";
import { appendEvent } from "../../store/tables/events.ts";
import type { Store } from "../../store/store.ts";
import { KlbrError, type Logger, SerialRunner } from "../core/mod.ts";
import type { KernelSupervisor, RoleFingerprint } from "../kernel/mod.ts";
import type { Budget, Exhaustion } from "./_budget.ts";
import { describeExhaustion } from "./_budget.ts";
import { jobInput, type UnattendedInput } from "./_inputs.ts";
import { type JobEnding, stopJobKernel } from "./_job_workbench.ts";
import type { Release } from "./_slots.ts";
import type { HostTimers } from "./_timers.ts";

/** Admits an input through the coordinator; `within` runs in its transaction. */
export type AdmitFn = (
  session: string,
  input: UnattendedInput,
  within: (inputId: string) => void,
) => boolean;

/** What the runner needs. */
export interface JobRunnerDeps {
  store: Store;
  log: Logger;
  budget: Budget;
  admit: AdmitFn;
  /** The job's workbench, built when it starts. */
  kernelFor: (job: JobRecord) => KernelSupervisor;
  /** Runs a started job in its workbench and says how it ended. */
  run: (job: JobRecord, kernel: KernelSupervisor, signal: AbortSignal) => Promise<JobEnding>;
  /** Host timers for each job's wall time. */
  timers: HostTimers;
  /**
   * Called when a job's completion input could not be admitted: it asks for
   * {@linkcode JobRunner.announceWaiting} after the timers' retry pause.
   */
  retryLater: () => void;
}

interface LiveJob {
  id: string;
  session: string;
  abort: AbortController;
  kernel: KernelSupervisor | undefined;
  /** Set when the runner ends the job itself (cancel, a spent budget): this wins. */
  endAs: JobEnding | undefined;
  done: Promise<void>;
}

/**
 * Runs the daemon's jobs.
 *
 * @example
 * ```ts
 * const runner = new JobRunner(deps);
 * const job = runner.create({ session, kind: "code", name: "build", code, ... });
 * const ended = await runner.result(job.id);
 * ```
 */
export class JobRunner {
  readonly #d: JobRunnerDeps;
  readonly #live = new Map<string, LiveJob>();
  readonly #waiters = new Map<string, Set<(job: JobRecord) => void>>();
  /** Aborted by {@linkcode shutdown}: every wait for a job ends. */
  readonly #stopping = new AbortController();
  readonly #queued = new Set<string>();
  /** Sessions with an ended job whose completion input could not be admitted yet. */
  readonly #unannounced = new Set<string>();
  /** Ends (of children, of spent budgets) still in progress, awaited at shutdown. */
  readonly #cascades = new Set<Promise<unknown>>();
  readonly #pump = new SerialRunner(() => Promise.resolve(this.#startPending()));
  #closing = false;

  /** Creates the runner; nothing runs until {@linkcode JobRunner.pump}. */
  constructor(deps: JobRunnerDeps) {
    this.#d = deps;
  }

  /** Writes a pending job and starts it as soon as slots allow; returns it at once. */
  create(request: CreateJob): JobRecord {
    const job = createJob(this.#d.store, request);
    this.pump();
    return job;
  }

  /** Starts pending jobs while there are slots. */
  pump(): void {
    if (!this.#closing) void this.#pump.run();
  }

  /** A session's jobs, newest first (at most 50). */
  list(session: string): JobRecord[] {
    return listJobs(this.#d.store, session);
  }

  /** What the live workbench of each running job of `session` loaded (`job_id` beside it). */
  fingerprints(session: string): (RoleFingerprint & { job_id: string })[] {
    return [...this.#live.values()].flatMap((live) => {
      const f = live.session === session ? live.kernel?.fingerprint : null;
      return f ? [{ ...f, job_id: live.id }] : [];
    });
  }

  /**
   * Resolves with the job once it has ended; at once for an ended one.
   *
   * @throws {KlbrError} `not_found` for an unknown job (or one of another session);
   *   `shutting_down` when the daemon stops first or `signal` aborts.
   */
  result(session: string, id: string, signal?: AbortSignal): Promise<JobRecord> {
    const job = this.require(session, id);
    if (isJobEnded(job.state)) return Promise.resolve(job);
    return new Promise((resolve, reject) => {
      const set = this.#waiters.get(id) ?? new Set();
      this.#waiters.set(id, set);
      const stops = AbortSignal.any([this.#stopping.signal, ...(signal ? [signal] : [])]);
      const onAbort = () => {
        set.delete(waiter);
        const why = this.#stopping.signal.aborted
          ? "the daemon is shutting down"
          : "the wait was cancelled";
        reject(new KlbrError("shutting_down", `cannot wait for job ${id}: ${why}`));
      };
      const waiter = (ended: JobRecord) => {
        stops.removeEventListener("abort", onAbort);
        resolve(ended);
      };
      set.add(waiter);
      if (stops.aborted) return onAbort();
      stops.addEventListener("abort", onAbort, { once: true });
    });
  }

  /**
   * Returns the job of `session`.
   *
   * @throws {KlbrError} `not_found` for an unknown job or one of another session.
   */
  require(session: string | undefined, id: string): JobRecord {
    const job = typeof id === "string" ? getJob(this.#d.store, id) : undefined;
    if (job === undefined || (session !== undefined && job.session !== session)) {
      throw new KlbrError(
        "not_found",
        `cannot find job: no job ${id} in session ${session ?? "(any)"} (got ${
          JSON.stringify(id)
        })`,
      );
    }
    return job;
  }

  /**
   * Cancels a job with `cause`: a pending one ends at once, a running one's process group is
   * killed and it ends `cancelled`. Returns the job as it then is; an ended job is left alone.
   *
   * @throws {KlbrError} `not_found` for an unknown job.
   */
  async cancel(session: string | undefined, id: string, cause: string): Promise<JobRecord> {
    const job = this.require(session, id);
    await this.#stop(job, { state: "cancelled", cause, result: {} });
    return getJob(this.#d.store, id)!;
  }

  /** Ends a job whose own budget is spent with `over_budget`, killing its group if it runs. */
  overBudget(job: JobRecord, spent: Exhaustion): void {
    this.#detach(job, { state: "over_budget", cause: describeExhaustion(spent), result: {} });
  }

  /** Ends a job without waiting for it; shutdown waits for every such end still in progress. */
  #detach(job: JobRecord, ending: JobEnding): void {
    const stopping = this.#stop(job, ending).catch((error) =>
      this.#d.log.error("job.stop_failed", `cannot end job ${job.id}: ${error}`)
    ).finally(() => this.#cascades.delete(stopping));
    this.#cascades.add(stopping);
  }

  async #stop(job: JobRecord, ending: JobEnding): Promise<void> {
    const live = this.#live.get(job.id);
    if (live === undefined) {
      const now = getJob(this.#d.store, job.id)!;
      if (now.state === "pending") this.#end(now, ending);
      return;
    }
    live.endAs ??= ending;
    live.abort.abort(new Error(ending.cause));
    if (live.kernel !== undefined) {
      await stopJobKernel(live.kernel, `${ending.state}: ${ending.cause}`);
    }
    await live.done;
  }

  /**
   * Recovers a session's jobs after a restart: each job left `running` ends `interrupted` (never
   * resumed, never re-run), and every ended job whose completion input is not in the inbox yet is
   * announced. Run before the session's jobs are pumped.
   */
  recover(session: string): void {
    for (const job of openJobs(this.#d.store, session)) {
      if (job.state !== "running") continue;
      this.#end(job, {
        state: "interrupted",
        cause: `the daemon stopped while it ran (pid ${job.pid ?? "unknown"}); a job is never ` +
          "resumed or run again",
        result: {},
      });
    }
    for (const job of unannouncedJobs(this.#d.store, session)) this.#announce(job);
  }

  /**
   * Admits the completion input of each ended job whose input could not be admitted before
   * (the store refused the commit, the session did not run); returns how many still wait.
   */
  announceWaiting(): number {
    let waiting = 0;
    for (const session of [...this.#unannounced]) {
      this.#unannounced.delete(session);
      for (const job of unannouncedJobs(this.#d.store, session)) {
        if (!this.#announce(job, { again: true })) waiting++;
      }
    }
    return waiting;
  }

  /** Stops every running job's group without ending it: the next start reports it `interrupted`. */
  async shutdown(): Promise<void> {
    this.#closing = true;
    // A cell waiting for a job hears it now: the job will not end while this daemon runs.
    this.#stopping.abort();
    for (const live of this.#live.values()) {
      live.abort.abort(new Error("daemon shutdown"));
      if (live.kernel !== undefined) await stopJobKernel(live.kernel, "daemon shutdown");
    }
    await Promise.all([...this.#live.values()].map((live) => live.done));
    await Promise.all([...this.#cascades]);
    this.#waiters.clear();
  }

  #startPending(): void {
    for (const job of openJobs(this.#d.store)) {
      if (this.#closing) return;
      if (job.state !== "pending" || this.#live.has(job.id)) continue;
      const slots = this.#takeSlots();
      if (slots === undefined) {
        this.#noteQueued(job);
        return;
      }
      this.#launch(job, slots);
    }
  }

  #takeSlots(): Release[] | undefined {
    const job = this.#d.budget.jobs.tryTake();
    if (job === undefined) return undefined;
    const process = this.#d.budget.processes.tryTake();
    if (process === undefined) {
      job();
      return undefined;
    }
    return [job, process];
  }

  #noteQueued(job: JobRecord): void {
    if (this.#queued.has(job.id)) return;
    this.#queued.add(job.id);
    const { jobs, processes } = this.#d.budget;
    appendEvent(this.#d.store, job.session, "job.queued", {
      job_id: job.id,
      reason: `waiting for a slot: ${jobs.inUse} of ${jobs.limit} jobs and ${processes.inUse} of ` +
        `${processes.limit} processes in use`,
    });
  }

  #launch(pending: JobRecord, slots: Release[]): void {
    const job = moveJob(this.#d.store, pending.id, { to: "running", cause: "a job slot was free" });
    this.#queued.delete(job.id);
    const live: LiveJob = {
      id: job.id,
      session: job.session,
      abort: new AbortController(),
      kernel: undefined,
      endAs: undefined,
      done: Promise.resolve(),
    };
    this.#live.set(job.id, live);
    live.done = this.#run(job, live).finally(() => {
      for (const release of slots) release();
      this.#live.delete(job.id);
      this.pump();
    });
  }

  async #run(job: JobRecord, live: LiveJob): Promise<void> {
    let ending: JobEnding;
    try {
      live.kernel = this.#d.kernelFor(job);
      const wall = this.#d.timers.set(() => this.#wallTimeSpent(job), job.budget.wall_time_ms);
      try {
        ending = await this.#d.run(job, live.kernel, live.abort.signal);
      } finally {
        this.#d.timers.clear(wall);
      }
    } catch (error) {
      ending = { state: "failed", cause: `the runtime could not run it: ${error}`, result: {} };
    } finally {
      // Reaped before it is reported: a finished job's process group is gone.
      if (live.kernel !== undefined) await stopJobKernel(live.kernel, "the job ended");
    }
    if (this.#closing) return;
    this.#end(getJob(this.#d.store, job.id)!, live.endAs ?? ending);
  }

  #wallTimeSpent(job: JobRecord): void {
    this.overBudget(job, {
      what: "job wall_time_ms",
      limit: job.budget.wall_time_ms,
      used: job.budget.wall_time_ms,
      until: null,
    });
  }

  /** Ends a job with its cause, announces it, ends its open children, wakes its waiters. */
  #end(job: JobRecord, ending: JobEnding): void {
    const ended = moveJob(this.#d.store, job.id, {
      to: ending.state,
      cause: ending.cause,
      result: ending.result,
    });
    this.#announce(ended);
    for (const child of openChildJobs(this.#d.store, ended.id)) {
      const cause = `its parent job ${ended.id} ended ${ended.state}`;
      this.#detach(child, { state: "cancelled", cause, result: {} });
    }
    const waiters = this.#waiters.get(ended.id);
    this.#waiters.delete(ended.id);
    for (const waiter of waiters ?? []) waiter(ended);
  }

  /**
   * Admits the job's completion input and records it on the job, in one transaction; one that
   * cannot be admitted now is tried again after the retry pause (said once, not at each try).
   */
  #announce(job: JobRecord, options: { again?: boolean } = {}): boolean {
    const admitted = this.#d.admit(
      job.session,
      jobInput(job),
      (inputId) => announceJob(this.#d.store, job.id, inputId),
    );
    if (admitted) return true;
    this.#unannounced.add(job.session);
    this.#d.retryLater();
    if (!options.again) {
      this.#d.log.warn(
        "job.unannounced",
        `job ${job.id} ended ${job.state}; its input could not be admitted now and is tried ` +
          "again every 5 s",
        { job_id: job.id },
      );
    }
    return false;
  }
}
