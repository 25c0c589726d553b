/**
 * Frames taking inputs: the claim that marks a frame's inputs consumed, and its undoing when the
 * frame is abandoned. Private to `store/`; `inputs.ts`, the `inputs` table's writer, exports it.
 *
 * @module
 */

import { assert, KlbrError } from "../../runtime/core/mod.ts";
import type { Store } from "../store.ts";

/** What {@linkcode claimInputs} claims: `inputIds` of `session`, for `frameId`. */
export interface InputClaim {
  session: string;
  inputIds: readonly string[];
  frameId: string;
}

/**
 * Marks `inputIds` consumed by `frameId`; for the frames writer, inside its transaction. One
 * statement claims them all (a frame may take up to 1,000); only a claim that does not take every
 * id is looked at id by id, to say which one was wrong.
 *
 * @throws {KlbrError} `invalid_input` when an input is missing, in another session or not
 *   pending; the caller's transaction then rolls back, so nothing is written.
 */
export function claimInputs(store: Store, claim: InputClaim): void {
  assert(store.inTransaction, "inputs are claimed inside the frame's transaction");
  if (new Set(claim.inputIds).size === claim.inputIds.length) {
    try {
      store.transaction(() => {
        const changed = store.statement(
          `UPDATE inputs SET status = 'consumed', frame_id = ?1
           WHERE id IN (SELECT value FROM json_each(?2)) AND session_id = ?3 AND status = 'pending'`,
        ).run(claim.frameId, JSON.stringify(claim.inputIds), claim.session).changes;
        // The savepoint's rollback leaves every input as it was for the explanation below.
        if (changed !== claim.inputIds.length) throw new ClaimShort();
      });
      return;
    } catch (error) {
      if (!(error instanceof ClaimShort)) throw error;
    }
  }
  refuseClaim(store, claim);
}

/** Thrown inside the claim's savepoint when it did not take every id; never leaves the store. */
class ClaimShort extends Error {}

/** Throws the error of the first input of `claim` that cannot be claimed. */
function refuseClaim(store: Store, claim: InputClaim): never {
  const action = "cannot accept frame";
  const seen = new Set<string>();
  for (const id of claim.inputIds) {
    const row = store.statement("SELECT session_id, status FROM inputs WHERE id = ?").get(id) as
      | { session_id: string; status: string }
      | undefined;
    if (row === undefined) {
      throw new KlbrError("invalid_input", `${action}: input ${id} does not exist (got ${id})`);
    }
    if (row.session_id !== claim.session) {
      throw new KlbrError(
        "invalid_input",
        `${action}: input ${id} belongs to session ${row.session_id}, not ${claim.session} (got ${id})`,
      );
    }
    // An id named twice is consumed by its first mention by the time the second is claimed.
    const status = seen.has(id) ? "consumed" : row.status;
    if (status !== "pending") {
      throw new KlbrError(
        "invalid_input",
        `${action}: input ${id} is not pending (got status ${status})`,
      );
    }
    seen.add(id);
  }
  throw new KlbrError(
    "internal",
    `${action}: the claim of ${claim.frameId} took fewer inputs than it named`,
  );
}

/** Returns the inputs of `frameId` to `pending`; for the frames writer, inside a transaction. */
export function unclaimInputs(store: Store, frameId: string): void {
  assert(store.inTransaction, "inputs are returned inside the frame's transaction");
  store.statement(
    "UPDATE inputs SET status = 'pending', frame_id = NULL WHERE frame_id = ? AND status = 'consumed'",
  ).run(frameId);
}
