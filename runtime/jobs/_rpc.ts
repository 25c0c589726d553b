/**
 * The host RPCs of unattended work, for a session's cells and for a job's workbench:
 * `timers.at|cancel|list`, `jobs.start|status|list|cancel|result` and `llm`. A job's workbench
 * also gets `artifact.read`, and refuses `local.send` and `discord.send` (a job never speaks) and
 * `skills.write` and `skills.delete` (only the agent's own cells change its skills).
 *
 * Every row these write names what caused it: a cell's timers and jobs carry the cell and its
 * frame; a job's carry the job.
 *
 * @module
 */

import { z } from "zod";
import type { JobRecord } from "../../store/tables/jobs.ts";
import { cancelTimer, createTimer, listTimers } from "../../store/tables/timers.ts";
import type { Store } from "../../store/store.ts";
import { routedConversations } from "../behavior/mod.ts";
import { artifactReadRpc } from "../context/mod.ts";
import { discordSendRpc } from "../discord/mod.ts";
import {
  bindRpcs,
  type BoundRpc,
  declareRefused,
  defineRpc,
  type RpcCall,
  type RpcContext,
  skillRpcs,
} from "../kernel/mod.ts";
import { afterThinking, localSendRpc } from "../session/mod.ts";
import type { Budget } from "./_budget.ts";
import type { JobRunner } from "./_job_runner.ts";
import { childCall, type ModelCallDeps } from "./_model_calls.ts";
import { jobView, timerView } from "./_views.ts";

/** Where an RPC comes from: a session's cell (in a frame) or a job's workbench. */
export interface RpcScope {
  session: string;
  /** The frame whose turn is running; null outside a turn and in a job. */
  frame: () => { id: string; routing: unknown; policyRevision?: string } | null;
  /** The release a job started here is pinned to when the frame names none. */
  release: () => string;
  /** The workspace a job started here is pinned to. */
  workspace: string;
  /** Set for a job's workbench: the job its calls belong to. */
  job?: JobRecord;
}

/** What the handlers need. */
export interface RpcDeps extends ModelCallDeps {
  store: Store;
  budget: Budget;
  runner: JobRunner;
  /** Re-arms the timer scheduler after a timer was set or cancelled. */
  pokeTimers: () => void;
}

const ROUTES = ["main", "fast", "long"] as const;

/** The last millisecond of 9999-12-31 UTC: a later due time is no date a record can name. */
const LAST_DUE_MS = 253_402_300_799_999;

const TimerAt = z.strictObject({
  seconds: z.number().positive().max(366 * 86_400).optional(),
  until_ms: z.number().int().nonnegative().max(LAST_DUE_MS).optional(),
  note: z.string().max(2000).default(""),
  wait: z.boolean().default(false),
}).refine((p) => (p.seconds === undefined) !== (p.until_ms === undefined), {
  message: "give seconds or until_ms, not both or neither",
});
const JobStart = z.strictObject({
  code: z.string().min(1).max(1 << 20),
  name: z.string().min(1).max(200).nullable().default(null),
  kind: z.enum(["code", "agent"]).default("code"),
  route: z.enum(ROUTES).nullable().default(null),
  budget: z.strictObject({
    wall_time_s: z.number().positive().optional(),
    model_requests: z.int().nonnegative().optional(),
    tokens: z.int().nonnegative().optional(),
  }).nullable().default(null),
});
const Llm = z.strictObject({
  prompt: z.string().min(1).max(1 << 20),
  route: z.enum(ROUTES).default("fast"),
  max_tokens: z.int().positive().nullable().default(null),
  budget: z.int().positive().nullable().default(null),
  system: z.string().max(1 << 16).nullable().default(null),
});

/**
 * The causation of a call from `scope`: a cell (with its frame), or a job — and, in a child
 * agent, the agent's cell that made it, whose effects it is among.
 */
function causation(scope: RpcScope, ctx: RpcContext) {
  const { session, job } = scope;
  return job === undefined
    ? {
      session,
      frameId: scope.frame()?.id ?? null,
      cellId: ctx.cell,
      jobId: null,
      childCellId: null,
    }
    : {
      session,
      frameId: job.frameId,
      cellId: null,
      jobId: job.id,
      childCellId: job.kind === "agent" ? ctx.cell : null,
    };
}

function conversationOf(scope: RpcScope): string {
  if (scope.job !== undefined) return scope.job.conversation;
  return routedConversations(scope.frame()?.routing)[0] ?? "local:default";
}

/** What the unattended RPCs are bound to: the daemon's parts and the scope of the caller. */
export interface UnattendedRpcDeps extends RpcDeps {
  scope: RpcScope;
}

