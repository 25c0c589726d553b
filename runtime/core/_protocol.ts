/**
 * Every envelope klbr exchanges, as zod schemas: host ↔ workbench frames and the v2 client
 * lane protocol. TypeScript types come from `z.infer`, never written out twice.
 *
 * Role boundaries live here too: {@linkcode parseWorkerFrame} accepts only the kinds a
 * worker may emit, and {@linkcode parseClientMessage} refuses operator kinds to a client
 * without the operator role.
 *
 * @module
 */

// A namespace import lets the UI bundle keep only the parts of zod that core uses.
import * as z from "zod";
import { KlbrError } from "./_errors.ts";
import { describeIssues, wellFormed } from "./_issues.ts";

// ---------------------------------------------------------------------------------------
// Host ↔ workbench

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

const Part = z.union([
  z.object({ copy: z.tuple([z.number(), z.number()]) }),
  z.object({ add: z.array(z.unknown()) }),
]);
/** `context.prepare`'s messages: runs of the worker's kept list and new ones (architecture.md). */
const Delta = z.object({ id: requestId, base: requestId.nullable(), parts: z.array(Part) });
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
    /** For `context.prepare` only, then absent from `args`. */
    messages: Delta.optional(),
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
});
/** What a worker reports for one cell. */
export type CellReply = z.infer<typeof CellReply>;

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

// ---------------------------------------------------------------------------------------
// Client ↔ daemon: the v2 lane protocol

const sessionName = z.string().regex(/^[a-z0-9][a-z0-9_-]{0,63}$/, "expected a session name");
const clientRequest = wellFormed(1, 128);

/** Operator kinds; a client needs the operator role (the token) to send them. */
export const OPERATOR_KINDS = [
  "op.status",
  "op.reset",
  "op.compact",
  "op.drain",
  "op.stop",
  "op.activate",
  "op.cancel_cell",
  "op.jobs",
  "op.cancel_job",
  "op.rollback",
  "op.maintain",
  "op.candidates",
  "op.trace",
  "op.token_rotate",
] as const;

/** Every message a client may send over `/v2`. */
export const ClientMessage = z.discriminatedUnion("kind", [
  z.object({
    kind: z.literal("hello"),
    session: sessionName.default("default"),
    /** The last seq the client holds; `"head"` starts after the current head (no catch-up). */
    since: z.union([z.literal("head"), z.number().int().nonnegative()]).default(0),
    token: z.string().optional(),
    client: wellFormed(1, 128).optional(),
    /** Deliver durable records in `records` batches instead of one `record` message each. */
    batch: z.boolean().optional(),
  }),
  z.object({
    kind: z.literal("input"),
    request: clientRequest,
    client_msg_id: wellFormed(1, 128),
    text: z.string().min(1).max(1_000_000),
    conversation: wellFormed(1, 256).default("local:default"),
    author: wellFormed(1, 256).default("owner"),
  }),
  z.object({ kind: z.literal("ping"), request: clientRequest.optional() }),
  z.object({
    kind: z.literal("op.status"),
    request: clientRequest,
    session: sessionName.optional(),
  }),
  z.object({ kind: z.literal("op.reset"), request: clientRequest, session: sessionName }),
  z.object({ kind: z.literal("op.compact"), request: clientRequest, session: sessionName }),
  z.object({ kind: z.literal("op.drain"), request: clientRequest, session: sessionName }),
  z.object({ kind: z.literal("op.stop"), request: clientRequest, session: sessionName }),
  z.object({
    kind: z.literal("op.activate"),
    request: clientRequest,
    session: sessionName,
    epoch: z.number().int().nonnegative(),
    release: z.string().min(1),
  }),
  /** Cancels one running cell; its turn goes on and the model hears it was cancelled. */
  z.object({
    kind: z.literal("op.cancel_cell"),
    request: clientRequest,
    session: sessionName,
    cell: z.string().min(1).max(64),
  }),
  z.object({ kind: z.literal("op.jobs"), request: clientRequest, session: sessionName.optional() }),
  z.object({
    kind: z.literal("op.cancel_job"),
    request: clientRequest,
    job: z.string().min(1).max(64),
    session: sessionName.optional(),
  }),
  z.object({ kind: z.literal("op.rollback"), request: clientRequest, session: sessionName }),
  z.object({
    kind: z.literal("op.maintain"),
    request: clientRequest,
    session: sessionName,
    /** Why the turn is asked for; it is the maintenance input's text. */
    reason: z.string().min(1).max(2000).optional(),
  }),
  z.object({ kind: z.literal("op.candidates"), request: clientRequest, session: sessionName }),
  z.object({
    kind: z.literal("op.trace"),
    request: clientRequest,
    session: sessionName,
    /** A frame id (`fr_…`: every trace of its turn) or a trace id (`tr_…`). */
    target: z.string().min(1).max(64),
  }),
  z.object({ kind: z.literal("op.token_rotate"), request: clientRequest }),
]);
/** A client → daemon message. */
export type ClientMessage = z.infer<typeof ClientMessage>;

