/**
 * The operator's reads of what the agent remembers and did: `op.context` (the next request,
 * built by the context domain's request builder), `op.frames` (recent frames with their ids,
 * for `op.trace`) and `op.history_search` (the cell's `history.search`, from the page).
 *
 * @module
 */

import { recentFrames } from "../../store/tables/frames.ts";
import { requireSession } from "../../store/tables/sessions.ts";
import type { Store } from "../../store/store.ts";
import { type ContextBudget, contextView, historyRpcs } from "../context/mod.ts";
import { bindRpcs, RpcRegistry } from "../kernel/mod.ts";
import { type ContextResult, DEFAULT_CELL_TIMEOUT_MS } from "../core/mod.ts";
import { contractMessage, type OfferedSkills } from "../session/mod.ts";

/** How many frames `op.frames` lists when it is not told. */
export const DEFAULT_FRAMES = 20;

/** The step limit the view's contract names: a route's own `max_steps` changes one number. */
const CONTRACT_STEPS = 50;

/** What the context view is built from: the route's budget and the contract message. */
export interface ContextSource {
  budget: ContextBudget;
  system: string;
}

/**
 * What the context view of a session is built from: `main`'s budget and the contract message
 * its next turn would read (its skills, the configured cell timeout).
 */
export function contextSourceOf(
  deps: { contextBudget(route: string): ContextBudget; workspace: string; cellTimeoutMs?: number },
  parts: { skills: OfferedSkills | null },
): ContextSource {
  const cellTimeoutMs = deps.cellTimeoutMs ?? DEFAULT_CELL_TIMEOUT_MS;
  return {
    budget: deps.contextBudget("main"),
    system: contractMessage(deps.workspace, {
      skills: parts.skills,
      limits: { maxSteps: CONTRACT_STEPS, cellTimeoutMs },
    }),
  };
}

/**
 * The request the next turn of `session` would send on `main`, with no new input, described.
 *
 * @throws {KlbrError} `not_found` for an unknown session.
 */
export function readContext(store: Store, session: string, source: ContextSource): ContextResult {
  requireSession(store, session);
  return contextView(store, session, {
    route: "main",
    budget: source.budget,
    system: source.system,
    opening: [],
  });
}

/**
 * The session's newest frames, newest first, each with what `klbr trace` needs.
 *
 * @throws {KlbrError} `not_found` for an unknown session.
 */
export function readFrames(
  store: Store,
  session: string,
  limit = DEFAULT_FRAMES,
): Record<string, unknown> {
  requireSession(store, session);
  return {
    session,
    frames: recentFrames(store, session, limit).map((frame) => ({
      frame_id: frame.id,
      number: frame.number,
      state: frame.state,
      inputs: frame.inputIds.length,
      created_at: frame.createdAt,
      ended_at: frame.endedAt,
      reason: frame.endedReason,
      policy_revision: frame.policyRevision,
    })),
  };
}

/**
 * Searches the session's history exactly as a cell's `history.search` does.
 *
 * @throws {KlbrError} `not_found` for an unknown session; `invalid_input` for a bad query.
 */
export async function searchHistoryFor(
  store: Store,
  session: string,
  query: { query: string; limit?: number },
): Promise<Record<string, unknown>> {
  requireSession(store, session);
  const registry = new RpcRegistry(bindRpcs(historyRpcs, { store, session }));
  const context = { signal: new AbortController().signal, parent: "operator", cell: null };
  const params = { query: query.query, limit: query.limit ?? 10 };
  return await registry.call("history.search", params, context) as Record<string, unknown>;
}
