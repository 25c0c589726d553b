/**
 * The budgets of unattended work: the daemon's model requests and tokens in any rolling hour
 * (read from the durable `model_calls`, so a restart does not refill them), the share of them
 * child calls (`llm()`, child agents) may use so they cannot starve the agent's own turns, the
 * slots for jobs and processes running at once, and each job's limits, inherited from and drawn
 * down with its parent's.
 *
 * Exhaustion pauses what it governs and never touches admission or the operator path: a turn's
 * next model request waits until the hour frees or the operator lifts it, a job waits `pending`
 * for a slot, `llm()` is refused with `over_budget` naming the limit and when it frees, and a
 * job past its own limit ends `over_budget`.
 *
 * @module
 */

import type { JobBudget, JobRecord } from "../../store/tables/jobs.ts";
import {
  budgetWindowStart,
  modelUsageSince,
  modelUsageTotalsSince,
  resetBudgetWindow,
  type UsageScope,
} from "../../store/tables/model_calls.ts";
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

/** Whose model request it is: the agent's own turn, or a child call (`llm()`, a child agent). */
export type Requester = "turn" | "child";

/** What each hourly limit pauses or refuses while it is spent, in words. */
export const HOURLY_EFFECTS: Record<UsageScope, string> = {
  all: "the agent's next model request waits",
  children: "llm() and child agents are refused",
};

/** How an operator lifts a spent hourly limit of `session`, in words. */
export function liftHint(session: string): string {
  return `deno task klbr budget ${session} --reset lifts it now`;
}

/**
 * The daemon's budgets.
 *
 * @example
 * ```ts
 * const budget = new Budget(store, config.budget);
 * const spent = budget.exhausted("child"); // undefined, or { what: "tokens_per_hour", … }
 * ```
 */
export class Budget {
  /** Jobs running at once. */
  readonly jobs: Slots;
  /** Job workbenches and `workspace.run` children at once. */
  readonly processes: Slots;
  /** The hourly request limit the operator raised it to for this run, if they did. */
  #raised: number | undefined;
  /** Calls before this time (ms) are not counted: the operator's last reset, durable. */
  #windowStart: number;
  /** The spent limits already announced to each session with each effect, by limit. */
  readonly #announced = new Map<string, Set<string>>();
  /** Pauses waiting for the operator to lift a budget. */
  readonly #waiters = new Set<() => void>();

  /** Creates the budgets of `limits` over the calls recorded in `store`. */
  constructor(readonly store: Store, readonly limits: BudgetConfig) {
    this.jobs = new Slots("concurrent_jobs", limits.concurrent_jobs);
    this.processes = new Slots("concurrent_processes", limits.concurrent_processes);
    this.#windowStart = budgetWindowStart(store);
  }

  /** The artifacts directory's size limit, in bytes. */
  get artifactBytes(): number {
    return this.limits.artifact_disk_mb * 1024 * 1024;
  }

  /** The daemon's hourly request limit: the configured one, or what the operator raised it to. */
  get requestLimit(): number {
    return this.#raised ?? this.limits.model_requests_per_hour;
  }

