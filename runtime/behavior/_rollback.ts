/**
 * The rollback rule, shared by the agent's `behavior.rollback()` and the operator's `rollback`.
 *
 * @module
 */

import type { Store } from "../../store/store.ts";
import { requireSession, type Session } from "../../store/tables/sessions.ts";
import { KlbrError } from "../core/mod.ts";

/**
 * The release a rollback returns `session` to: its last good one, with the row it was read from
 * (whose epoch the activation must expect).
 *
 * @throws {KlbrError} `not_found` when the session has no last good release or already runs it.
 * @example
 * ```ts
 * const { target, row } = rollbackTarget(store, "main");
 * await activate(target, row.behaviorEpoch, "operator rollback");
 * ```
 */
export function rollbackTarget(store: Store, session: string): { target: string; row: Session } {
  const row = requireSession(store, session);
  const target = row.lastGoodRelease;
  if (target === null || target === row.activeRelease) {
    throw new KlbrError(
      "not_found",
      `cannot roll back: the active release is the last good one (got ${
        row.activeRelease?.slice(0, 12)
      })`,
    );
  }
  return { target, row };
}
