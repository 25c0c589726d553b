/**
 * The durable record bodies: one zod schema for the `data` of every record `type` the runtime
 * and the store write, gathered into one union discriminated on `type`.
 *
 * The store's typed append ({@linkcode recordDataSchema}) refuses a body that does not match its
 * type's schema; the UI reads records through {@linkcode readRecord}. Every shape tolerates fields
 * it does not name (a newer writer's record still parses); a type outside the union is an
 * {@linkcode UnknownRecord}, shown, never dropped. `docs/protocol.md` has an example of each type.
 *
 * @module
 */

import * as z from "zod";
import { BEHAVIOR_RECORDS } from "./_behavior_records.ts";
import { describeIssues } from "./_issues.ts";
import { FAULT_DATA } from "./_records_faults.ts";
import { UNATTENDED_DATA } from "./_records_jobs.ts";
import { MODEL_DATA } from "./_records_model.ts";
import { TURN_DATA } from "./_records_turn.ts";

/** Where an input came from. */
export const SOURCE_KINDS = ["local", "discord", "timer", "job", "system"] as const;

/** Every way a cell can end: the worker's three, and the host's for cells it had to end. */
export const CELL_OUTCOMES = [
  "ok",
  "error",
  "cancelled",
  "timed_out",
  "killed",
  "interrupted",
] as const;

/** Every outbox state, in the order a row may reach them. */
export const OUTBOX_STATES = ["pending", "attempting", "confirmed", "failed", "unknown"] as const;

/** Any JSON value; required. The store has already refused what is not JSON. */
const json = z.unknown();
const int = z.number().int();

/** A spooled output: the artifact that holds it whole, and its size. */
export const ArtifactRef = z.looseObject({ id: z.string(), bytes: int.nonnegative() });
/** A spooled output's artifact. */
export type ArtifactRef = z.infer<typeof ArtifactRef>;

/** One `display()` of a cell as its record keeps it. */
export const CellDisplay = z.looseObject({
  mime: z.string(),
  bytes: int.nonnegative(),
  artifact: ArtifactRef.optional(),
  error: z.string().optional(),
});
/** One `display()` of a cell as its record keeps it. */
export type CellDisplay = z.infer<typeof CellDisplay>;

/**
 * The `result` of a `cell.finished` for a cell that ran: the worker's reply, with long output
 * cut to an excerpt whose whole text is in `stdout_artifact` / `stderr_artifact`.
 */
export const CellRunResult = z.looseObject({
  value: z.string().nullable(),
  stdout: z.string(),
  stderr: z.string(),
  stdout_artifact: ArtifactRef.optional(),
  stderr_artifact: ArtifactRef.optional(),
  stdout_artifact_error: z.string().optional(),
  stderr_artifact_error: z.string().optional(),
  error: z.looseObject({ type: z.string(), message: z.string(), traceback: z.string() })
    .nullable(),
  /** `wait(seconds=…)` adds the timer it set. */
  wait: z.looseObject({
    reason: z.string(),
    timer_id: z.string().optional(),
    due_at: int.optional(),
  }).nullable(),
  duration_ms: z.number().nonnegative(),
  /**
   * What the cell showed with `display()`, in order: its type and size, and the artifact that
   * holds it (or why it could not be kept).
   */
  displays: z.array(CellDisplay).optional(),
});
/** What a cell that ran reported. */
export type CellRunResult = z.infer<typeof CellRunResult>;

/** A span of a file patched by `code.patch`: bytes `[start_byte, end_byte)` and its lines. */
const codeSpan = z.looseObject({
  start_byte: int.nonnegative(),
  end_byte: int.nonnegative(),
  start_line: int.positive(),
  end_line: int.positive(),
});

/** One reconciliation or rate-limit try of an outbox row (`docs/discord.md`). */
export const OutboxTry = z.looseObject({ at: int, how: z.string(), outcome: z.string() });

/**
 * The data of one outbox step: the state the row moved to, and what that move recorded. Rows
 * written before reconciliation existed carry no `kind`, `not_before` or `tries`.
 */
function outboxStep<S extends (typeof OUTBOX_STATES)[number]>(state: S) {
  return z.looseObject({
    outbox_id: z.string(),
    state: z.literal(state),
    kind: z.enum(["message", "reaction"]).optional(),
    attempts: int.nonnegative(),
    remote_id: z.string().nullable(),
    error: z.string().nullable(),
    /** When the row is due again (a 429, a reconciliation); `null` on `unknown`: the owner's. */
    not_before: int.nullable().optional(),
    tries: z.array(OutboxTry).optional(),
  });
}