  /**
   * Model requests and tokens in the last hour (since the operator's last reset at most), with
   * when each limit frees if it is spent: of every call (`all`), or of child calls against the
   * children's share (`children`).
   */
  hourly(
    now: number = this.store.clock(),
    scope: UsageScope = "all",
  ): { requests: Exhaustion; tokens: Exhaustion } {
    const since = Math.max(now - HOUR_MS + 1, this.#windowStart);
    const used = modelUsageTotalsSince(this.store, since, scope);
    const limit = this.#limitsOf(scope);
    const prefix = scope === "all" ? "" : "child_";
    const requests: Exhaustion = {
      what: `${prefix}model_requests_per_hour`,
      limit: limit.requests,
      used: used.requests,
      until: null,
    };
    const tokens: Exhaustion = {
      what: `${prefix}tokens_per_hour`,
      limit: limit.tokens,
      used: used.tokens,
      until: null,
    };
    if (!isSpent(requests) && !isSpent(tokens)) return { requests, tokens };
    // Only a spent limit needs the calls themselves: it frees when enough of the oldest leave.
    const calls = modelUsageSince(this.store, since, scope);
    const oldest = calls[calls.length - requests.limit];
    if (isSpent(requests) && requests.limit > 0 && oldest !== undefined) {
      requests.until = oldest.at + HOUR_MS;
    }
    if (isSpent(tokens) && tokens.limit > 0) {
      let left = used.tokens;
      for (const call of calls) {
        left -= call.tokens;
        if (left < tokens.limit) {
          tokens.until = call.at + HOUR_MS;
          break;
        }
      }
    }
    return { requests, tokens };
  }

  /**
   * The first spent hourly limit a request of `who` meets, or `undefined` when one more fits:
   * the daemon's limits for every request, and the children's share for a child call.
   */
  exhausted(who: Requester = "turn", now: number = this.store.clock()): Exhaustion | undefined {
    const scopes: UsageScope[] = who === "turn" ? ["all"] : ["all", "children"];
    const checked: Exhaustion[] = [];
    for (const scope of scopes) {
      const { requests, tokens } = this.hourly(now, scope);
      if (isSpent(requests)) return requests;
      if (isSpent(tokens)) return tokens;
      checked.push(requests, tokens);
    }
    // One more request fits, and it will go out: the pause of each limit it met has ended.
    for (const limit of checked) this.#announced.delete(limit.what);
    return undefined;
  }

  /**
   * Whether `spent` is news to `session` for `effect`: true once per pause. A pause lasts until
   * a request that limit governs goes out again (see {@linkcode Budget.exhausted}) or the
   * operator lifts it, so a job retrying `llm()` in a loop is told of it once, not per refusal.
   */
  announce(session: string, spent: Exhaustion, effect: string): boolean {
    const seen = this.#announced.get(spent.what) ?? new Set<string>();
    this.#announced.set(spent.what, seen);
    const key = `${session}|${effect}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  }

  /**
   * Lifts the hourly budgets for the operator: `reset` starts the windows again now (durably:
   * calls before it are never counted again, also after a restart); `raise` sets the daemon's
   * hourly request limit to that many for this run (the configuration's limit returns at the
   * next start). Paused turns go on at once.
   *
   * @throws {KlbrError} `invalid_input` when `raise` is not a whole number above the current
   *   limit, or when neither is asked.
   */
  lift(change: { reset?: boolean; raise?: number }): void {
    const { reset = false, raise } = change;
    if (raise !== undefined && (!Number.isSafeInteger(raise) || raise <= this.requestLimit)) {
      throw new KlbrError(
        "invalid_input",
        `cannot raise the budget: give a whole number of requests above the current limit ${this.requestLimit} (got ${raise})`,
      );
    }
    if (!reset && raise === undefined) {
      throw new KlbrError("invalid_input", "cannot lift the budget: ask for reset or raise");
    }
    if (reset) this.#windowStart = resetBudgetWindow(this.store);
    if (raise !== undefined) this.#raised = raise;
    this.#announced.clear();
    const waiters = [...this.#waiters];
    this.#waiters.clear();
    for (const waiter of waiters) waiter();
  }

  /** Calls `fn` once when the operator next lifts a budget; returns what cancels that. */
  whenLifted(fn: () => void): () => void {
    this.#waiters.add(fn);
    return () => this.#waiters.delete(fn);
  }

  /** The budgets as `status`, `/health` and `klbr budget` show them. */
  status(now: number = this.store.clock()): Record<string, unknown> {
    const all = this.hourly(now, "all");
    const children = this.hourly(now, "children");
    const shown = (e: Exhaustion, effect: string) => ({
      what: e.what,
      limit: e.limit,
      used: e.used,
      until: e.until === null ? null : new Date(e.until).toISOString(),
      frees_in_s: e.until === null ? null : Math.max(0, Math.ceil((e.until - now) / 1000)),
      effect,
    });
    // A share of 0 is the configuration refusing child calls, not a pause to report or lift.
    const paused = (e: Exhaustion) => isSpent(e) && e.limit > 0;
    const spent = [
      ...[all.requests, all.tokens].filter(paused).map((e) => shown(e, HOURLY_EFFECTS.all)),
      ...[children.requests, children.tokens].filter(paused)
        .map((e) => shown(e, HOURLY_EFFECTS.children)),
    ];
    return {
      over_budget: spent,
      model_requests_hour: {
        used: all.requests.used,
        limit: all.requests.limit,
        configured: this.limits.model_requests_per_hour,
      },
      tokens_hour: { used: all.tokens.used, limit: all.tokens.limit },
      child_share_percent: this.limits.child_share_percent,
      child_requests_hour: { used: children.requests.used, limit: children.requests.limit },
      child_tokens_hour: { used: children.tokens.used, limit: children.tokens.limit },
      window_reset_at: this.#windowStart === 0 ? null : new Date(this.#windowStart).toISOString(),
      jobs: { running: this.jobs.inUse, limit: this.jobs.limit, waiting: this.jobs.waiting },
      processes: {
        in_use: this.processes.inUse,
        limit: this.processes.limit,
        waiting: this.processes.waiting,
      },
      job_limits: this.limits.job,
    };
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

  /** The hourly limits of a scope: the daemon's, or the children's share of them. */
  #limitsOf(scope: UsageScope): { requests: number; tokens: number } {
    const all = { requests: this.requestLimit, tokens: this.limits.tokens_per_hour };
    if (scope === "all") return all;
    const percent = this.limits.child_share_percent;
    const share = (n: number) => percent === 0 ? 0 : Math.max(1, Math.floor(n * percent / 100));
    return { requests: share(all.requests), tokens: share(all.tokens) };
  }
}

/** Whether a limit is spent: used up to or past it. */
function isSpent(e: Exhaustion): boolean {
  return e.used >= e.limit;
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
