/**
 * The shapes of `/health` and of each operator command's `op.result`, as zod schemas: the page
 * and the CLI read fields by these names instead of guessing them. Objects are loose (a newer
 * daemon may add fields), but every field named here is checked; a test parses the real
 * daemon's `/health` and each command's answer with them.
 *
 * @module
 */

import * as z from "zod";
import { KlbrError } from "./_errors.ts";
import { describeIssues } from "./_issues.ts";

const count = z.number().int().nonnegative();
const ms = z.number().nullable();

/** The operator's hold on a session's loop. */
export const SessionState = z.enum(["running", "stopped", "draining", "drained"]);
/** A session loop's state. */
export type SessionState = z.infer<typeof SessionState>;

/** A part's state in `/health` (the model, the artifact store). */
export const PartHealth = z.looseObject({
  state: z.string(),
  route: z.string().optional(),
  error: z.string().nullable(),
  /** When the current state began, in ms; `null` when `ok`. */
  since: ms,
});
/** A part's state in `/health`. */
export type PartHealth = z.infer<typeof PartHealth>;

/** A spent hourly budget: what, how much, until when, and what it pauses. */
export const SpentBudget = z.looseObject({
  what: z.string(),
  limit: z.number(),
  used: z.number(),
  until: z.string().nullable(),
  frees_in_s: z.number().nullable(),
  effect: z.string(),
});
/** A spent hourly budget. */
export type SpentBudget = z.infer<typeof SpentBudget>;

const usedOf = z.looseObject({ used: z.number(), limit: z.number() });

/** The daemon's budgets, as `status`, `jobs` and `budget` show them. */
const BudgetStatus = z.looseObject({
  over_budget: z.array(SpentBudget),
  model_requests_hour: usedOf.extend({ configured: z.number() }),
  tokens_hour: usedOf,
  child_share_percent: z.number(),
  child_requests_hour: usedOf,
  child_tokens_hour: usedOf,
  window_reset_at: z.string().nullable(),
  jobs: z.looseObject({ running: count, limit: count, waiting: count }),
  processes: z.looseObject({ in_use: count, limit: count, waiting: count }),
});

/**
 * What a session learned of one route's server and still holds (`route.adapted`), as `status`
 * and `/health` show it: only what differs from the route's configuration.
 */
export const AdaptedRoute = z.looseObject({
  route: z.string(),
  /** `text` when an `auto` route moved to text-mode cells. */
  tool_calls: z.literal("text").optional(),
  /** `strict` when the server refused a role order. */
  role_order: z.literal("strict").optional(),
  /** The largest request, when the server's context is smaller than the configured one. */
  context_tokens: count.optional(),
  /** The route's configured `context_tokens`, beside the learned one. */
  configured_context_tokens: count.optional(),
});
/** A route's learned mode. */
export type AdaptedRoute = z.infer<typeof AdaptedRoute>;

/**
 * A route's learned mode in words, with how to make it the configuration.
 *
 * @example
 * ```ts
 * adaptedRouteText({ route: "main", context_tokens: 6000, configured_context_tokens: 32768 });
 * // "route main learned its server: requests within 6000 tokens (configured 32768); set it …"
 * ```
 */
export function adaptedRouteText(adapted: AdaptedRoute): string {
  const learned = [
    ...(adapted.tool_calls === "text" ? ['text-mode cells (tool_calls "text")'] : []),
    ...(adapted.role_order === "strict" ? ['strict role order (role_order "strict")'] : []),
    ...(adapted.context_tokens === undefined ? [] : [
      `requests within ${adapted.context_tokens} tokens (configured ${adapted.configured_context_tokens})`,
    ]),
  ];
  return `route ${adapted.route} learned its server: ${learned.join(", ")}; ` +
    `set it in the route's configuration to start there, or fix the server`;
}

/** The daemon's `/health` report (HTTP 503 when `ok` is false). */
export const HealthReport = z.looseObject({
  ok: z.boolean(),
  status: z.enum(["ok", "degraded", "failing"]),
  /** One sentence each: why it is not `ok`. */
  reasons: z.array(z.string()),
  admitting: z.boolean(),
  store: z.looseObject({ state: z.string(), error: z.string().nullable(), since: ms }),
  store_writable: z.boolean(),
  model: PartHealth,
  artifacts: PartHealth,
  discord: z.looseObject({ state: z.string(), fix: z.string().nullable().optional() }).nullable(),
  /** The default session's loop; `waiting_reason` says why new messages wait, with the fix. */
  session_state: SessionState,
  waiting_reason: z.string().nullable(),
  stalled: z.boolean(),
  oldest_pending_age_ms: ms,
  pending_inputs: count,
  waiting_inputs: count,
  /** The pending inputs a hook holds back (failed last, or running past the threshold), else 0. */
  hook_backlog: count,
  last_hook_failure: z.string().nullable(),
  running_jobs: count,
  pending_jobs: count,
  pending_timers: count,
  due_timers: count,
  /** The default session's routes that adapted to their servers. */
  routes_adapted: z.array(AdaptedRoute),
  over_budget: z.array(SpentBudget),
  sandbox: z.string(),
  sandbox_reason: z.string().nullable(),
  version: z.string(),
});
/** The daemon's `/health` report. */
export type HealthReport = z.infer<typeof HealthReport>;

