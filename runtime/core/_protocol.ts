/**
 * The host ↔ workbench envelopes, as zod schemas: the requests and RPC replies the host
 * writes, the frames a worker writes, and the bodies of `execute` results and of the
 * `workspace.run` and `local.send` RPCs. TypeScript types come from `z.infer`, never written
 * out twice. The v2 client lane protocol is in `_lane_protocol.ts`.
 *
 * The role boundary lives here too: {@linkcode parseWorkerFrame} accepts only the kinds a
 * worker may emit.
 *
 * @module
 */

import * as z from "zod";
import { KlbrError } from "./_errors.ts";
import { describeIssues } from "./_issues.ts";

const requestId = z.string().min(1);

/** Skill set handed to a worker at spawn; the worker never reads a skills root itself. */
export const SkillsPayload = z.object({
  revision: z.string(),
  roots: z.array(z.string()),
  bodies: z.record(z.string(), z.string()),
  refused: z.array(z.object({ id: z.string(), root: z.string(), reason: z.string() })),
});
/** The skill set of one kernel generation. */
export type SkillsPayload = z.infer<typeof SkillsPayload>;

/** Names of the policy hooks a hook worker can run. */
export const HookName = z.enum(["attention.plan", "model.plan", "context.prepare", "turn.next"]);
/** A policy hook name. */
export type HookName = z.infer<typeof HookName>;

/** A behaviour tree a worker loads hooks from: its revision (the release id) and directory. */
export const BehaviorRef = z.object({ revision: z.string(), path: z.string() });
/** A behaviour tree by revision and path. */
export type BehaviorRef = z.infer<typeof BehaviorRef>;

/** Requests the host sends to a worker; each gets exactly one `ok` or `error` reply. */
export const HostRequest = z.discriminatedUnion("kind", [
  z.object({
    kind: z.literal("init"),
    id: requestId,
    generation: z.number().int().nonnegative(),
    session: z.string(),
    workspace: z.string(),
    /** Directories the workspace API refuses even inside the root (the state directory). */
    deny: z.array(z.string()).optional(),
    skills: SkillsPayload,
    behavior: BehaviorRef.nullable(),
  }),
  z.object({ kind: z.literal("execute"), id: requestId, cell: z.string(), code: z.string() }),
  z.object({ kind: z.literal("cancel"), id: requestId, target: requestId }),
  z.object({
    kind: z.literal("hook"),
    id: requestId,
    name: HookName,
    args: z.record(z.string(), z.unknown()),
    /** The release to run the hook from; the one given at `init` when absent. */
    behavior: BehaviorRef.optional(),
    /** `context.prepare`'s messages, then absent from `args`. */
    messages: z.array(z.unknown()).optional(),
  }),
  z.object({
    kind: z.literal("test"),
    id: requestId,
    /** The draft whose `tests/test_*.py` run. */
    behavior: BehaviorRef,
    /** How long one test function may run. */
    timeout_ms: z.number().int().positive(),
    /** The most test functions run; past it, the rest are reported not run. */
    max_tests: z.number().int().positive(),
  }),
  z.object({ kind: z.literal("ping"), id: requestId }),
  z.object({ kind: z.literal("fingerprint"), id: requestId }),
  z.object({ kind: z.literal("shutdown"), id: requestId }),
]);
/** A host → worker request. */
export type HostRequest = z.infer<typeof HostRequest>;

/** The host's answers to a worker's `rpc`. */
export const HostRpcReply = z.discriminatedUnion("kind", [
  z.object({ kind: z.literal("rpc_ok"), id: requestId, result: z.unknown() }),
  z.object({ kind: z.literal("rpc_error"), id: requestId, code: z.string(), message: z.string() }),
]);
/** A host → worker RPC reply. */
export type HostRpcReply = z.infer<typeof HostRpcReply>;

/** Every frame the host may write. */
export const HostFrame = z.union([HostRequest, HostRpcReply]);
/** A host → worker frame. */
export type HostFrame = z.infer<typeof HostFrame>;

/** Every frame a worker may write; host-only kinds are absent on purpose. */
export const WorkerFrame = z.discriminatedUnion("kind", [
  z.object({ kind: z.literal("ok"), id: z.string(), result: z.unknown() }),
  z.object({
    kind: z.literal("error"),
    id: z.string(),
    code: z.string(),
    message: z.string(),
    traceback: z.string().optional(),
  }),
  z.object({
    kind: z.literal("stream"),
    id: requestId,
    name: z.enum(["stdout", "stderr"]),
    text: z.string(),
  }),
  z.object({
    kind: z.literal("rpc"),
    id: requestId,
    parent: z.string(),
    method: z.string(),
    params: z.record(z.string(), z.unknown()),
  }),
  z.object({ kind: z.literal("rpc_cancel"), id: requestId }),
]);
/** A worker → host frame. */
export type WorkerFrame = z.infer<typeof WorkerFrame>;

