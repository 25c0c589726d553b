/**
 * The `effects` table: every durable effect a cell committed, numbered 1, 2, … within its
 * cell. This module is the table's only writer; the rows are append-only.
 *
 * A writer of an effect (a local send, a Discord outbox row, a timer, a job) records it here in
 * the same transaction as its own row, so after a crash the result given to the model for a
 * cell that did not finish lists exactly what it had done. An effect with a `key` is written
 * once per session and kind: the second writer finds the first and writes nothing.
 *
 * @module
 */

import { createHash } from "node:crypto";
import { assert } from "../../runtime/core/mod.ts";
import { fromRow, type Row } from "./_rows.ts";
import type { Store } from "../store.ts";

/** Where a send without a key of its own is made: the frame (turn) it belongs to, else its cell. */
export interface EffectScope {
  frameId: string | null;
  cellId: string | null;
}

/**
 * The idempotency key of an effect the caller gave no key: a sha256 of its scope (the frame,
 * else the cell), its destination and its content, so the same message to the same place is
 * one effect within one turn — a cell run again, a turn continued after a crash, a model that
 * starts over — while an explicit key holds across the session. `undefined` outside any frame
 * and cell (nothing to scope it by).
 *
 * @example
 * ```ts
 * derivedEffectKey({ frameId: "fr_1", cellId: "c1" }, ["local:default", "done"]); // "frame:9f2…"
 * ```
 */
export function derivedEffectKey(
  scope: EffectScope,
  parts: readonly string[],
): string | undefined {
  const [kind, id] = scope.frameId !== null
    ? ["frame", scope.frameId]
    : scope.cellId !== null
    ? ["cell", scope.cellId]
    : [];
  if (id === undefined) return undefined;
  return `${kind}:${createHash("sha256").update(JSON.stringify([id, ...parts])).digest("hex")}`;
}

/** What {@linkcode recordEffect} takes. */
export interface NewEffect {
  session: string;
  /** The cell that caused it; null for an effect outside a cell (a hook). */
  cellId: string | null;
  /** What it is: `local.send`, `discord.send`, `timer`, `job`, … */
  kind: string;
  /** Its own id: the send id, outbox id, timer or job id. */
  refId: string;
  /** The idempotency key it was written under, if any. */
  key?: string | null;
  /** What the model is told it was: the text, and where it went. */
  summary: string;
  /** The seq of the record that published it, when there is one. */
  seq?: number | null;
}

/** One recorded effect. */
export interface EffectRecord {
  session: string;
  cellId: string | null;
  ordinal: number;
  kind: string;
  refId: string;
  key: string | null;
  summary: string;
  seq: number | null;
  at: number;
}

function toRecord(row: Row): EffectRecord {
  return fromRow<EffectRecord>(row);
}

/** The ordinal the next effect of `cellId` gets (1 for a cell with none, and for no cell). */
export function nextEffectOrdinal(store: Store, cellId: string | null): number {
  if (cellId === null) return 1;
  const row = store.statement(
    "SELECT COALESCE(MAX(ordinal), 0) + 1 AS next FROM effects WHERE cell_id = ?",
  ).get(cellId) as { next: number };
  return row.next;
}

/**
 * Records one effect inside the caller's transaction and returns its ordinal in its cell.
 *
 * When the caller's transaction commits, the effect is durable together with the row it
 * describes. Proven by "`recordEffect()` numbers a cell's effects and keeps a key once" in
 * `tests/store/effects.test.ts`.
 *
 * @throws {Error} SQLite's constraint error for a key already used in the session and kind:
 *   callers look the key up first with {@linkcode effectByKey}.
 * @example
 * ```ts
 * store.transaction(() => {
 *   const ordinal = recordEffect(store, { session, cellId, kind: "job", refId: jobId, summary: "build" });
 * });
 * ```
 */
export function recordEffect(store: Store, effect: NewEffect): number {
  assert(store.inTransaction, "an effect is recorded inside its writer's transaction");
  const ordinal = nextEffectOrdinal(store, effect.cellId);
  store.statement(
    `INSERT INTO effects (session_id, cell_id, ordinal, kind, ref_id, key, summary, seq, at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  ).run(
    effect.session,
    effect.cellId,
    ordinal,
    effect.kind,
    effect.refId,
    effect.key ?? null,
    effect.summary,
    effect.seq ?? null,
    store.clock(),
  );
  return ordinal;
}

/** The effect written under `key` in `session` for `kind`, or `undefined`. */
export function effectByKey(
  store: Store,
  session: string,
  kind: string,
  key: string,
): EffectRecord | undefined {
  const row = store.statement(
    "SELECT * FROM effects WHERE session_id = ? AND kind = ? AND key = ?",
  ).get(session, kind, key);
  return row && toRecord(row);
}

/** The effects `cellId` committed, in order. */
export function effectsOfCell(store: Store, cellId: string): EffectRecord[] {
  return store.statement(
    "SELECT * FROM effects WHERE cell_id = ? ORDER BY ordinal",
  ).all(cellId).map(toRecord);
}
