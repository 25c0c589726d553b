/**
 * The budgets of unattended work: the daemon's model requests and tokens in any rolling hour
 * (read from the durable `model_calls`, so a restart does not refill them), the slots for jobs
 * and processes running at once, and each job's limits, inherited from and drawn down with its
 * parent's.
 *
 * Exhaustion pauses what it governs and never touches admission or the operator path: a turn's
 * next model request waits until the hour frees, a job waits `pending` for a slot, `llm()` is
 * refused with `over_budget` naming the limit and when it frees, and a job past its own limit
 * ends `over_budget`.
 *
 * @module
 */

import type { JobBudget, JobRecord } from "../../store/jobs.ts";
import { modelUsageSince, modelUsageTotalsSince } from "../../store/model_calls.ts";
import type { Store } from "../../store/store.ts";
import type { BudgetConfig } from "../config/mod.ts";
import { KlbrError } from "../core/mod.ts";
import { Slots } from "./_slots.ts";

/** One rolling hour, in ms. */
export const HOUR_MS = 3_600_000;

/** A spent limit: what it is, its limit, what is used, and when it frees (ms), if it does. */
export interface Exhaustion {
  what: string;
  limit: number;
  used: number;
  /** When enough of the window has passed for one more request; null for a limit that never frees. */
  until: number | null;
}

/** What a job asks for; every field is optional and capped by the configured job limits. */
export type BudgetRequest = Partial<JobBudget>;

/**
 * The daemon's budgets.
 *
 * @example
 * ```ts
 * const budget = new Budget(store, config.budget);
 * const spent = budget.exhausted(); // undefined, or { what: "tokens_per_hour", … }
 * ```
 */
export class Budget {
  /** Jobs running at once. */
  readonly jobs: Slots;
  /** Job workbenches and `workspace.run` children at once. */
  readonly processes: Slots;

  /** Creates the budgets of `limits` over the calls recorded in `store`. */
  constructor(readonly store: Store, readonly limits: BudgetConfig) {
    this.jobs = new Slots("concurrent_jobs", limits.concurrent_jobs);
    this.processes = new Slots("concurrent_processes", limits.concurrent_processes);
  }

  /** The artifacts directory's size limit, in bytes. */
  get artifactBytes(): number {
    return this.limits.artifact_disk_mb * 1024 * 1024;
  }

  /** Model requests and tokens of the last hour, with when each limit frees if it is spent. */
  hourly(now: number = this.store.clock()): { requests: Exhaustion; tokens: Exhaustion } {
    const calls = modelUsageSince(this.store, now - HOUR_MS + 1);
    const requests = calls.length;
    const tokens = calls.reduce((sum, call) => sum + call.tokens, 0);
    const { model_requests_per_hour: maxRequests, tokens_per_hour: maxTokens } = this.limits;
    // A request frees when the oldest calls leave the window: enough of them that one more fits.
    let requestsUntil: number | null = null;
    if (requests >= maxRequests) requestsUntil = calls[requests - maxRequests].at + HOUR_MS;
    let tokensUntil: number | null = null;
    if (tokens >= maxTokens) {
      let left = tokens;
      for (const call of calls) {
        left -= call.tokens;
        if (left < maxTokens) {
          tokensUntil = call.at + HOUR_MS;
          break;
        }
      }
    }
    return {
      requests: {
        what: "model_requests_per_hour",
        limit: maxRequests,
        used: requests,
        until: requestsUntil,
      },
      tokens: { what: "tokens_per_hour", limit: maxTokens, used: tokens, until: tokensUntil },
    };
  }

  /** The first spent hourly limit, or `undefined` when one more request fits. */
  exhausted(now: number = this.store.clock()): Exhaustion | undefined {
    // Asked before every model request: the totals say whether any limit is spent, and only a
    // spent one needs the calls themselves (when it frees).
    const used = modelUsageTotalsSince(this.store, now - HOUR_MS + 1);
    if (used.requests < this.limits.model_requests_per_hour) {
      if (used.tokens < this.limits.tokens_per_hour) return undefined;
    }
    const { requests, tokens } = this.hourly(now);
    if (requests.until !== null) return requests;
    if (tokens.until !== null) return tokens;
    return undefined;
  }

