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

import { Buffer } from "node:buffer";
import { z } from "zod";
import { readArtifact } from "../../store/artifacts.ts";
import type { JobRecord } from "../../store/jobs.ts";
import { cancelTimer, createTimer, listTimers } from "../../store/timers.ts";
import type { Store } from "../../store/store.ts";
import { routedConversations } from "../behavior/mod.ts";
import { describeIssues, type EventBus, KlbrError } from "../core/mod.ts";
import type { RpcContext, RpcHandler } from "../kernel/mod.ts";
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
  bus: EventBus;
  budget: Budget;
  runner: JobRunner;
  /** Re-arms the timer scheduler after a timer was set or cancelled. */
  pokeTimers: () => void;
}

const ROUTES = ["main", "fast", "long"] as const;

const TimerAt = z.strictObject({
  seconds: z.number().positive().max(366 * 86_400).optional(),
  until_ms: z.number().int().nonnegative().optional(),
  note: z.string().max(2000).default(""),
  wait: z.boolean().default(false),
}).refine((p) => (p.seconds === undefined) !== (p.until_ms === undefined), {
  message: "give seconds or until_ms, not both or neither",
});
const ById = (field: string) => z.strictObject({ [field]: z.string().min(1).max(64) });
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

function parse<S extends z.ZodType>(schema: S, params: unknown, action: string): z.output<S> {
  const parsed = schema.safeParse(params);
  if (!parsed.success) {
    throw new KlbrError(
      "invalid_input",
      `cannot ${action}: ${describeIssues(parsed.error)} (got ${
        JSON.stringify(params)?.slice(0, 200)
      })`,
    );
  }
  return parsed.data;
}

/** The causation of a call from `scope`: a cell (with its frame), or a job. */
function causation(scope: RpcScope, ctx: RpcContext) {
  return scope.job === undefined
    ? { session: scope.session, frameId: scope.frame()?.id ?? null, cellId: ctx.cell, jobId: null }
    : { session: scope.session, frameId: scope.job.frameId, cellId: null, jobId: scope.job.id };
}

function conversationOf(scope: RpcScope): string {
  if (scope.job !== undefined) return scope.job.conversation;
  return routedConversations(scope.frame()?.routing)[0] ?? "local:default";
}

/** The `timers.*` handlers. */
function timerHandlers(deps: RpcDeps, scope: RpcScope): Record<string, RpcHandler> {
  return {
    "timers.at": (params, ctx) => {
      const p = parse(TimerAt, params, "set timer");
      const c = causation(scope, ctx);
      const timer = createTimer(deps.store, {
        session: scope.session,
        dueAt: p.until_ms ?? deps.store.clock() + Math.ceil(p.seconds! * 1000),
        note: p.note,
        conversation: conversationOf(scope),
        wait: p.wait,
        frameId: c.frameId,
        cellId: c.cellId,
        jobId: c.jobId,
      });
      deps.pokeTimers();
      return Promise.resolve(timerView(timer));
    },
    "timers.cancel": (params) => {
      const { timer_id } = parse(ById("timer_id"), params, "cancel timer") as { timer_id: string };
      const who = scope.job === undefined ? "a cell" : `job ${scope.job.id}`;
      const done = cancelTimer(deps.store, {
        session: scope.session,
        id: timer_id,
        cause: `cancelled by ${who}`,
      });
      deps.pokeTimers();
      return Promise.resolve({ cancelled: done.cancelled, ...timerView(done.timer) });
    },
    "timers.list": (params) => {
      const { all } = parse(
        z.strictObject({ all: z.boolean().default(false) }),
        params,
        "list timers",
      );
      return Promise.resolve(listTimers(deps.store, scope.session, { all }).map(timerView));
    },
  };
}