const ROLES = ["workbench", "job"] as const;
const Timer = z.object({ timer_id: z.string(), state: z.string(), due_at: z.number() });
const Job = z.object({ job_id: z.string(), kind: z.string(), state: z.string() });
const TimerId = z.strictObject({ timer_id: z.string().min(1).max(64) });
const JobId = z.strictObject({ job_id: z.string().min(1).max(64) });

/** Who cancels: a cell or a job. */
function canceller(scope: RpcScope): string {
  return scope.job === undefined ? "a cell" : `job ${scope.job.id}`;
}

/** `timers.at`: a durable timer that wakes the agent (or only notes) when due. */
export const timersAtRpc = defineRpc({
  name: "timers.at",
  summary: "Sets a durable timer, in `seconds` or at `until_ms`; with `wait` the agent is " +
    "woken when it fires.",
  roles: ROLES,
  action: "set timer",
  args: TimerAt,
  reply: Timer,
  handler: (p, call: RpcCall<UnattendedRpcDeps>) => {
    const { deps } = call;
    const c = causation(deps.scope, call);
    const timer = createTimer(deps.store, {
      session: deps.scope.session,
      dueAt: p.until_ms ?? deps.store.clock() + Math.ceil(p.seconds! * 1000),
      note: p.note,
      conversation: conversationOf(deps.scope),
      wait: p.wait,
      frameId: c.frameId,
      cellId: c.cellId,
      jobId: c.jobId,
      childCellId: c.childCellId,
    });
    deps.pokeTimers();
    return timerView(timer);
  },
});

/** `timers.cancel`: cancels a pending timer of the session. */
export const timersCancelRpc = defineRpc({
  name: "timers.cancel",
  summary: "Cancels a pending timer; says whether it was still pending.",
  roles: ROLES,
  action: "cancel timer",
  args: TimerId,
  reply: Timer.extend({ cancelled: z.boolean() }),
  handler: (p, { deps }: RpcCall<UnattendedRpcDeps>) => {
    const done = cancelTimer(deps.store, {
      session: deps.scope.session,
      id: p.timer_id,
      cause: `cancelled by ${canceller(deps.scope)}`,
    });
    deps.pokeTimers();
    return { cancelled: done.cancelled, ...timerView(done.timer) };
  },
});

/** `timers.list`: the session's pending timers (all with `all`). */
export const timersListRpc = defineRpc({
  name: "timers.list",
  summary: "Lists the session's pending timers, or every kept one with `all`.",
  roles: ROLES,
  action: "list timers",
  args: z.strictObject({ all: z.boolean().default(false) }),
  reply: z.array(Timer),
  handler: (p, { deps }: RpcCall<UnattendedRpcDeps>) =>
    listTimers(deps.store, deps.scope.session, { all: p.all }).map(timerView),
});

/** `jobs.start`: a code or agent job, pinned to the caller's release and workspace. */
export const jobsStartRpc = defineRpc({
  name: "jobs.start",
  summary: "Starts a code or agent job in its own workbench under a budget; a job started in " +
    "a job is its child.",
  roles: ROLES,
  action: "start job",
  args: JobStart,
  reply: Job,
  handler: async (p, call: RpcCall<UnattendedRpcDeps>) => {
    const { deps } = call;
    const { scope } = deps;
    const c = causation(scope, call);
    const frame = scope.frame();
    const asked = p.budget ?? {};
    const job = deps.runner.create({
      session: scope.session,
      kind: p.kind,
      name: p.name ?? (p.kind === "agent" ? "agent" : "job"),
      code: p.code,
      route: p.kind === "agent" ? p.route ?? "main" : null,
      budget: deps.budget.jobBudget({
        wall_time_ms: asked.wall_time_s === undefined
          ? undefined
          : Math.ceil(asked.wall_time_s * 1000),
        model_requests: asked.model_requests,
        tokens: asked.tokens,
      }, scope.job === undefined ? undefined : deps.runner.require(undefined, scope.job.id)),
      releaseId: scope.job?.releaseId ?? frame?.policyRevision ?? scope.release(),
      workspace: scope.job?.workspace ?? await Deno.realPath(scope.workspace),
      conversation: conversationOf(scope),
      frameId: c.frameId,
      cellId: c.cellId,
      parentJobId: c.jobId,
      childCellId: c.childCellId,
      cause: scope.job === undefined
        ? `started by cell ${call.cell}`
        : `started by job ${scope.job.id}`,
    });
    return jobView(job);
  },
});

/** `jobs.status`: one job of the session. */
export const jobsStatusRpc = defineRpc({
  name: "jobs.status",
  summary: "Reads one job of the session.",
  roles: ROLES,
  action: "read job",
  args: JobId,
  reply: Job,
  handler: (p, { deps }: RpcCall<UnattendedRpcDeps>) =>
    jobView(deps.runner.require(deps.scope.session, p.job_id)),
});

