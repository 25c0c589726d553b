/**
 * The `releases` and `activations` tables: published behaviour trees and the epoch
 * compare-and-swap that switches a session to one. This module is their only writer.
 *
 * A release row is written by `publishRelease` (in `snapshot_hash.ts`) after its files are
 * complete on disk; callers verify the files with `verifyRelease` before activating.
 *
 * @module
 */

import { isAbsolute, join, relative } from "node:path";
import { z } from "zod";
import { KlbrError } from "../../runtime/core/mod.ts";
import { insertEvent } from "./events.ts";
import {
  checkSessionId,
  requireSession,
  setLastGoodRelease,
  swapBehaviorEpoch,
} from "./sessions.ts";
import type { Store } from "../store.ts";
import { fromRow } from "./_rows.ts";
import { schemaError } from "../schema/_schema_error.ts";

const ReleaseId = z.string().regex(/^[0-9a-f]{64}$/, "is not 64 lowercase hex digits");

const RecordReleaseSchema = z.object({
  id: ReleaseId,
  path: z.string().min(1),
  fileCount: z.number().int().nonnegative(),
  byteCount: z.number().int().nonnegative(),
}).strict();

const ActivateSchema = z.object({
  session: z.string(),
  expectedEpoch: z.number().int().nonnegative(),
  releaseId: ReleaseId,
  reason: z.string().min(1).max(1000),
}).strict();

/** What {@linkcode recordRelease} takes. */
export type RecordRelease = z.input<typeof RecordReleaseSchema>;
/** What {@linkcode activateRelease} takes. */
export type ActivateRelease = z.input<typeof ActivateSchema>;

/** A release row. */
export interface ReleaseRecord {
  id: string;
  /** Where its files are, absolute; the row keeps it relative to the state directory. */
  path: string;
  /** When it was first published. */
  createdAt: number;
  /** When it was last published: a tree published again is the same release, published now. */
  publishedAt: number;
  fileCount: number;
  byteCount: number;
}

/** Returns the release `id`, or `undefined` when it was never recorded. */
export function getRelease(store: Store, id: string): ReleaseRecord | undefined {
  const row = store.statement("SELECT * FROM releases WHERE id = ?").get(id);
  return row && fromRow<ReleaseRecord>(row, { path: releasePath(store, row.path as string) });
}

/**
 * Records a published release; recording the same id again keeps the first row and marks it
 * published now (`publishedAt`), so retention keeps it as long as a new one.
 *
 * When it returns the release row is committed. Call it only once the files are complete on
 * disk (`publishRelease` does). A path inside the state directory is stored relative to it, so
 * a moved state directory still finds its releases. Proven by "`publishRelease()` writes a
 * release once and records it", "a moved state directory opens and finds its releases" and
 * "`runMaintenance()` keeps a release published again, also after it removed its files, so it
 * can be activated".
 *
 * @throws {KlbrError} `invalid_input` when the record fails its schema.
 */
export function recordRelease(store: Store, release: RecordRelease): ReleaseRecord {
  const parsed = RecordReleaseSchema.safeParse(release);
  if (!parsed.success) throw schemaError("record release", parsed.error, release);
  const { id, path, fileCount, byteCount } = parsed.data;
  return store.transaction(() => {
    store.statement(
      `INSERT INTO releases (id, path, created_at, published_at, file_count, byte_count)
       VALUES (?1, ?2, ?3, ?3, ?4, ?5)
       ON CONFLICT (id) DO UPDATE SET published_at = max(published_at, excluded.published_at)`,
    ).run(id, storedPath(store.stateDir, path), store.clock(), fileCount, byteCount);
    return getRelease(store, id)!;
  });
}

/** A stored release path made absolute: relative ones are inside the state directory. */
export function releasePath(store: Store, stored: string): string {
  return isAbsolute(stored) ? stored : join(store.stateDir, stored);
}