/** The `jobs.*` handlers; jobs started in a job are its children. */
function jobHandlers(deps: RpcDeps, scope: RpcScope): Record<string, RpcHandler> {
  const idOf = (params: unknown, action: string) =>
    (parse(ById("job_id"), params, action) as { job_id: string }).job_id;
  return {
    "jobs.start": async (params, ctx) => {
      const p = parse(JobStart, params, "start job");
      const c = causation(scope, ctx);
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
        cause: scope.job === undefined
          ? `started by cell ${ctx.cell}`
          : `started by job ${scope.job.id}`,
      });
      return jobView(job);
    },
    "jobs.status": (params) =>
      Promise.resolve(jobView(deps.runner.require(scope.session, idOf(params, "read job")))),
    "jobs.list": () => Promise.resolve(listJobsOf(deps, scope).map((job) => jobView(job))),
    "jobs.cancel": async (params) => {
      const id = idOf(params, "cancel job");
      const who = scope.job === undefined ? "a cell" : `job ${scope.job.id}`;
      return jobView(await deps.runner.cancel(scope.session, id, `cancelled by ${who}`), true);
    },
    "jobs.result": async (params, ctx) => {
      const id = idOf(params, "wait for job");
      return jobView(await deps.runner.result(scope.session, id, ctx.signal), true);
    },
  };
}

function listJobsOf(deps: RpcDeps, scope: RpcScope): JobRecord[] {
  return deps.runner.list(scope.session);
}

/** The `llm` handler: one child request on a route, recorded with its causation. */
function llmHandler(deps: RpcDeps, scope: RpcScope): RpcHandler {
  return async (params, ctx) => {
    const p = parse(Llm, params, "call llm");
    const reply = await childCall(deps, {
      causation: causation(scope, ctx),
      kind: "llm",
      route: p.route,
      messages: [
        ...(p.system === null ? [] : [{ role: "system" as const, content: p.system }]),
        { role: "user", content: p.prompt },
      ],
      summary: { prompt: p.prompt.slice(0, 20_000), system: p.system?.slice(0, 2_000) ?? null },
      maxTokens: p.max_tokens ?? undefined,
      callTokens: p.budget ?? undefined,
      toolChoice: "none",
      signal: ctx.signal,
    });
    return {
      call_id: reply.callId,
      text: reply.turn.text,
      route: p.route,
      usage: {
        prompt_tokens: reply.turn.usage.promptTokens ?? null,
        completion_tokens: reply.turn.usage.completionTokens ?? null,
      },
      finish_reason: reply.turn.finishReason,
    };
  };
}

/** What a job's workbench gets besides the shared handlers: artifacts, and no speech. */
function jobOnlyHandlers(deps: RpcDeps): Record<string, RpcHandler> {
  const silent: RpcHandler = (_params, ctx) =>
    Promise.reject(
      new KlbrError(
        "forbidden",
        `cannot call ${ctx.method} from a job: a job never speaks to a conversation; return a ` +
          "value and the agent is woken with it",
      ),
    );
  const noSkills: RpcHandler = (_params, ctx) =>
    Promise.reject(
      new KlbrError(
        "forbidden",
        `cannot call ${ctx.method} from a job: only the agent's own cells change its skills; ` +
          "return the skill's text and let the agent write it",
      ),
    );
  return {
    "local.send": silent,
    "discord.send": silent,
    "skills.write": noSkills,
    "skills.delete": noSkills,
    "artifact.read": async (params) => {
      const p = params as { id?: unknown; offset?: unknown; length?: unknown };
      const { data, bytes } = await readArtifact(deps.store.stateDir, String(p.id), {
        offset: typeof p.offset === "number" ? p.offset : undefined,
        length: typeof p.length === "number" ? p.length : undefined,
      });
      return { data_b64: Buffer.from(data).toString("base64"), bytes };
    },
  };
}

/** The handlers of one scope: a session's cells, or one job's workbench. */
export function unattendedHandlers(deps: RpcDeps, scope: RpcScope): Record<string, RpcHandler> {
  return {
    ...timerHandlers(deps, scope),
    ...jobHandlers(deps, scope),
    llm: llmHandler(deps, scope),
    ...(scope.job === undefined ? {} : jobOnlyHandlers(deps)),
  };
}
