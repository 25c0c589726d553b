/**
 * Model requests under the budgets: the child calls of `llm()` and of child agents, and the
 * agent's own turns (through {@linkcode meteredProvider}). Each request is recorded in
 * `model_calls` with its causation (frame, cell, job) before it leaves and finished with its
 * usage after; the usage is drawn from the job that asked and every job above it.
 *
 * @module
 */

import { drawJobUsage, getJob, type JobRecord } from "../../store/tables/jobs.ts";
import { finishModelCall, startModelCall } from "../../store/tables/model_calls.ts";
import { appendEvent } from "../../store/tables/events.ts";
import type { Store } from "../../store/store.ts";
import { KlbrError } from "../core/mod.ts";
import {
  type ChatMessage,
  type Provider,
  ProviderFailure,
  type ProviderTurn,
} from "../model/mod.ts";
import {
  type Budget,
  budgetChain,
  describeExhaustion,
  type Exhaustion,
  HOURLY_EFFECTS,
  jobExhaustion,
  liftHint,
} from "./_budget.ts";
import { HOST_TIMERS } from "../session/mod.ts";
import type { HostTimers } from "./_timers.ts";

/** What caused a model request: the session, and the frame, cell or job it ran for. */
export interface Causation {
  session: string;
  frameId: string | null;
  cellId: string | null;
  jobId: string | null;
}

/** What the model calls need. */
export interface ModelCallDeps {
  store: Store;
  provider: (route: string) => Provider;
  budget: Budget;
  /** Ends a job whose own limit is spent with `over_budget`; the job runner owns jobs. */
  overBudget: (job: JobRecord, spent: Exhaustion) => void;
  /** Host timers for a paused turn; `setTimeout` unless a test injects its own. */
  timers?: HostTimers;
}

/** One child request. */
export interface ChildRequest {
  causation: Causation;
  kind: "llm" | "agent";
  route: string;
  messages: ChatMessage[];
  /** What is recorded as the request (the prompt, or a step summary). */
  summary: Record<string, unknown>;
  maxTokens?: number;
  /** Tokens this one call may use at most. */
  callTokens?: number;
  /**
   * Whether the python tool is sent (the provider's default, yes, when absent): a child agent's
   * native route does; `llm()` does not, so that a server without tool calling answers it.
   */
  tools?: boolean;
  signal?: AbortSignal;
}

/** A finished child request. */
export interface ChildReply {
  callId: string;
  turn: ProviderTurn;
  tokens: number;
}

/**
 * Records a spent hourly limit in the session, once per pause (see {@linkcode Budget.announce}),
 * with when it frees, what waits or is refused meanwhile, and how the operator lifts it.
 */
function recordExhaustion(
  deps: { store: Store; budget: Budget },
  session: string,
  spent: Exhaustion,
  effect: string,
): void {
  if (!deps.budget.announce(session, spent, effect)) return;
  appendEvent(deps.store, session, "budget.exhausted", {
    what: spent.what,
    limit: spent.limit,
    used: spent.used,
    until: spent.until === null ? null : new Date(spent.until).toISOString(),
    effect,
    lift: liftHint(session),
  });
}

function overBudgetError(action: string, spent: Exhaustion): KlbrError {
  return new KlbrError(
    "over_budget",
    `cannot ${action}: the budget is spent (got ${describeExhaustion(spent)})`,
  );
}

/**
 * Checks the budgets a child request draws from: the daemon's hour, and the asking job's and
 * its parents' limits. A job whose own limit is spent is ended `over_budget`.
 *
 * @throws {KlbrError} `over_budget` naming the limit and, for the hour, when it frees.
 */
function checkBudgets(deps: ModelCallDeps, causation: Causation): JobRecord[] {
  const hourly = deps.budget.exhausted("child");
  if (hourly !== undefined) {
    recordExhaustion(deps, causation.session, hourly, HOURLY_EFFECTS.children);
    throw overBudgetError("call the model", hourly);
  }
  const job = causation.jobId === null ? undefined : getJob(deps.store, causation.jobId);
  const chain = job === undefined ? [] : budgetChain(job, (id) => getJob(deps.store, id));
  for (const link of chain) {
    const spent = jobExhaustion(link);
    if (spent !== undefined) {
      deps.overBudget(link, spent);
      throw overBudgetError(`call the model for job ${link.id}`, spent);
    }
  }
  return chain;
}