/** The `ok.result` of an `execute` request. */
export const CellReply = z.object({
  outcome: z.enum(["ok", "error", "cancelled"]),
  value: z.string().nullable(),
  stdout: z.string(),
  stderr: z.string(),
  error: z.object({ type: z.string(), message: z.string(), traceback: z.string() }).nullable(),
  /** Set when the cell called `wait()`; `wait(seconds=…)` adds the durable timer it armed. */
  wait: z.object({
    reason: z.string(),
    timer_id: z.string().optional(),
    due_at: z.number().int().optional(),
  }).nullable(),
  duration_ms: z.number().nonnegative(),
  /** What the cell showed with `display()`, in order: an image or HTML, base64. */
  displays: z.array(z.object({
    mime: z.enum(["image/png", "image/jpeg", "image/gif", "image/webp", "text/html"]),
    data_b64: z.string(),
  })).optional(),
});
/** What a worker reports for one cell. */
export type CellReply = z.infer<typeof CellReply>;

/** The `ok.result` of a `test` request: one entry per test function (or file that failed to load). */
export const DraftTestReply = z.object({
  tests: z.array(z.object({
    /** `tests/<file>::<function>`, or `tests/<file>` when the file itself failed to load. */
    name: z.string(),
    ok: z.boolean(),
    duration_ms: z.number().nonnegative(),
    /** What the test printed (stdout, then stderr), capped. */
    output: z.string(),
    error: z.object({ type: z.string(), message: z.string(), traceback: z.string() }).nullable(),
  })),
});
/** What a worker reports for the tests of a draft. */
export type DraftTestReply = z.infer<typeof DraftTestReply>;

/** Parameters of the `skills.write` RPC: a managed skill's id and its whole `SKILL.md`. */
export const SkillWriteParams = z.strictObject({
  id: z.string().min(1).max(200),
  body: z.string(),
});
/** A `skills.write` request. */
export type SkillWriteParams = z.infer<typeof SkillWriteParams>;

/** Parameters of the `skills.delete` RPC. */
export const SkillDeleteParams = z.strictObject({ id: z.string().min(1).max(200) });
/** A `skills.delete` request. */
export type SkillDeleteParams = z.infer<typeof SkillDeleteParams>;

/** Parameters of the `workspace.run` RPC. */
export const RunParams = z.object({
  argv: z.array(z.string()).min(1),
  timeout_s: z.number().positive().max(24 * 3600).default(60),
  cwd: z.string().nullable().default(null),
});
/** A `workspace.run` request. */
export type RunParams = z.infer<typeof RunParams>;

/** Parameters of the `local.send` RPC. */
export const SendParams = z.object({
  text: z.string().min(1).max(1_000_000),
  /** An idempotency key: a second send with the same key in the session sends nothing. */
  key: z.string().min(1).max(200).optional(),
});
/** A `local.send` request. */
export type SendParams = z.infer<typeof SendParams>;

const KNOWN_WORKER_KINDS = new Set(["ok", "error", "stream", "rpc", "rpc_cancel"]);
const HOST_ONLY_KINDS = new Set<string>(
  [...HostRequest.options, ...HostRpcReply.options].map((option) => option.shape.kind.value),
);

/**
 * Validates one decoded frame from a worker.
 *
 * @throws {KlbrError} `role_forbidden` for a host-only kind, `frame_unknown_kind` for any
 * other unknown kind, `frame_invalid` when a known kind has the wrong fields.
 */
export function parseWorkerFrame(value: unknown): WorkerFrame {
  const kind = typeof value === "object" && value !== null && "kind" in value
    ? (value as { kind: unknown }).kind
    : undefined;
  if (typeof kind === "string" && HOST_ONLY_KINDS.has(kind)) {
    throw new KlbrError(
      "role_forbidden",
      `cannot accept worker frame: kind ${JSON.stringify(kind)} is host-only`,
    );
  }
  if (typeof kind !== "string" || !KNOWN_WORKER_KINDS.has(kind)) {
    throw new KlbrError(
      "frame_unknown_kind",
      `cannot accept worker frame: unknown kind (got ${JSON.stringify(kind ?? null)})`,
    );
  }
  const parsed = WorkerFrame.safeParse(value);
  if (!parsed.success) {
    throw new KlbrError(
      "frame_invalid",
      `cannot accept worker frame: ${kind} ${describeIssues(parsed.error)}`,
    );
  }
  return parsed.data;
}
