/**
 * A job's own workbench: a kernel supervisor of its own (its own process group, heap and
 * generation), pinned to the release and the workspace recorded on the job, and the code job's
 * one cell run in it under the job's wall time.
 *
 * @module
 */

import { appendEvent } from "../../store/tables/events.ts";
import { type JobEnd, type JobRecord, setJobPid } from "../../store/tables/jobs.ts";
import { getRelease } from "../../store/tables/releases.ts";
import type { Store } from "../../store/store.ts";
import { KlbrError, type Logger } from "../core/mod.ts";
import { type BoundRpc, KernelSupervisor, roleLoadedBody, type SkillRoots } from "../kernel/mod.ts";
import type { SandboxBase } from "../sandbox/mod.ts";
import { keepCellOutput, keptCellResult } from "../session/mod.ts";
import type { Release } from "./_slots.ts";

/** How a job ended: its final state, the cause, and what it ended with. */
export interface JobEnding {
  state: JobEnd;
  cause: string;
  result: Record<string, unknown>;
}

/** A started job as it runs: its record, its workbench, and the signal that ends it. */
export interface JobRun {
  job: JobRecord;
  kernel: KernelSupervisor;
  /** Aborted by the runner when it ends the job itself (a cancel, a spent budget). */
  signal: AbortSignal;
}

/** What a job's workbench is built from. */
export interface JobWorkbenchDeps {
  store: Store;
  python: string;
  repoRoot: string;
  skillRoots: SkillRoots;
  /** Waits for a process slot before each `workspace.run` of the job. */
  runSlot: (signal: AbortSignal) => Promise<Release>;
  /** Where unexpected RPC failures of the job's workbench are logged. @default stderr */
  log?: Logger;
  /** Confines the job's workbench and its `workspace.run` children. @default unconfined */
  sandbox?: SandboxBase;
  /** The state directory's real path: never part of the job's workspace. */
  stateDir?: string;
  /** The programs `workspace.run` may start. @default any */
  runPrograms?: string[];
}

/**
 * Builds the job's kernel supervisor; nothing is spawned until its first cell. Its generation
 * is the job's, recorded as the job's pid, never as a generation of the session.
 *
 * @throws {KlbrError} `not_found` when the pinned release was never recorded.
 */
export function jobKernel(
  deps: JobWorkbenchDeps,
  job: JobRecord,
  rpc: BoundRpc[],
): KernelSupervisor {
  const release = getRelease(deps.store, job.releaseId);
  if (release === undefined) {
    throw new KlbrError(
      "not_found",
      `cannot start job ${job.id}: its release was never recorded (got ${job.releaseId})`,
    );
  }
  return new KernelSupervisor({
    python: deps.python,
    session: job.session,
    workspace: job.workspace,
    repoRoot: deps.repoRoot,
    skillRoots: deps.skillRoots,
    role: "job",
    behavior: () => ({ revision: release.id, path: release.path }),
    recordGeneration: (record) => {
      setJobPid(deps.store, job.id, record.pid);
      // What the job's process loaded, beside the session's roles (`docs/behavior.md`).
      appendEvent(deps.store, job.session, "role.loaded", {
        ...roleLoadedBody(record),
        job_id: job.id,
      });
    },
    rpc,
    log: deps.log,
    runSlot: deps.runSlot,
    sandbox: deps.sandbox,
    stateDir: deps.stateDir,
    runPrograms: deps.runPrograms,
  });
}

/**
 * Ends the job's workbench now: no new generation may start, and the live one's whole process
 * group is killed (its running cell ends `killed`). Resolves when the group is dead.
 */
export async function stopJobKernel(kernel: KernelSupervisor, reason: string): Promise<void> {
  const current = kernel.current;
  const closing = kernel.shutdown();
  await current?.kill(reason);
  await closing;
}

/**
 * Runs a code job's one cell in its workbench, under the wall time it has left, and says how the
 * job ended: `done`, `failed` (it raised, or the workbench died), `over_budget` (wall time).
 * A cancellation or another budget's end is decided by the runner, which aborts `signal`.
 */
export async function runCodeJob(
  deps: {
    store: Store;
    artifactBytes: number;
    /** Where each artifact write is reported (`null` for one that succeeded). */
    artifactWrite?: (error: string | null) => void;
  },
  run: JobRun,
): Promise<JobEnding> {
  const { job, kernel, signal } = run;
  await kernel.ready();
  const started = job.startedAt ?? deps.store.clock();
  const left = Math.max(1, job.budget.wall_time_ms - (deps.store.clock() - started));
  const cell = await kernel.execute(job.id, job.code, { timeoutMs: left, signal });
  // Kept as a session cell's output is: a failed artifact write costs the whole output, never
  // the outcome.
  const kept = await keepCellOutput(deps.store.stateDir, cell, {
    budgetBytes: deps.artifactBytes,
    report: deps.artifactWrite,
  });
  const result = keptCellResult(kept);
  switch (cell.outcome) {
    case "ok":
      return { state: "done", cause: "its code finished", result };
    case "error":
      return {
        state: "failed",
        cause: `its code raised ${cell.error?.type ?? "an error"}: ${cell.error?.message ?? ""}`,
        result,
      };
    case "timed_out":
      return {
        state: "over_budget",
        cause: `wall_time: ran for its whole ${job.budget.wall_time_ms} ms and was killed`,
        result,
      };
    default:
      return {
        state: "failed",
        cause: `its workbench ended: ${cell.error?.message ?? cell.outcome}`,
        result,
      };
  }
}