/** `path` relative to the state directory when it is inside it, else as given. */
function storedPath(stateDir: string, path: string): string {
  const inside = relative(stateDir, path);
  return inside !== "" && !inside.startsWith("..") && !isAbsolute(inside) ? inside : path;
}

/**
 * Switches `session` to a recorded release if its behaviour epoch is still `expectedEpoch`.
 *
 * When it returns, in one committed transaction: the epoch is `expectedEpoch + 1`,
 * `active_release` is the release, an `activations` row and an `activation` event exist.
 * Proven by "`activateRelease()` refuses when the epoch moved" and "`activateRelease()` bumps
 * the epoch and records the activation".
 *
 * @throws {KlbrError} `epoch_moved` naming the expected and the found epoch; `not_found` for an
 *   unknown session or an unrecorded release; `invalid_input` for malformed options.
 * @example
 * ```ts
 * await verifyRelease(path);
 * activateRelease(store, { session: "default", expectedEpoch: 7, releaseId, reason: "operator" });
 * ```
 */
export function activateRelease(
  store: Store,
  request: ActivateRelease,
): { epoch: number; seq: number } {
  const parsed = ActivateSchema.safeParse(request);
  if (!parsed.success) throw schemaError("activate release", parsed.error, request);
  const { session, expectedEpoch, releaseId, reason } = parsed.data;
  checkSessionId(session);
  const short = releaseId.slice(0, 12);
  return store.transaction(() => {
    const before = requireSession(store, session);
    if (getRelease(store, releaseId) === undefined) {
      throw new KlbrError(
        "not_found",
        `cannot activate release ${short}: it was never published (got ${releaseId})`,
      );
    }
    if (!swapBehaviorEpoch(store, session, { expectedEpoch, releaseId })) {
      throw new KlbrError(
        "epoch_moved",
        `cannot activate release ${short}: epoch moved (expected ${expectedEpoch}, found ${before.behaviorEpoch})`,
      );
    }
    const epoch = expectedEpoch + 1;
    store.statement(
      "INSERT INTO activations (session_id, epoch, release_id, at, reason) VALUES (?, ?, ?, ?, ?)",
    ).run(session, epoch, releaseId, store.clock(), reason);
    const seq = insertEvent(store, session, "activation", {
      epoch,
      release_id: releaseId,
      previous_release: before.activeRelease,
      reason,
    });
    return { epoch, seq };
  });
}

/**
 * Marks a release the session has activated before as its last good release.
 *
 * When it returns `last_good_release` is committed and a `release.last_good` event appended;
 * startup recovers to it without running hooks. Proven by "`markLastGood()` refuses a release
 * the session never activated".
 *
 * @throws {KlbrError} `not_found` for an unknown session; `invalid_input` when the session never
 *   activated the release.
 */
export function markLastGood(store: Store, session: string, releaseId: string): number {
  checkSessionId(session);
  return store.transaction(() => {
    requireSession(store, session);
    const activated = store.statement(
      "SELECT 1 FROM activations WHERE session_id = ? AND release_id = ? LIMIT 1",
    ).get(session, releaseId);
    if (activated === undefined) {
      throw new KlbrError(
        "invalid_input",
        `cannot mark release last good: session ${session} never activated it (got ${releaseId})`,
      );
    }
    setLastGoodRelease(store, session, releaseId);
    return insertEvent(store, session, "release.last_good", { release_id: releaseId });
  });
}

/**
 * The release the last start-up activated for `session` (an activation whose reason begins
 * `startup:`), or `undefined` when no start-up activated one.
 */
export function lastStartupRelease(store: Store, session: string): string | undefined {
  const row = store.statement(
    "SELECT release_id FROM activations WHERE session_id = ? AND reason LIKE 'startup:%' ORDER BY epoch DESC LIMIT 1",
  ).get(session) as { release_id: string } | undefined;
  return row?.release_id;
}