/**
 * How a child request meets a failure that may pass (a rate limit, a 5xx, a dropped
 * connection; `ProviderFailure.retriable`): asked again after the wait the server named
 * (`Retry-After`), or after `backoffMs` when it named none, `attempts` times in all; a named
 * wait longer than `maxWaitMs` is not waited for. A refusal is never asked again.
 */
const CHILD_RETRY = { attempts: 3, backoffMs: [1_000, 4_000], maxWaitMs: 60_000 };

/**
 * Makes a child model request under the budgets, asking again (each attempt a request of its
 * own, checked against the budgets and recorded) while the provider's failure may pass
 * ({@linkcode CHILD_RETRY}); the wait ends early when `request.signal` aborts.
 *
 * @throws {KlbrError} `over_budget` before any request when a budget is spent;
 *   `provider_failed` from the provider, saying how many attempts were made when more than one.
 */
export async function childCall(deps: ModelCallDeps, request: ChildRequest): Promise<ChildReply> {
  for (let attempt = 1;; attempt++) {
    try {
      return await childAttempt(deps, request);
    } catch (error) {
      const wait = retryWait(error, attempt);
      if (wait === undefined) throw attempt === 1 ? error : afterAttempts(error, attempt);
      await sleep(wait, { timers: deps.timers ?? HOST_TIMERS, signal: request.signal });
    }
  }
}

/** How long to wait before attempt `attempt + 1`; undefined when the failure is final. */
function retryWait(error: unknown, attempt: number): number | undefined {
  const failure = error instanceof Error && error.cause instanceof ProviderFailure
    ? error.cause
    : undefined;
  if (failure === undefined || !failure.retriable || attempt >= CHILD_RETRY.attempts) return;
  const wait = failure.retryAfterMs ?? CHILD_RETRY.backoffMs[attempt - 1];
  return wait <= CHILD_RETRY.maxWaitMs ? wait : undefined;
}

/** The last attempt's failure, saying how many were made. */
function afterAttempts(error: unknown, attempts: number): unknown {
  if (!(error instanceof KlbrError)) return error;
  return new KlbrError(error.code, `${error.message} (after ${attempts} attempts)`, {
    cause: error.cause,
    status: error.status,
  });
}

/**
 * Resolves after `ms`, or as soon as `lifted` calls back (it returns what cancels that);
 * rejects when `signal` aborts first.
 */
function sleep(
  ms: number,
  on: {
    timers: HostTimers;
    signal: AbortSignal | undefined;
    lifted?: (done: () => void) => () => void;
  },
): Promise<void> {
  const { timers, signal } = on;
  return new Promise((resolve, reject) => {
    const timer = timers.set(done, ms);
    const forget = on.lifted?.(done);
    function settle() {
      timers.clear(timer);
      forget?.();
      signal?.removeEventListener("abort", aborted);
    }
    function done() {
      settle();
      resolve();
    }
    function aborted() {
      settle();
      reject(signal?.reason ?? new Error("aborted"));
    }
    if (signal?.aborted) return aborted();
    signal?.addEventListener("abort", aborted, { once: true });
  });
}

/**
 * Makes one child model request under the budgets and records it with its causation.
 *
 * When it returns the call is recorded `done` with its usage, and the usage is drawn from the
 * asking job and its parents; a job pushed over its token or request limit is ended
 * `over_budget`. A failed request is recorded `failed` and still counts one request. Proven by
 * "`llm()` is recorded with its causation and drawn from the job's budget" in
 * `tests/runtime/jobs/jobs_daemon.test.ts` and `tests/store/model_calls.test.ts`.
 *
 * @throws {KlbrError} `over_budget` before any request when a budget is spent;
 *   `provider_failed` from the provider.
 */
