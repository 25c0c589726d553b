/**
 * The `timers` table: every durable timer a cell set (`wait(seconds=…)`, `timers.at`). This
 * module is the table's only writer.
 *
 * A timer moves `pending` → `fired` | `cancelled`, once. Firing is committed in the same
 * transaction as the input it admits (source kind `timer`, dedupe key `timer:<id>`), so a timer
 * fires exactly once across restarts: a crash before that commit leaves it pending, to fire at the
 * next start; after it, the timer is final and the input is in the inbox. Each row names the
 * cell, frame or job that set it, so the effects of a cell are found by its id.
 *
 * @module
 */

import { z } from "zod";
import { assert, KlbrError, newId } from "../../runtime/core/mod.ts";
import { schemaError } from "../schema/_schema_error.ts";
import { fromRow, type Row } from "./_rows.ts";
import { recordEffect } from "./effects.ts";
import { insertEvent } from "./events.ts";
import { requireSession } from "./sessions.ts";
import type { Store } from "../store.ts";

/** Every state of a timer. */
export const TIMER_STATES = ["pending", "fired", "cancelled"] as const;

/** One timer state. */
export type TimerState = (typeof TIMER_STATES)[number];

const CreateTimerSchema = z.strictObject({
  session: z.string(),
  /** When it fires, in ms since the epoch (the store's clock). */
  dueAt: z.number().int().nonnegative(),
  note: z.string().max(2000).default(""),
  /** The conversation the wake belongs to (the setting frame's). */
  conversation: z.string().min(1).max(512),
  /** Whether `wait(seconds=…)` set it (the turn ended waiting for it). */
  wait: z.boolean().default(false),
  frameId: z.string().nullable().default(null),
  cellId: z.string().nullable().default(null),
  jobId: z.string().nullable().default(null),
  /**
   * The cell of child agent `jobId` that set it, which has no `cells` row: the timer is among
   * that cell's effects all the same.
   */
  childCellId: z.string().nullable().default(null),
});

/** What {@linkcode createTimer} takes. */
export type CreateTimer = z.input<typeof CreateTimerSchema>;

/** One timer row. */
export interface TimerRecord {
  id: string;
  session: string;
  dueAt: number;
  note: string;
  conversation: string;
  wait: boolean;
  frameId: string | null;
  cellId: string | null;
  jobId: string | null;
  state: TimerState;
  /** Why it ended (`fired`, or who cancelled it); null while pending. */
  cause: string | null;
  /** The input its firing admitted. */
  inputId: string | null;
  createdAt: number;
  endedAt: number | null;
}

function toRecord(row: Row): TimerRecord {
  return fromRow<TimerRecord>(row, { wait: row.wait === 1 });
}

/**
 * Writes a `pending` timer and its `timer.set` event in one transaction.
 *
 * Set by a cell (or a child agent's cell), it is also among that cell's effects (kind `timer`).
 *
 * When it returns the timer is committed: it fires at `dueAt` (or at the next start, if the
 * daemon is down then), exactly once, unless cancelled first. Proven by "`createTimer()` commits
 * a pending timer with its event and its cause" in `tests/store/timers.test.ts`.
 *
 * @throws {KlbrError} `invalid_input` when a field fails its schema; `not_found` for an unknown
 *   session.
 * @example
 * ```ts
 * const timer = createTimer(store, {
 *   session: "default", dueAt: store.clock() + 2000, conversation: "local:default", cellId,
 * });
 * ```
 */
