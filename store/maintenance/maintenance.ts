/**
 * The `maintenance_runs` table: each recorded cleanup step (old drafts and unpinned releases
 * removed from disk). This module is the table's only writer; it only reads the tables that pin
 * a release (`sessions`, `frames`, `jobs`, `kernel_generations`, `releases`).
 *
 * A run is written `started` with the exact lists it will remove before anything is removed, and
 * `done` with the errors after, so a crash mid-run leaves a record of what was being removed.
 *
 * @module
 */

import { KlbrError, newId } from "../../runtime/core/mod.ts";
import { insertEvent } from "../tables/events.ts";
import { releasesPinnedByJobs } from "../tables/jobs.ts";
import { releasePath } from "../tables/releases.ts";
import type { Store } from "../store.ts";

/** A release as retention sees it: where it is, when it was published, and what pins it. */
export interface ReleaseRetention {
  id: string;
  path: string;
  createdAt: number;
  /** When it was last published; a tree published again counts from then. */
  publishedAt: number;
  /** Why it must be kept; empty when nothing pins it. */
  pinnedBy: string[];
}

/**
 * Every recorded release with what pins it at `now`: a session's active or last good release,
 * the release of a running kernel generation, of a frame still open or made in the last
 * `keepMs`, of a job not yet ended, or one published (first or again) in the last `keepMs`.
 */
export function releaseRetention(
  store: Store,
  options: { now: number; keepMs: number },
): ReleaseRetention[] {
  const since = options.now - options.keepMs;
  const pins = new Map<string, Set<string>>();
  const pin = (id: string | null, why: string) => {
    if (id === null) return;
    if (!pins.has(id)) pins.set(id, new Set());
    pins.get(id)!.add(why);
  };
  for (
    const row of store.statement("SELECT active_release, last_good_release FROM sessions")
      .all() as {
        active_release: string | null;
        last_good_release: string | null;
      }[]
  ) {
    pin(row.active_release, "active");
    pin(row.last_good_release, "last good");
  }
  const releases = store.statement(
    "SELECT id, path, created_at, published_at FROM releases ORDER BY created_at, id",
  ).all() as { id: string; path: string; created_at: number; published_at: number }[];
  // Frames grow with history, releases do not: each release asks the frames index for one
  // recent frame of its own, and the open frames come from their partial index.
  for (
    const row of store.statement(
      "SELECT policy_revision AS id FROM frames WHERE state = 'open'",
    ).all() as { id: string }[]
  ) pin(row.id, "frame");
  const recentFrame = store.statement(
    "SELECT 1 AS found FROM frames WHERE policy_revision = ? AND created_at >= ? LIMIT 1",
  );
  for (const row of releases) {
    if (recentFrame.get(row.id, since) !== undefined) pin(row.id, "frame");
  }
  for (
    const row of store.statement(
      "SELECT DISTINCT behavior_revision AS id FROM kernel_generations WHERE ended_at IS NULL",
    ).all() as { id: string | null }[]
  ) pin(row.id, "kernel");
  for (const id of releasesPinnedByJobs(store)) pin(id, "job");
  return releases.map((row) => {
    if (row.published_at >= since) pin(row.id, "recent");
    return {
      id: row.id,
      path: releasePath(store, row.path),
      createdAt: row.created_at,
      publishedAt: row.published_at,
      pinnedBy: [...(pins.get(row.id) ?? [])],
    };
  });
}

/** What a maintenance run removes, and under which policy. */
export interface MaintenancePlan {
  /** The session whose log gets the run's records. */
  session: string;
  trigger: string;
  policy: Record<string, unknown>;
  drafts: string[];
  releases: { id: string; path: string }[];
}

/**
 * Records a maintenance run `started` with what it will remove and appends
 * `maintenance.started`; returns its id. Call before removing anything.
 *
 * @throws {KlbrError} `not_found` when the session does not exist.
 */
export function startMaintenance(store: Store, plan: MaintenancePlan): string {
  return store.transaction(() => {
    const now = store.clock();
    const id = newId("maintenance", now);
    store.statement(
      `INSERT INTO maintenance_runs (id, started_at, trigger, policy, drafts, releases, state)
       VALUES (?, ?, ?, ?, ?, ?, 'started')`,
    ).run(
      id,
      now,
      plan.trigger,
      JSON.stringify(plan.policy),
      JSON.stringify(plan.drafts),
      JSON.stringify(plan.releases),
    );
    insertEvent(store, plan.session, "maintenance.started", {
      run_id: id,
      trigger: plan.trigger,
      policy: plan.policy,
      drafts: plan.drafts,
      releases: plan.releases.map((r) => r.id),
    });
    return id;
  });
}

/**
 * Records a maintenance run `done` with the removals that failed and appends
 * `maintenance.finished`.
 *
 * @throws {KlbrError} `invalid_input` for an unknown run or one already done.
 */
export function finishMaintenance(
  store: Store,
  request: { session: string; id: string; errors: string[] },
): void {
  store.transaction(() => {
    const changed = store.statement(
      `UPDATE maintenance_runs SET state = 'done', errors = ?, ended_at = ?
       WHERE id = ? AND state = 'started'`,
    ).run(JSON.stringify(request.errors), store.clock(), request.id).changes;
    if (changed !== 1) {
      throw new KlbrError(
        "invalid_input",
        `cannot finish maintenance run ${request.id}: it is unknown or done (got ${request.id})`,
      );
    }
    insertEvent(store, request.session, "maintenance.finished", {
      run_id: request.id,
      errors: request.errors,
    });
  });
}