async function childAttempt(deps: ModelCallDeps, request: ChildRequest): Promise<ChildReply> {
  const chain = checkBudgets(deps, request.causation);
  const left = chain.map((job) => job.budget.tokens - job.tokensUsed);
  const caps = [request.maxTokens, request.callTokens, ...left].filter((n) => n !== undefined);
  const maxTokens = caps.length ? Math.max(1, Math.min(...(caps as number[]))) : undefined;
  const { session, frameId, cellId, jobId } = request.causation;
  const callId = startModelCall(deps.store, {
    session,
    kind: request.kind,
    route: request.route,
    frameId,
    cellId,
    jobId,
    request: { ...request.summary, max_tokens: maxTokens ?? null },
  });
  let turn: ProviderTurn;
  try {
    turn = await deps.provider(request.route).streamChat(
      {
        messages: request.messages,
        tools: request.tools,
        maxTokens,
      },
      { signal: request.signal },
    );
  } catch (error) {
    finishModelCall(deps.store, callId, { state: "failed", error: String(error) });
    draw(deps, chain, 0);
    throw error;
  }
  const { promptTokens = 0, completionTokens = 0 } = turn.usage;
  finishModelCall(deps.store, callId, {
    state: "done",
    response: {
      text: turn.text,
      tool_calls: turn.toolCalls.length,
      finish_reason: turn.finishReason,
    },
    promptTokens: turn.usage.promptTokens,
    completionTokens: turn.usage.completionTokens,
  });
  draw(deps, chain, promptTokens + completionTokens);
  return { callId, turn, tokens: promptTokens + completionTokens };
}

/** Draws one request of `tokens` from each job of `chain`; ends those pushed over a limit. */
function draw(deps: ModelCallDeps, chain: JobRecord[], tokens: number): void {
  if (chain.length === 0) return;
  const after = drawJobUsage(deps.store, chain.map((job) => job.id), { requests: 1, tokens });
  for (const job of after) {
    if (job.state !== "running" && job.state !== "pending") continue;
    if (job.tokensUsed > job.budget.tokens) {
      deps.overBudget(job, {
        what: "job tokens",
        limit: job.budget.tokens,
        used: job.tokensUsed,
        until: null,
      });
    } else if (job.requestsUsed > job.budget.model_requests) {
      deps.overBudget(job, {
        what: "job model_requests",
        limit: job.budget.model_requests,
        used: job.requestsUsed,
        until: null,
      });
    }
  }
}

/**
 * The agent's own provider for one route, metered: each request of a turn is recorded in
 * `model_calls` (kind `turn`, with its frame) and counts against the daemon's hourly budgets.
 * While an hourly limit is spent, the next request waits until it frees or the operator lifts
 * it (`klbr budget <session> --reset`), with one `budget.exhausted` record a pause; the
 * operator's stop aborts the wait. Inputs keep being admitted. Turns count against the daemon's
 * whole hourly limits, never against the children's share.
 */
export function meteredProvider(
  deps: Omit<ModelCallDeps, "overBudget">,
  route: string,
  scope: () => { session: string; frameId: string | null },
): Provider {
  const inner = deps.provider(route);
  return {
    route: inner.route,
    async streamChat(request, options = {}) {
      const { session, frameId } = scope();
      for (
        let spent = deps.budget.exhausted("turn");
        spent !== undefined;
        spent = deps.budget.exhausted("turn")
      ) {
        recordExhaustion(deps, session, spent, HOURLY_EFFECTS.all);
        // Waits until the limit frees or the operator lifts it.
        const until = spent.until ?? deps.store.clock() + 60_000;
        await sleep(Math.max(0, until - deps.store.clock()), {
          timers: deps.timers ?? HOST_TIMERS,
          signal: options.signal,
          lifted: (done) => deps.budget.whenLifted(done),
        });
      }
      const callId = startModelCall(deps.store, {
        session,
        kind: "turn",
        route,
        frameId,
        request: { messages: request.messages.length },
      });
      try {
        const turn = await inner.streamChat(request, options);
        // Commits with the reply the turn writes next; a call left `requested` by a crash
        // before that is failed at the next start.
        const end = {
          state: "done" as const,
          promptTokens: turn.usage.promptTokens,
          completionTokens: turn.usage.completionTokens,
        };
        deps.store.defer(() => void finishModelCall(deps.store, callId, end));
        return turn;
      } catch (error) {
        finishModelCall(deps.store, callId, { state: "failed", error: String(error) });
        throw error;
      }
    },
  };
}
