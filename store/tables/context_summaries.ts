/**
 * The `context_summaries` table: what stands in for the oldest provider items in requests.
 * This module is the table's only writer.
 *
 * Summaries are hierarchical: each row covers every item from the start of the session up to
 * `covers_to_idx`, and a new row replaces the previous one in requests (it was written from
 * the previous summary plus the newer items). Rows are never changed or removed, so every
 * earlier summary stays readable by its epoch. A row and the session's new context epoch commit
 * in one transaction; until then the previous summary is the one in use.
 *
 * @module
 */

import { KlbrError } from "../../runtime/core/mod.ts";
import { insertEvent } from "./events.ts";
import { bumpContextEpoch, requireSession } from "./sessions.ts";
import type { Store } from "../store.ts";
import { fromRow, jsonColumn, type Row } from "./_rows.ts";

/** Who wrote a summary's text: the `long` route's model, or the extractive fallback. */
export type SummarySource = "model" | "extractive";

/** One summary row. */
export interface ContextSummary {
  epoch: number;
  /** Provider items with `idx` up to this are replaced by `text` in requests. */
  coversToIdx: number;
  text: string;
  source: SummarySource;
  /** The structured digest the next summary is folded from (`null` for rows before it). */
  digest: unknown;
  /** The text's raw token estimate. */
  tokens: number;
  /** Why the model's summary was not used, when `source` is `extractive` for that reason. */
  fallbackReason: string | null;
  at: number;
}

/** What {@linkcode commitSummary} writes. */
export interface NewSummary extends Omit<ContextSummary, "epoch" | "at"> {
  /** The context epoch the summary was written against; the commit refuses a moved one. */
  expectedEpoch: number;
  /** How many provider items this step newly covers, for the event. */
  summarizedItems: number;
  /**
   * Runs inside the transaction after every write and before COMMIT; a fault-injection point
   * (see `runtime/context/_compaction.ts`). Throwing rolls everything back.
   */
  beforeCommit?: () => void;
}

/** What a committed compaction moved to. */
export interface Compaction {
  epoch: number;
  coversToIdx: number;
  /** How many provider items this compaction newly covered. */
  summarizedItems: number;
  source: SummarySource;
}

const COLUMNS = "epoch, covers_to_idx, text, source, digest, tokens, fallback_reason, at";

function toSummary(row: Row): ContextSummary {
  return fromRow<ContextSummary>(row, { digest: jsonColumn(row.digest) });
}

/** Returns the session's newest summary, or `undefined` before the first compaction. */
export function latestSummary(store: Store, session: string): ContextSummary | undefined {
  const row = store.statement(
    `SELECT ${COLUMNS} FROM context_summaries WHERE session_id = ? ORDER BY epoch DESC LIMIT 1`,
  ).get(session);
  return row && toSummary(row);
}

/** Returns the summary of `epoch`, or `undefined` when there is none. */
export function getSummary(
  store: Store,
  session: string,
  epoch: number,
): ContextSummary | undefined {
  const row = store.statement(
    `SELECT ${COLUMNS} FROM context_summaries WHERE session_id = ? AND epoch = ?`,
  ).get(session, epoch);
  return row && toSummary(row);
}

/**
 * Commits a new summary: the row, the session's next context epoch and a `context.compacted`
 * event, in one transaction. Nothing is written when the epoch moved since the summary was
 * started, or when it would not cover more than the current one.
 *
 * When it returns, requests use the new summary. If the process dies before it returns, the
 * previous summary and epoch are in use. Proven by "`commitSummary()` moves the epoch with its
 * summary, or writes nothing" and, against the real daemon, "a SIGKILL inside the compaction
 * commit leaves the previous context in use" in `tests/crash/compaction_kill.test.ts`.
 *
 * @throws {KlbrError} `epoch_moved` when the session's context epoch is not `expectedEpoch`;
 * `invalid_input` when `coversToIdx` does not pass the current summary's; `not_found` for an
 * unknown session.
 */
export function commitSummary(store: Store, session: string, summary: NewSummary): Compaction {
  return store.transaction(() => {
    const row = requireSession(store, session);
    const previous = latestSummary(store, session);
    if (row.contextEpoch !== summary.expectedEpoch) {
      throw new KlbrError(
        "epoch_moved",
        `cannot commit context summary of ${session}: the epoch moved (expected ${summary.expectedEpoch}, found ${row.contextEpoch})`,
      );
    }
    if (summary.coversToIdx <= (previous?.coversToIdx ?? 0)) {
      throw new KlbrError(
        "invalid_input",
        `cannot commit context summary of ${session}: it must cover more than #${
          previous?.coversToIdx ?? 0
        } (got #${summary.coversToIdx})`,
      );
    }
    const epoch = row.contextEpoch + 1;
    bumpContextEpoch(store, session, row.contextEpoch);
    store.statement(
      `INSERT INTO context_summaries (session_id, epoch, covers_to_idx, text, source, digest, tokens,
         fallback_reason, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ).run(
      session,
      epoch,
      summary.coversToIdx,
      summary.text,
      summary.source,
      JSON.stringify(summary.digest),
      summary.tokens,
      summary.fallbackReason,
      store.clock(),
    );
    insertEvent(store, session, "context.compacted", {
      epoch,
      covers_to_idx: summary.coversToIdx,
      summarized_items: summary.summarizedItems,
      summary_chars: summary.text.length,
      summary_tokens: summary.tokens,
      source: summary.source,
      fallback_reason: summary.fallbackReason,
    });
    summary.beforeCommit?.();
    return {
      epoch,
      coversToIdx: summary.coversToIdx,
      summarizedItems: summary.summarizedItems,
      source: summary.source,
    };
  });
}
