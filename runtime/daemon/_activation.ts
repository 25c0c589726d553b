/**
 * The one activation path, shared by the operator's `activate` and the agent's
 * `behavior.activate`/`rollback`: verify, compare-and-swap the epoch, switch the hook worker.
 *
 * @module
 */

import { activateRelease, getRelease } from "../../store/releases.ts";
import { verifyRelease } from "../../store/snapshot_hash.ts";
import type { Store } from "../../store/store.ts";
import { type EventBus, faultPoint, KlbrError } from "../core/mod.ts";
import type { SessionParts } from "./_session_parts.ts";

/** One activation request. */
export interface Activation {
  releaseId: string;
  expectedEpoch: number;
  reason: string;
}

/**
 * Activates a published release for the session. It applies from the next frame: a running
 * turn keeps the release its frame recorded for every hook call until it ends. The workbench
 * heap is kept; only the hook worker is replaced, at its next boundary (a hook call running
 * now finishes on the old process).
 *
 * @returns the new epoch
 * @throws {KlbrError} `not_found` for a release never published, `release_invalid` when it no
 * longer verifies, `epoch_moved` when the epoch is not `expectedEpoch`.
 */
export async function activateBehavior(
  deps: { store: Store; bus: EventBus },
  session: string,
  parts: SessionParts,
  activation: Activation,
): Promise<number> {
  const { store } = deps;
  const { releaseId, expectedEpoch, reason } = activation;
  const release = getRelease(store, releaseId);
  if (release === undefined) {
    throw new KlbrError(
      "not_found",
      `cannot activate release ${
        releaseId.slice(0, 12)
      }: it was never published (got ${releaseId})`,
    );
  }
  await verifyRelease(release.path);
  const { epoch } = activateRelease(store, { session, expectedEpoch, releaseId, reason });
  // The epoch swap is durable; the hook worker still runs the old release.
  faultPoint("activation-during-cell");
  parts.behavior = { releaseId, path: release.path };
  parts.hooks.retire(`behaviour activated: release ${releaseId.slice(0, 12)} at epoch ${epoch}`);
  // Inputs a broken hook left pending get a fresh try under the new release.
  parts.runtime.wake();
  return epoch;
}