/** One session in `op.status`. */
export const SessionStatus = z.looseObject({
  state: SessionState,
  pending_inputs: count,
  oldest_pending_age_ms: ms,
  waiting_inputs: count,
  waiting_threshold_ms: z.number(),
  waiting: z.array(z.looseObject({ id: z.string(), waited_ms: z.number() })),
  consecutive_failures: count,
  stalled: z.boolean(),
  last_hook_failure: z.string().nullable(),
  current_frame: z.looseObject({ id: z.string(), number: count, running_ms: z.number() })
    .nullable(),
  head_seq: z.number().int(),
  behavior_epoch: count,
  active_release: z.string(),
  last_good_release: z.string().nullable(),
  kernel_generation: count,
  kernel_alive: z.boolean(),
  hook_calls: count,
  routes_adapted: z.array(AdaptedRoute),
  running_jobs: count,
  pending_jobs: count,
  pending_timers: count,
  due_timers: count,
});
/** One session in `op.status`. */
export type SessionStatus = z.infer<typeof SessionStatus>;

/** `op.status`: the daemon and each running session. */
export const StatusResult = z.looseObject({
  version: z.string(),
  admitting: z.boolean(),
  recovered_release: z.string().nullable(),
  budget: BudgetStatus,
  sessions: z.record(z.string(), SessionStatus),
});
/** `op.status`. */
export type StatusResult = z.infer<typeof StatusResult>;

/** A job as the operator sees it. */
const JobView = z.looseObject({
  job_id: z.string(),
  name: z.string(),
  kind: z.string(),
  state: z.string(),
  cause: z.string().nullable(),
  requests_used: z.number(),
  tokens_used: z.number(),
  created: z.string().nullable(),
  ended: z.string().nullable(),
});

/** A timer as the operator sees it. */
const TimerView = z.looseObject({
  timer_id: z.string(),
  state: z.string(),
  note: z.string().nullable(),
  due: z.string().nullable(),
  cause: z.string().nullable(),
});

/** `op.jobs`: the session's jobs and timers, their counts and the budgets. */
const JobsResult = z.looseObject({
  session: z.string(),
  jobs: z.array(JobView),
  timers: z.array(TimerView),
  running_jobs: count,
  pending_jobs: count,
  pending_timers: count,
  due_timers: count,
  budget: BudgetStatus,
});

/** A failed behaviour candidate with its checks. */
const CandidateView = z.looseObject({
  id: z.string(),
  draft_id: z.string(),
  action: z.string(),
  revision: z.string(),
  at: z.number(),
  failing: z.array(z.string()),
  checks: z.array(z.looseObject({ hook: z.string(), ok: z.boolean(), detail: z.string() })),
});

/** `op.candidates`, newest first. */
export const CandidatesResult = z.looseObject({ candidates: z.array(CandidateView) });
/** `op.candidates`. */
export type CandidatesResult = z.infer<typeof CandidatesResult>;

/** One hook invocation trace. */
export const TraceView = z.looseObject({
  id: z.string(),
  hook: z.string(),
  release_id: z.string().nullable(),
  frame_id: z.string().nullable(),
  origin: z.string(),
  error: z.unknown(),
  truncated: z.boolean(),
  duration_ms: z.number(),
  at: z.number(),
});
/** One hook invocation trace. */
export type TraceView = z.infer<typeof TraceView>;

/** `op.trace`: every trace of a frame, or one trace. */
export const TraceResult = z.union([
  z.looseObject({ traces: z.array(TraceView) }),
  z.looseObject({ trace: TraceView }),
]);
/** `op.trace`. */
export type TraceResult = z.infer<typeof TraceResult>;

/** A command that changed something: what it did, in words, and fields of its own. */
const ActionResult = z.looseObject({ message: z.string().optional() });

/** `op.stop`, `op.drain`: the loop's state after it. */
const HoldResult = z.looseObject({ state: SessionState, message: z.string() });