/** The `data` schema of each record type. Each tolerates fields it does not name. */
const DATA = {
  "input.admitted": z.looseObject({
    input_id: z.string(),
    source_kind: z.enum(SOURCE_KINDS),
    dedupe_key: z.string(),
    conversation_id: z.string(),
    author: z.string(),
    received_at: int,
    /** Any JSON value: a string for plain text. */
    body: json,
    /** The client's message id, for a local input (absent from records before it was added). */
    client_msg_id: z.string().optional(),
  }),
  ...TURN_DATA,
  "kernel.reset": z.looseObject({
    generation: int,
    reason: z.string(),
    skills_revision: z.string(),
    behavior_revision: z.string().nullable(),
    heap_restored: z.boolean(),
  }),
  "cell.started": z.looseObject({
    cell_id: z.string(),
    generation: int,
    frame_id: z.string().nullable(),
    tool_call_id: z.string().nullable(),
    code: z.string(),
  }),
  "cell.finished": z.looseObject({
    cell_id: z.string(),
    tool_call_id: z.string().nullable(),
    outcome: z.enum(CELL_OUTCOMES),
    /** A {@linkcode CellRunResult}, `{ interrupted: why }` for a cell cut short, or other JSON. */
    result: json,
  }),
  "scratchpad": z.looseObject({
    frame_id: z.string(),
    text: z.string(), // past the cap: its head and tail; the whole text is in `text_artifact`
    partial: z.boolean(),
    usage: z.record(z.string(), z.number()).optional(),
    text_artifact: ArtifactRef.optional(),
    text_artifact_error: z.string().optional(),
  }),
  "send": z.looseObject({
    send_id: z.string(),
    text: z.string(),
    conversation: z.string(),
    frame_id: z.string().nullable(),
    cell_id: z.string().nullable(),
    /** The send's place among its cell's effects (absent from records before effects). */
    ordinal: int.positive().optional(),
    key: z.string().nullable().optional(),
    state: z.literal("delivered"),
  }),
  "outbox.pending": z.looseObject({
    outbox_id: z.string(),
    state: z.literal("pending"),
    conversation: z.string(),
    destination: z.looseObject({
      channel_id: z.string(),
      reply_to: z.string().optional(),
      /** A reaction's message. */
      message_id: z.string().optional(),
    }),
    /** A message's text, or a reaction's emoji. */
    body: z.string(),
    kind: z.enum(["message", "reaction"]).optional(),
    nonce: z.string().optional(),
    /** The input this message answers: its reply state. */
    input_id: z.string().nullable().optional(),
    frame_id: z.string().nullable(),
    cell_id: z.string().nullable(),
    /** The row's place among its cell's effects (absent from records before effects). */
    ordinal: int.positive().optional(),
  }),
  "outbox.attempting": outboxStep("attempting"),
  "outbox.confirmed": outboxStep("confirmed"),
  "outbox.failed": outboxStep("failed"),
  "outbox.unknown": outboxStep("unknown"),
  /** A 429: the row is `pending` again, not processed by Discord, due at `not_before`. */
  "outbox.rate_limited": outboxStep("pending"),
  "input.replied": z.looseObject({
    input_id: z.string(),
    outbox_id: z.string(),
    remote_id: z.string().nullable(),
  }),
  "input.ignored": z.looseObject({
    input_id: z.string(),
    frame_id: z.string(),
    reason: z.string(),
    by: z.string(),
  }),
  "input.edited": z.looseObject({
    input_id: z.string(),
    message_id: z.string(),
    text: z.string(),
    edited_at: z.string().nullable(),
  }),
  "input.deleted": z.looseObject({ input_id: z.string(), message_id: z.string() }),
  "activation": z.looseObject({
    epoch: int,
    release_id: z.string(),
    previous_release: z.string().nullable(),
    reason: z.string(),
  }),
  "release.last_good": z.looseObject({ release_id: z.string() }),
  "release.recovered": z.looseObject({ broken: z.string(), restored: z.string() }),
  ...BEHAVIOR_RECORDS,
  "session.stalled": z.looseObject({ failures: int.nonnegative(), message: z.string() }),
  "operator": z.looseObject({
    /** The command, e.g. `op.reset`; the rest is its result. */
    op: z.string(),
    message: z.string().optional(),
  }),
  "context.compacted": z.looseObject({
    epoch: int,
    covers_to_idx: int,
    summarized_items: int.nonnegative(),
    summary_chars: int.nonnegative(),
    /** The summary's raw token estimate. */
    summary_tokens: int.nonnegative().optional(),
    /** Who wrote the summary's text: the `long` model, or the extractive fallback. */
    source: z.enum(["model", "extractive"]).optional(),
    /** Why the model's summary was not used, when it was asked for and not used. */
    fallback_reason: z.string().nullable().optional(),
  }),
  "code.patch": z.looseObject({
    patch_id: z.string(),
    /** The cell that made the patch (`null` outside a cell). */
    cell_id: z.string().nullable(),
    files: z.array(z.looseObject({
      path: z.string(),
      before_hash: z.string(),
      after_hash: z.string(),
      /** Whether a grammar re-parsed the result (files without one are patched unchecked). */
      syntax_checked: z.boolean(),
      edits: z.array(z.looseObject({ before: codeSpan, after: codeSpan })),
    })),
  }),
  ...UNATTENDED_DATA,
  ...FAULT_DATA,
  ...MODEL_DATA,
} as const;
type DataSchemas = typeof DATA;

