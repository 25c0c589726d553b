/**
 * The v2 lane protocol between clients and the daemon, as zod schemas: every message a client
 * may send over `/v2` and every message the daemon sends. TypeScript types come from
 * `z.infer`, never written out twice. The host ↔ workbench frames are in `_protocol.ts`.
 *
 * The role boundary lives here too: {@linkcode parseClientMessage} refuses operator kinds to
 * a client without the operator role, and input to a read-only viewer.
 *
 * @module
 */

import * as z from "zod";
import { KlbrError } from "./_errors.ts";
import { describeIssues, wellFormed } from "./_issues.ts";

const sessionName = z.string().regex(/^[a-z0-9][a-z0-9_-]{0,63}$/, "expected a session name");
const clientRequest = wellFormed(1, 128);

/** The most files one input may carry. */
export const MAX_ATTACHMENTS = 16;

/** A file an input carries: a kept attachment's id, with the name and type the client gave. */
export const InputAttachment = z.object({
  artifact: z.string().regex(/^[0-9a-f]{64}$/, "expected the artifact id POST /attachments gave"),
  filename: wellFormed(1, 256),
  content_type: z.string().max(256).nullable().default(null),
});
/** A file an input carries, as a client names it. */
export type InputAttachment = z.infer<typeof InputAttachment>;

/** The most records one `hello.page` or one `page` request may ask for. */
const MAX_PAGE = 5000;

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
    /**
     * With `since: "head"`: also send the newest `page` records before the head (the catch-up
     * starts at `head - page`), so a page opens on the session's latest records at once.
     */
    page: z.number().int().min(1).max(MAX_PAGE).optional(),
  }),
  /**
   * Asks for up to `limit` durable records with `seq < before`, the newest of them: the page
   * of records before the oldest one a client holds ("load earlier"). Viewers may ask too.
   */
  z.object({
    kind: z.literal("page"),
    request: clientRequest,
    before: z.number().int().min(1),
    limit: z.number().int().min(1).max(MAX_PAGE),
    /**
     * Only what one conversation needs: its newest inputs before `before` and the records of
     * the frames that took them up (at most `limit` records), for a conversation whose
     * messages lie behind a busier one's.
     */
    conversation: wellFormed(1, 256).optional(),
  }),
  z.object({
    kind: z.literal("input"),
    request: clientRequest,
    client_msg_id: wellFormed(1, 128),
    /** The message; it may be empty when the input carries attachments. */
    text: z.string().max(1_000_000),
    conversation: wellFormed(1, 256).default("local:default"),
    author: wellFormed(1, 256).default("owner"),
    /**
     * Files uploaded first with `POST /attachments`, by the id it answered; admission checks
     * each is a kept attachment and adds its size.
     */
    attachments: z.array(InputAttachment).max(MAX_ATTACHMENTS).optional(),
  }).refine((m) => m.text.length > 0 || (m.attachments?.length ?? 0) > 0, {
    path: ["text"],
    message: "Too small: expected string to have >=1 characters, or an attachment",
  }),
  z.object({ kind: z.literal("ping"), request: clientRequest.optional() }),
  z.object({
    kind: z.literal("op.status"),
    request: clientRequest,
    session: sessionName.optional(),
  }),
  z.object({ kind: z.literal("op.reset"), request: clientRequest, session: sessionName }),
  z.object({ kind: z.literal("op.compact"), request: clientRequest, session: sessionName }),
  z.object({ kind: z.literal("op.repair"), request: clientRequest, session: sessionName }),
  z.object({ kind: z.literal("op.drain"), request: clientRequest, session: sessionName }),
  z.object({ kind: z.literal("op.stop"), request: clientRequest, session: sessionName }),
  /** Takes work again after `stop` or `drain`, without a daemon restart. */
  z.object({ kind: z.literal("op.resume"), request: clientRequest, session: sessionName }),
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
  /**
   * Shows the daemon's budgets; `reset` starts the hourly windows again now, `raise` sets the
   * hourly request limit for this daemon's run. Either lifts a spent hour at once.
   */
  z.object({
    kind: z.literal("op.budget"),
    request: clientRequest,
    session: sessionName.optional(),
    reset: z.boolean().optional(),
    raise: z.number().int().positive().optional(),
  }),
  /** What the next request would carry: summary, items with token estimates, what is left out. */
  z.object({ kind: z.literal("op.context"), request: clientRequest, session: sessionName }),
  /** The session's newest frames with their ids, for `op.trace`. */
  z.object({
    kind: z.literal("op.frames"),
    request: clientRequest,
    session: sessionName,
    limit: z.number().int().min(1).max(200).optional(),
  }),
  /** `history.search` as a cell calls it, from the page or the command line. */
  z.object({
    kind: z.literal("op.history_search"),
    request: clientRequest,
    session: sessionName,
    query: z.string().min(1).max(2000),
    limit: z.number().int().min(1).max(100).optional(),
  }),
]);
/** A client → daemon message. */
export type ClientMessage = z.infer<typeof ClientMessage>;

/** Operator kinds (`op.*`); a client needs the operator role (the token) to send them. */
export const OPERATOR_KINDS: readonly string[] = ClientMessage.options
  .map((option) => option.shape.kind.value)
  .filter((kind) => kind.startsWith("op."));

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
  if (role !== "operator" && typeof kind === "string" && OPERATOR_KINDS.includes(kind)) {
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
  /**
   * The answer to a `page` request: the records with `seq < before`, at most `limit`, in seq
   * order; `more` says whether older records exist before the first of them.
   */
  z.object({
    kind: z.literal("page"),
    request: z.string(),
    session: z.string(),
    before: z.number().int(),
    records: z.array(LaneRecord),
    more: z.boolean(),
    /** The conversation asked for, if the request named one. */
    conversation: z.string().optional(),
    /**
     * With `conversation`: every record of it with `from <= seq < before` is in `records`
     * (other conversations' records written meanwhile may come along).
     */
    from: z.number().int().optional(),
  }),
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
    /** Set when the text is the reply's reasoning (a page shows it folded); absent for its text. */
    reasoning: z.literal(true).optional(),
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