/** `jobs.list`: the session's jobs. */
export const jobsListRpc = defineRpc({
  name: "jobs.list",
  summary: "Lists the session's jobs.",
  roles: ROLES,
  action: "list jobs",
  args: z.object({}),
  reply: z.array(Job),
  handler: (_p, { deps }: RpcCall<UnattendedRpcDeps>) =>
    deps.runner.list(deps.scope.session).map((job) => jobView(job)),
});

/** `jobs.cancel`: ends a job (its whole process group). */
export const jobsCancelRpc = defineRpc({
  name: "jobs.cancel",
  summary: "Cancels a job: its workbench's process group is killed; answers the ended job.",
  roles: ROLES,
  action: "cancel job",
  args: JobId,
  reply: Job,
  handler: async (p, { deps }: RpcCall<UnattendedRpcDeps>) =>
    jobView(
      await deps.runner.cancel(
        deps.scope.session,
        p.job_id,
        `cancelled by ${canceller(deps.scope)}`,
      ),
      true,
    ),
});

/** `jobs.result`: waits for a job to end and answers it with its result. */
export const jobsResultRpc = defineRpc({
  name: "jobs.result",
  summary: "Waits for a job to end and answers it with its result.",
  roles: ROLES,
  action: "wait for job",
  args: JobId,
  reply: Job,
  handler: async (p, call: RpcCall<UnattendedRpcDeps>) =>
    jobView(await call.deps.runner.result(call.deps.scope.session, p.job_id, call.signal), true),
});

/** `llm`: one child model request on a route, recorded with its causation. */
export const llmRpc = defineRpc({
  name: "llm",
  summary: "One child model request on a route (no tools), recorded with its causation and " +
    "counted against the budgets.",
  roles: ROLES,
  action: "call llm",
  args: Llm,
  reply: z.strictObject({
    call_id: z.string(),
    text: z.string(),
    route: z.enum(ROUTES),
    usage: z.strictObject({
      prompt_tokens: z.int().nullable(),
      completion_tokens: z.int().nullable(),
    }),
    finish_reason: z.string().nullable(),
  }),
  handler: async (p, call: RpcCall<UnattendedRpcDeps>) => {
    const reply = await childCall(call.deps, {
      causation: causation(call.deps.scope, call),
      kind: "llm",
      route: p.route,
      messages: [
        ...(p.system === null ? [] : [{ role: "system" as const, content: p.system }]),
        { role: "user", content: p.prompt },
      ],
      summary: { prompt: p.prompt.slice(0, 20_000), system: p.system?.slice(0, 2_000) ?? null },
      maxTokens: p.max_tokens ?? undefined,
      callTokens: p.budget ?? undefined,
      tools: false,
      signal: call.signal,
    });
    return {
      call_id: reply.callId,
      text: answerOf(reply.turn.text),
      route: p.route,
      usage: {
        prompt_tokens: reply.turn.usage.promptTokens ?? null,
        completion_tokens: reply.turn.usage.completionTokens ?? null,
      },
      finish_reason: reply.turn.finishReason,
    };
  },
});

/** The `timers.*`, `jobs.*` and `llm` RPCs of a session's cells and of a job's workbench. */
export const unattendedRpcs = [
  timersAtRpc,
  timersCancelRpc,
  timersListRpc,
  jobsStartRpc,
  jobsStatusRpc,
  jobsListRpc,
  jobsCancelRpc,
  jobsResultRpc,
  llmRpc,
];

/**
 * The RPCs of one scope, bound: a session's cells get the unattended ones; a job's workbench
 * gets them with `artifact.read`, and is refused the speech and skill RPCs (a job never speaks;
 * only the agent's own cells change its skills).
 *
 * @example
 * ```ts
 * new KernelSupervisor({ ..., rpc: unattendedRpcsOf(deps, scope) });
 * ```
 */
export function unattendedRpcsOf(deps: RpcDeps, scope: RpcScope): BoundRpc[] {
  const bound = bindRpcs(unattendedRpcs, { ...deps, scope });
  if (scope.job === undefined) return bound;
  return [
    ...bound,
    ...bindRpcs([artifactReadRpc], { store: deps.store }),
    ...declareRefused([localSendRpc, discordSendRpc, ...skillRpcs], ["job"]),
  ];
}

/**
 * What `llm()` answers: the reply's text without the thinking its server left in it (the call's
 * record keeps the reply whole), and without the blank lines that stood after the thinking.
 */
function answerOf(text: string): string {
  const answer = afterThinking(text);
  return answer === text ? text : answer.trimStart();
}