/** Every record type with a schema. */
export type RecordType = keyof DataSchemas;

/** Every record type with a schema, in the order `docs/protocol.md` lists them. */
export const RECORD_TYPES = Object.keys(DATA) as RecordType[];

function variant<T extends RecordType>(type: T) {
  return z.object({ type: z.literal(type), data: DATA[type] as DataSchemas[T] });
}

/** One variant of the union per record type. */
type Variant = { [T in RecordType]: ReturnType<typeof variant<T>> }[RecordType];

/** A record of a known type with a body that matches it, discriminated on `type`. */
export const KnownRecord = z.discriminatedUnion(
  "type",
  RECORD_TYPES.map(variant) as unknown as [Variant, ...Variant[]],
);
/** A record of a known type, its `data` typed by that type. */
export type KnownRecord = z.infer<typeof KnownRecord>;

/** The `data` of a record of type `T`, as read. */
export type RecordData<T extends RecordType> = z.infer<DataSchemas[T]>;

/** The `data` a writer gives for a record of type `T`. */
export type RecordInput<T extends RecordType> = z.input<DataSchemas[T]>;

/** Returns whether `type` is a record type with a schema. */
export function isRecordType(type: string): type is RecordType {
  return Object.hasOwn(DATA, type);
}

/** A record whose type has no schema here, e.g. one a newer writer added: kept as it is. */
const UnknownRecord = z.object({
  type: z.string().refine((type) => !isRecordType(type), "is a known record type"),
  data: z.unknown(),
});

/** Every durable record body: a known type with a matching body, or an unknown type. */
export const DurableRecord = z.union([KnownRecord, UnknownRecord]);
/** A durable record body. */
export type DurableRecord = z.infer<typeof DurableRecord>;

/** Returns the `data` schema of a known record type. */
export function recordDataSchema<T extends RecordType>(type: T): DataSchemas[T] {
  return DATA[type];
}

/** What {@linkcode readRecord} made of a record. */
export type RecordReading =
  | { ok: true; record: KnownRecord }
  | {
    ok: false;
    type: string;
    data: unknown;
    /** `unknown_type`: no schema for the type; `invalid_body`: the body does not match it. */
    reason: "unknown_type" | "invalid_body";
    /** What is wrong, in words ("text: Invalid input: …"); empty for an unknown type. */
    problem: string;
  };

/**
 * Reads a record's `type` and `data` against the union. A known type whose body matches is
 * typed; anything else is reported with the reason, never thrown or dropped.
 *
 * @example
 * ```ts
 * const read = readRecord(record.type, record.data);
 * if (read.ok && read.record.type === "send") read.record.data.text;
 * ```
 */
export function readRecord(type: string, data: unknown): RecordReading {
  if (!isRecordType(type)) return { ok: false, type, data, reason: "unknown_type", problem: "" };
  const body = DATA[type].safeParse(data);
  if (!body.success) {
    return { ok: false, type, data, reason: "invalid_body", problem: describeIssues(body.error) };
  }
  // The body matched its own type's schema, which is exactly that variant of the union.
  return { ok: true, record: { type, data: body.data } as KnownRecord };
}
