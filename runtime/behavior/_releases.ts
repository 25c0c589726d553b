/**
 * Startup handling of behaviour releases: publish the checkout's `behavior/`, keep or recover
 * the session's active release — without running any user hook.
 *
 * @module
 */

import { join } from "node:path";
import { appendEvent } from "../../store/tables/events.ts";
import {
  activateRelease,
  getRelease,
  lastStartupRelease,
  markLastGood,
} from "../../store/tables/releases.ts";
import { ensureSession, requireSession } from "../../store/tables/sessions.ts";
import { publishRelease, verifyRelease } from "../../store/maintenance/snapshot_hash.ts";
import type { Store } from "../../store/store.ts";
import { isKlbrError } from "../core/mod.ts";

/** What startup decided about a session's behaviour. */
export interface BehaviorState {
  /** The release hooks run from. */
  releaseId: string;
  path: string;
  epoch: number;
  /** Set when the active release did not verify and an older good one was restored. */
  recovered: string | null;
}

/**
 * Publishes `sourceDir` and makes sure the session runs a release that verifies.
 *
 * The checkout's release is activated when it differs from the one the previous start
 * published (an edited checkout wins); otherwise the active release stays. An active release
 * that no longer verifies is replaced by the last good one, else by the checkout's, and the
 * recovery is recorded as a `release.recovered` event. The release started with becomes the
 * last good one only when the session has none; a restart never replaces it. Proven by
 * "`prepareBehavior()` activates a checkout once per change: an unchanged checkout that was
 * already active does not replace a later activation" and "`prepareBehavior()` at a restart
 * does not make the active release last good: rollback still returns to it" in
 * `tests/runtime/behavior/startup.test.ts`.
 */
export async function prepareBehavior(
  store: Store,
  options: { session: string; sourceDir: string },
): Promise<BehaviorState> {
  const releasesDir = join(store.stateDir, "releases");
  const published = await publishRelease(store, { sourceDir: options.sourceDir, releasesDir });
  ensureSession(store, options.session);
  let session = requireSession(store, options.session);
  let recovered: string | null = null;

  const lastStartup = lastStartupRelease(store, options.session);

  if (session.activeRelease !== null && !(await verifies(store, session.activeRelease))) {
    const fallback = session.lastGoodRelease !== null &&
        session.lastGoodRelease !== session.activeRelease &&
        (await verifies(store, session.lastGoodRelease))
      ? session.lastGoodRelease
      : published.id;
    recovered = `active release ${session.activeRelease.slice(0, 12)} does not verify; restored ${
      fallback.slice(0, 12)
    }`;
    activateRelease(store, {
      session: options.session,
      expectedEpoch: session.behaviorEpoch,
      releaseId: fallback,
      reason: `recovery: ${recovered}`,
    });
    appendEvent(store, options.session, "release.recovered", {
      broken: session.activeRelease,
      restored: fallback,
    });
  } else if (session.activeRelease === null || lastStartup !== published.id) {
    // Activated also when it is active already: the activation is what records that this start
    // published it, so the next start with the same checkout leaves a later activation alone.
    activateRelease(store, {
      session: options.session,
      expectedEpoch: session.behaviorEpoch,
      releaseId: published.id,
      reason: "startup: the checkout's behavior/",
    });
  }
  session = requireSession(store, options.session);
  const releaseId = session.activeRelease!;
  // A release becomes last good by running a whole turn (`Session`), not by a restart: only a
  // session that has none yet takes the release it starts with, so a rollback has a target.
  if (recovered === null && session.lastGoodRelease === null) {
    markLastGood(store, options.session, releaseId);
  }
  return {
    releaseId,
    path: getRelease(store, releaseId)!.path,
    epoch: session.behaviorEpoch,
    recovered,
  };
}

async function verifies(store: Store, releaseId: string): Promise<boolean> {
  const release = getRelease(store, releaseId);
  if (release === undefined) return false;
  try {
    await verifyRelease(release.path);
    return true;
  } catch (error) {
    if (isKlbrError(error)) return false;
    throw error;
  }
}