/**
 * The role a connection was granted at `hello`: `operator` with the token or the session
 * cookie, `viewer` (read-only) without either, only where the configuration allows it.
 */
export type ClientRole = "viewer" | "operator";

/**
 * Validates one client message against the connection's role.
 *
 * @throws {KlbrError} `invalid_input` for malformed JSON or fields, `role_forbidden` for an
 * operator kind sent without the operator role, or an input from a read-only viewer.
 */
export function parseClientMessage(value: unknown, role: ClientRole): ClientMessage {
  const kind = typeof value === "object" && value !== null && "kind" in value
    ? (value as { kind: unknown }).kind
    : undefined;
  if (
    role !== "operator" && typeof kind === "string" &&
    (OPERATOR_KINDS as readonly string[]).includes(kind)
  ) {
    throw new KlbrError(
      "role_forbidden",
      `cannot run ${kind}: the operator role needs the token given at hello`,
      { status: 403 },
    );
  }
  if (role === "viewer" && kind === "input") {
    throw new KlbrError(
      "role_forbidden",
      "cannot accept input: this connection is read-only (it showed no token or session cookie)",
      { status: 403 },
    );
  }
  const parsed = ClientMessage.safeParse(value);
  if (!parsed.success) {
    throw new KlbrError(
      "invalid_input",
      `cannot accept client message: ${typeof kind === "string" ? kind + " " : ""}${
        describeIssues(parsed.error)
      }`,
    );
  }
  return parsed.data;
}

/** A durable record as clients see it: one row of the session's event log. */
export const LaneRecord = z.object({
  kind: z.literal("record"),
  session: z.string(),
  seq: z.number().int().positive(),
  at: z.number().int(),
  type: z.string(),
  data: z.record(z.string(), z.unknown()),
});
/** A durable, sequenced record. */
export type LaneRecord = z.infer<typeof LaneRecord>;

/** Every message the daemon sends over `/v2`. */
export const ServerMessage = z.discriminatedUnion("kind", [
  z.object({
    kind: z.literal("welcome"),
    session: z.string(),
    role: z.enum(["viewer", "operator"]),
    head: z.number().int().nonnegative(),
    server: z.object({ version: z.string() }),
  }),
  LaneRecord,
  /** Consecutive durable records in seq order, for a client that said `batch: true`. */
  z.object({ kind: z.literal("records"), session: z.string(), records: z.array(LaneRecord) }),
  z.object({ kind: z.literal("replayed"), session: z.string(), head: z.number().int() }),
  z.object({
    kind: z.literal("ack"),
    request: z.string(),
    input_id: z.string(),
    seq: z.number().int().positive(),
    duplicate: z.boolean(),
  }),
  z.object({
    kind: z.literal("op.result"),
    request: z.string(),
    op: z.string(),
    result: z.record(z.string(), z.unknown()),
  }),
  z.object({
    kind: z.literal("error"),
    request: z.string().optional(),
    code: z.string(),
    message: z.string(),
    /** True when the same request may succeed later unchanged (e.g. `store_unavailable`). */
    retriable: z.boolean().optional(),
    /** With `since_beyond_head`: the session's head, where a client may resume instead. */
    head: z.number().int().nonnegative().optional(),
  }),
  z.object({
    kind: z.literal("token"),
    session: z.string(),
    turn: z.string(),
    text: z.string(),
  }),
  z.object({
    kind: z.literal("cell.output"),
    session: z.string(),
    cell: z.string(),
    name: z.enum(["stdout", "stderr"]),
    text: z.string(),
  }),
  z.object({ kind: z.literal("pong"), request: z.string().optional() }),
]);
/** A daemon → client message. */
export type ServerMessage = z.infer<typeof ServerMessage>;
