/**
 * The `kernel_generations` table: each workbench process a session has started, numbered 1, 2,
 * 3, … This module is the table's only writer.
 *
 * @module
 */

import { z } from "zod";
import { insertEvent } from "./events.ts";
import { checkSessionId, requireSession } from "./sessions.ts";
import type { Store } from "../store.ts";
import { fromRow } from "./_rows.ts";
import { schemaError } from "../schema/_schema_error.ts";

const StartGenerationSchema = z.object({
  session: z.string(),
  /** Why a new kernel was started: `startup`, `reset`, `framing_failure`, … */
  reason: z.string().min(1).max(1000),
  /** The content identity of the skills set the kernel was given. */
  skillsRevision: z.string().min(1).max(200),
  /** The behaviour release the kernel runs, or `null` for none. */
  behaviorRevision: z.string().min(1).max(200).nullable(),
}).strict();

/** What {@linkcode startGeneration} takes. */
export type StartGeneration = z.input<typeof StartGenerationSchema>;

/** A kernel generation row. */
export interface GenerationRecord {
  session: string;
  generation: number;
  startedAt: number;
  endedAt: number | null;
  reason: string;
  skillsRevision: string;
  behaviorRevision: string | null;
}

/** Returns the session's newest generation, or `undefined` before the first. */
export function currentGeneration(store: Store, session: string): GenerationRecord | undefined {
  const row = store.statement(
    "SELECT * FROM kernel_generations WHERE session_id = ? ORDER BY generation DESC LIMIT 1",
  ).get(session);
  return row && fromRow<GenerationRecord>(row);
}

/**
 * Records a new kernel generation, ending the previous one, and appends `kernel.reset`.
 *
 * When it returns, in one committed transaction: the new generation is the session's newest,
 * the previous one has `ended_at`, and the `kernel.reset` event carries the reason, the skills
 * and behaviour revisions and `heap_restored: false` (a new kernel never has the old heap).
 * Proven by "`startGeneration()` numbers generations and records kernel.reset".
 *
 * @throws {KlbrError} `invalid_input` for malformed options; `not_found` for an unknown session.
 */
export function startGeneration(
  store: Store,
  request: StartGeneration,
): { generation: number; seq: number } {
  const parsed = StartGenerationSchema.safeParse(request);
  if (!parsed.success) throw schemaError("start kernel generation", parsed.error, request);
  const { session, reason, skillsRevision, behaviorRevision } = parsed.data;
  checkSessionId(session);
  return store.transaction(() => {
    requireSession(store, session);
    const now = store.clock();
    const previous = currentGeneration(store, session);
    if (previous !== undefined && previous.endedAt === null) {
      store.statement(
        "UPDATE kernel_generations SET ended_at = ? WHERE session_id = ? AND generation = ?",
      ).run(now, session, previous.generation);
    }
    const generation = (previous?.generation ?? 0) + 1;
    store.statement(
      `INSERT INTO kernel_generations (session_id, generation, started_at, reason, skills_revision,
         behavior_revision) VALUES (?, ?, ?, ?, ?, ?)`,
    ).run(session, generation, now, reason, skillsRevision, behaviorRevision);
    const seq = insertEvent(store, session, "kernel.reset", {
      generation,
      reason,
      skills_revision: skillsRevision,
      behavior_revision: behaviorRevision,
      heap_restored: false,
    });
    return { generation, seq };
  });
}