export function createTimer(store: Store, request: CreateTimer): TimerRecord {
  const parsed = CreateTimerSchema.safeParse(request);
  if (!parsed.success) throw schemaError("set timer", parsed.error, request);
  const t = parsed.data;
  return store.transaction(() => {
    requireSession(store, t.session);
    const now = store.clock();
    const id = newId("timer", now);
    store.statement(
      `INSERT INTO timers (id, session_id, due_at, note, conversation, wait, frame_id, cell_id,
         job_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ).run(
      id,
      t.session,
      t.dueAt,
      t.note,
      t.conversation,
      t.wait ? 1 : 0,
      t.frameId,
      t.cellId,
      t.jobId,
      now,
    );
    insertEvent(store, t.session, "timer.set", {
      timer_id: id,
      due_at: t.dueAt,
      note: t.note,
      wait: t.wait,
      frame_id: t.frameId,
      cell_id: t.cellId,
      job_id: t.jobId,
    });
    // A cell's timer is among its effects: its result names it, a re-run knows it is set.
    const cellId = t.cellId ?? t.childCellId;
    if (cellId !== null) {
      recordEffect(store, {
        session: t.session,
        cellId,
        kind: "timer",
        refId: id,
        summary: `due ${new Date(t.dueAt).toISOString()}${t.note ? `: ${t.note}` : ""}`,
      });
    }
    return getTimer(store, id)!;
  });
}

/** Returns the timer `id`, or `undefined` when there is none. */
export function getTimer(store: Store, id: string): TimerRecord | undefined {
  const row = store.statement("SELECT * FROM timers WHERE id = ?").get(id);
  return row && toRecord(row);
}

/** Every pending timer whose due time is at or before `now`, oldest due first, at most 100. */
export function dueTimers(store: Store, now: number): TimerRecord[] {
  return store.statement(
    "SELECT * FROM timers WHERE state = 'pending' AND due_at <= ? ORDER BY due_at, id LIMIT 100",
  ).all(now).map(toRecord);
}

/** The earliest due time of a pending timer, or `undefined` when none is pending. */
export function nextDueAt(store: Store): number | undefined {
  const row = store.statement("SELECT min(due_at) AS at FROM timers WHERE state = 'pending'")
    .get() as { at: number | null };
  return row.at ?? undefined;
}

/**
 * Marks a pending timer fired by `inputId` and appends `timer.fired`; for the admission
 * transaction that admitted that input, so the input and the firing commit together.
 *
 * @throws {KlbrError} `invalid_input` when the timer is not pending (the caller's transaction
 *   then rolls back, input included).
 */
export function markTimerFired(store: Store, id: string, inputId: string): void {
  assert(store.inTransaction, "a timer is marked fired inside its admission's transaction");
  const timer = getTimer(store, id);
  if (timer?.state !== "pending") {
    throw new KlbrError(
      "invalid_input",
      `cannot fire timer ${id}: it is not pending (got ${timer?.state ?? "no such timer"})`,
    );
  }
  store.statement(
    "UPDATE timers SET state = 'fired', cause = 'fired', input_id = ?, ended_at = ? WHERE id = ?",
  ).run(inputId, store.clock(), id);
  insertEvent(store, timer.session, "timer.fired", {
    timer_id: id,
    input_id: inputId,
    due_at: timer.dueAt,
    note: timer.note,
  });
}

/**
 * Cancels a pending timer with `cause` and appends `timer.cancelled`; a timer that already fired
 * or was cancelled is left as it is. Returns the timer as it now is.
 *
 * When it returns `cancelled: true`, the cancellation is committed and the timer never fires.
 * Proven by "`cancelTimer()` ends a pending timer and leaves a fired one alone".
 *
 * @throws {KlbrError} `not_found` for an unknown timer, or one of another session.
 */
export function cancelTimer(
  store: Store,
  request: { session: string; id: string; cause: string },
): { cancelled: boolean; timer: TimerRecord } {
  return store.transaction(() => {
    const timer = getTimer(store, request.id);
    if (timer === undefined || timer.session !== request.session) {
      throw new KlbrError(
        "not_found",
        `cannot cancel timer: no timer ${request.id} in session ${request.session} (got ${
          JSON.stringify(request.id)
        })`,
      );
    }
    if (timer.state !== "pending") return { cancelled: false, timer };
    store.statement(
      "UPDATE timers SET state = 'cancelled', cause = ?, ended_at = ? WHERE id = ?",
    ).run(request.cause.slice(0, 500), store.clock(), timer.id);
    insertEvent(store, timer.session, "timer.cancelled", {
      timer_id: timer.id,
      cause: request.cause.slice(0, 500),
    });
    return { cancelled: true, timer: getTimer(store, timer.id)! };
  });
}

/**
 * A session's timers, newest first: the pending ones, and with `all` the ended ones too; at
 * most `limit` (1–1000, default 100).
 */
export function listTimers(
  store: Store,
  session: string,
  options: { all?: boolean; limit?: number } = {},
): TimerRecord[] {
  const limit = Math.min(Math.max(Math.trunc(options.limit ?? 100), 1), 1000);
  return store.statement(
    `SELECT * FROM timers WHERE session_id = ? AND (? OR state = 'pending')
     ORDER BY created_at DESC, id DESC LIMIT ?`,
  ).all(session, options.all ? 1 : 0, limit).map(toRecord);
}

/**
 * How many pending timers of `session` (every session when omitted) are due at `now`: an index
 * range over the due ones only, which the scheduler fires at once.
 */
export function dueTimerCount(store: Store, now: number, session?: string): number {
  const row = store.statement(
    `SELECT count(*) AS due FROM timers WHERE state = 'pending' AND due_at <= ?
     AND (? IS NULL OR session_id = ?)`,
  ).get(now, session ?? null, session ?? null) as { due: number };
  return row.due;
}