  /**
   * The limits of a new job: what it asks for, capped by the configured job limits and by what
   * its parent job has left.
   *
   * @throws {KlbrError} `invalid_input` for a negative or fractional limit.
   */
  jobBudget(asked: BudgetRequest = {}, parent?: JobRecord): JobBudget {
    const cap = this.limits.job;
    const pick = (name: keyof JobBudget, configured: number, left: number) => {
      const value = asked[name];
      if (value !== undefined && (!Number.isSafeInteger(value) || value < 0)) {
        throw new KlbrError(
          "invalid_input",
          `cannot start job: budget ${name} must be a whole number >= 0 (got ${value})`,
        );
      }
      return Math.max(0, Math.min(value ?? configured, configured, left));
    };
    const wallLeft = parent === undefined
      ? Infinity
      : parent.budget.wall_time_ms - (this.store.clock() - (parent.startedAt ?? parent.createdAt));
    return {
      wall_time_ms: Math.max(
        1,
        pick("wall_time_ms", cap.wall_time_s * 1000, wallLeft),
      ),
      model_requests: pick(
        "model_requests",
        cap.model_requests,
        parent === undefined ? Infinity : parent.budget.model_requests - parent.requestsUsed,
      ),
      tokens: pick(
        "tokens",
        cap.tokens,
        parent === undefined ? Infinity : parent.budget.tokens - parent.tokensUsed,
      ),
    };
  }

  /** The budgets as `status` and `/health` show them. */
  status(now: number = this.store.clock()): Record<string, unknown> {
    const { requests, tokens } = this.hourly(now);
    const spent = [requests, tokens].filter((e) => e.until !== null).map((e) => ({
      what: e.what,
      limit: e.limit,
      used: e.used,
      until: new Date(e.until!).toISOString(),
    }));
    return {
      over_budget: spent,
      model_requests_hour: { used: requests.used, limit: requests.limit },
      tokens_hour: { used: tokens.used, limit: tokens.limit },
      jobs: { running: this.jobs.inUse, limit: this.jobs.limit, waiting: this.jobs.waiting },
      processes: {
        in_use: this.processes.inUse,
        limit: this.processes.limit,
        waiting: this.processes.waiting,
      },
      job_limits: this.limits.job,
    };
  }
}

/** The ids of a job and every job above it, nearest first: whose budgets a child draws down. */
export function budgetChain(
  job: JobRecord,
  get: (id: string) => JobRecord | undefined,
): JobRecord[] {
  const chain: JobRecord[] = [];
  for (let at: JobRecord | undefined = job; at !== undefined && chain.length < 16;) {
    chain.push(at);
    at = at.parentJobId === null ? undefined : get(at.parentJobId);
  }
  return chain;
}

/** The first limit of `job` that is spent, or `undefined`. */
export function jobExhaustion(job: JobRecord): Exhaustion | undefined {
  if (job.tokensUsed >= job.budget.tokens) {
    return { what: "job tokens", limit: job.budget.tokens, used: job.tokensUsed, until: null };
  }
  if (job.requestsUsed >= job.budget.model_requests) {
    return {
      what: "job model_requests",
      limit: job.budget.model_requests,
      used: job.requestsUsed,
      until: null,
    };
  }
  return undefined;
}

/** Says a spent limit in words: "tokens_per_hour: 2000100 of 2000000 used; frees at …". */
export function describeExhaustion(e: Exhaustion): string {
  return `${e.what}: ${e.used} of ${e.limit} used${
    e.until === null ? "" : `; frees at ${new Date(e.until).toISOString()}`
  }`;
}
