/**
 * The runtime's state as `status` and `/health` show it: whether the daemon admits, its store,
 * the unattended budget, and each running session's own view with its jobs.
 *
 * @module
 */

import type { Store } from "../../store/store.ts";
import { KlbrError } from "../core/mod.ts";
import type { Jobs } from "../jobs/mod.ts";
import type { Session } from "../session/mod.ts";

/** What the status is read from. */
export interface StatusSources {
  store: Store;
  jobs: Jobs;
  sessions: ReadonlyMap<string, Session>;
}

/**
 * The runtime's state; `only` narrows it to one session.
 *
 * @throws {KlbrError} `not_found` when `only` names no running session.
 */
export function runtimeStatus(
  sources: StatusSources,
  daemon: {
    only?: string;
    version: string;
    admitting: boolean;
    recovered: string | null;
  },
): Record<string, unknown> {
  const { store, jobs } = sources;
  const { only } = daemon;
  const sessions: Record<string, unknown> = {};
  for (const [id, running] of sources.sessions) {
    if (only !== undefined && id !== only) continue;
    const own = running.status();
    const fingerprints = { ...own.fingerprints as object, jobs: jobs.fingerprints(id) };
    sessions[id] = { ...own, ...jobs.status(id), fingerprints };
  }
  if (only !== undefined && !(only in sessions)) {
    throw new KlbrError("not_found", `cannot show status: no session ${only} (got ${only})`);
  }
  const health = store.health();
  return {
    version: daemon.version,
    admitting: daemon.admitting && health.state !== "corrupt",
    store_commits: health.commits,
    store_commit_ms: Math.round(health.commitMs),
    recovered_release: daemon.recovered,
    budget: jobs.budget.status(),
    sessions,
  };
}