/** `op.resume`: whether it resumed, from which state. */
const ResumeResult = z.looseObject({
  state: SessionState,
  resumed: z.boolean(),
  previous_state: SessionState.optional(),
  message: z.string(),
});

/** `op.budget`. */
const BudgetResult = z.looseObject({ budget: BudgetStatus, message: z.string().optional() });

/** `op.context`: what the next request would carry, and what it leaves out. */
export const ContextResult = z.looseObject({
  session: z.string(),
  route: z.string(),
  budget: z.looseObject({
    context_tokens: count,
    compact_at_tokens: count,
    /** The estimate of the whole request (contract, summary, items, note), in provider tokens. */
    used_tokens: count,
    /** Provider tokens per raw token, as the route's replies taught it. */
    ratio: z.number(),
  }),
  system_tokens: count,
  summary: z.looseObject({
    epoch: count,
    covers_to_idx: count,
    source: z.string(),
    tokens: count,
    text: z.string(),
    at: z.number(),
  }).nullable(),
  /**
   * Each item carried: `tokens` is the provider-token estimate (the raw estimate times the
   * route's calibration), `preview` the start of its text, a tool call's code or a tool result.
   */
  items: z.array(
    z.looseObject({ idx: count, role: z.string(), tokens: count, preview: z.string() }),
  ),
  left_out: z.array(
    z.looseObject({ from_idx: count, to_idx: count, count, reason: z.string() }),
  ),
  /** True when the next request compacts first. */
  over_compact: z.boolean(),
});
/** `op.context`. */
export type ContextResult = z.infer<typeof ContextResult>;

/** One frame in `op.frames`. */
const FrameView = z.looseObject({
  frame_id: z.string(),
  number: count,
  state: z.enum(["open", "done", "failed", "abandoned"]),
  inputs: count,
  created_at: z.number(),
  ended_at: z.number().nullable(),
  reason: z.string().nullable(),
});

/** `op.frames`: the newest frames first. */
export const FramesResult = z.looseObject({ session: z.string(), frames: z.array(FrameView) });
/** `op.frames`. */
export type FramesResult = z.infer<typeof FramesResult>;

/** `op.history_search`: what a cell's `history.search` answers. */
export const SearchResult = z.looseObject({
  results: z.array(z.looseObject({
    id: z.string(),
    kind: z.string(),
    snippet: z.string(),
    at: z.number().nullable(),
  })),
  truncated: z.boolean(),
});
/** `op.history_search`. */
export type SearchResult = z.infer<typeof SearchResult>;

/** The schema of each operator command's result, by kind. */
export const OPERATOR_RESULTS = {
  "op.status": StatusResult,
  "op.reset": ActionResult.extend({ generation: count, heap_restored: z.literal(false) }),
  "op.compact": ActionResult.extend({ compacted: z.boolean() }),
  "op.repair": ActionResult.extend({ repaired: z.boolean() }),
  "op.drain": HoldResult,
  "op.stop": HoldResult,
  "op.resume": ResumeResult,
  "op.activate": z.looseObject({ epoch: count, release_id: z.string() }),
  "op.cancel_cell": ActionResult.extend({ cell: z.string() }),
  "op.jobs": JobsResult,
  "op.cancel_job": JobView.extend({ cancelled: z.boolean() }),
  "op.rollback": z.looseObject({ epoch: count, release_id: z.string() }),
  "op.maintain": ActionResult.extend({ input_id: z.string(), seq: count }),
  "op.candidates": CandidatesResult,
  "op.trace": TraceResult,
  "op.budget": BudgetResult,
  "op.token_rotate": z.looseObject({}),
  "op.context": ContextResult,
  "op.frames": FramesResult,
  "op.history_search": SearchResult,
} as const;

/** An operator kind whose result has a schema. */
export type OperatorResultKind = keyof typeof OPERATOR_RESULTS;

/**
 * Parses `value` as the result of operator command `kind`.
 *
 * @example
 * ```ts
 * const status = parseOperatorResult("op.status", reply.result);
 * status.sessions.default.state; // "running"
 * ```
 * @throws {KlbrError} `invalid_input` naming each field that does not match.
 */
export function parseOperatorResult<K extends OperatorResultKind>(
  kind: K,
  value: unknown,
): z.infer<(typeof OPERATOR_RESULTS)[K]> {
  const parsed = OPERATOR_RESULTS[kind].safeParse(value);
  if (parsed.success) return parsed.data as z.infer<(typeof OPERATOR_RESULTS)[K]>;
  throw new KlbrError(
    "invalid_input",
    `cannot read the ${kind} result: ${describeIssues(parsed.error)}`,
  );
}
