/**
 * The cleanup policy, as a recorded maintenance step: drafts untouched for longer than
 * `cleanup.draft_max_age_days`, and releases nothing pins (not active or last good in any
 * session, not used by a frame that is open or was made in the last `cleanup.release_keep_days`,
 * not pinned by a running kernel or an unfinished job, not published (first or again) in that
 * window) are removed from disk. The run is recorded, with exactly what it will remove, before
 * anything is removed.
 * Finished jobs' workbenches are reaped by the job runner when each job ends.
 *
 * @module
 */

import { join, resolve, sep } from "node:path";
import {
  finishMaintenance,
  releaseRetention,
  startMaintenance,
} from "../../store/maintenance/maintenance.ts";
import type { Store } from "../../store/store.ts";
import type { CleanupConfig } from "../config/mod.ts";
import { type Logger, LONGEST_TIMER_MS } from "../core/mod.ts";
import type { HostTimers } from "./_timers.ts";

const DAY_MS = 86_400_000;
const ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
const DRAFT_ID = /^dr_([0-9A-HJKMNP-TV-Z]{10})[0-9A-HJKMNP-TV-Z]{16}$/;

/** What a maintenance run needs. */
export interface MaintenanceDeps {
  store: Store;
  log: Logger;
  cleanup: CleanupConfig;
  /** The session whose log records the runs. */
  session: string;
}

/** What one run removed (or, for a run with nothing to do, would have). */
export interface MaintenanceReport {
  runId: string | null;
  drafts: string[];
  releases: string[];
  errors: string[];
}

/** The creation time (ms) in a draft id's ULID time part. */
function draftIdTime(time: string): number {
  let ms = 0;
  for (const char of time) ms = ms * 32 + ALPHABET.indexOf(char);
  return ms;
}

/** The newest modification time (ms) of anything in `dir`, the directory included. */
async function newestMtime(dir: string): Promise<number> {
  let newest = (await Deno.stat(dir)).mtime?.getTime() ?? 0;
  for await (const entry of Deno.readDir(dir)) {
    const path = join(dir, entry.name);
    const time = entry.isDirectory
      ? await newestMtime(path)
      : (await Deno.lstat(path)).mtime?.getTime() ?? 0;
    newest = Math.max(newest, time);
  }
  return newest;
}

/** Drafts whose id and files are all older than the policy's age. */
async function oldDrafts(store: Store, maxAgeMs: number, now: number): Promise<string[]> {
  const dir = join(store.stateDir, "drafts");
  const old: string[] = [];
  try {
    for await (const entry of Deno.readDir(dir)) {
      const match = DRAFT_ID.exec(entry.name);
      if (!entry.isDirectory || match === null) continue;
      const touched = Math.max(draftIdTime(match[1]), await newestMtime(join(dir, entry.name)));
      if (now - touched > maxAgeMs) old.push(entry.name);
    }
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
  return old.sort();
}

/** Whether `path` lies inside `dir` (both resolved). */
function inside(dir: string, path: string): boolean {
  return resolve(path).startsWith(resolve(dir) + sep);
}

/**
 * Runs the cleanup policy once. When there is something to remove, the run is recorded
 * `started` with the exact drafts and releases first, then each is removed, then the run is
 * recorded `done` with any failures; a release outside `<state>/releases/` is never touched.
 * Proven by "`runMaintenance()` removes old drafts and unpinned releases, never a pinned one" in
 * `tests/runtime/jobs/maintenance.test.ts`.
 */
export async function runMaintenance(
  deps: MaintenanceDeps,
  trigger: string,
): Promise<MaintenanceReport> {
  const { store, cleanup } = deps;
  const now = store.clock();
  const drafts = await oldDrafts(store, cleanup.draft_max_age_days * DAY_MS, now);
  const releasesDir = join(store.stateDir, "releases");
  const releases = releaseRetention(store, { now, keepMs: cleanup.release_keep_days * DAY_MS })
    .filter((r) => r.pinnedBy.length === 0 && inside(releasesDir, r.path))
    .map((r) => ({ id: r.id, path: r.path }));
  const present = [];
  for (const release of releases) {
    if (await Deno.stat(release.path).then(() => true, () => false)) present.push(release);
  }
  if (drafts.length === 0 && present.length === 0) {
    return { runId: null, drafts, releases: [], errors: [] };
  }
  const runId = startMaintenance(store, {
    session: deps.session,
    trigger,
    policy: { ...cleanup },
    drafts,
    releases: present,
  });
  const errors: string[] = [];
  const remove = async (path: string) => {
    try {
      await Deno.remove(path, { recursive: true });
    } catch (error) {
      if (!(error instanceof Deno.errors.NotFound)) errors.push(`${path}: ${error}`);
    }
  };
  for (const draft of drafts) {
    await remove(join(store.stateDir, "drafts", draft));
    // A failed draft's diagnostics beside it go with it; the store keeps their history.
    await remove(join(store.stateDir, "drafts", `${draft}.diagnostics.json`));
  }
  for (const release of present) await remove(release.path);
  finishMaintenance(store, { session: deps.session, id: runId, errors });
  deps.log.info(
    "maintenance.done",
    `maintenance removed ${drafts.length} draft(s) and ${present.length} release(s)`,
    { run_id: runId, errors: errors.length },
  );
  return { runId, drafts, releases: present.map((r) => r.id), errors };
}

/** Runs maintenance at start and then every `cleanup.interval_hours`, one run at a time. */
export class MaintenanceSchedule {
  #handle: unknown = undefined;
  #running: Promise<unknown> = Promise.resolve();
  #stopped = false;

  /** Creates a stopped schedule. */
  constructor(readonly deps: MaintenanceDeps, readonly timers: HostTimers) {}

  /** Runs once now and arms the interval. */
  start(): void {
    this.#run("start");
  }

  /** Stops the interval and waits for a run in progress. */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#handle !== undefined) this.timers.clear(this.#handle);
    await this.#running;
  }

  #run(trigger: string): void {
    if (this.#stopped) return;
    this.#running = runMaintenance(this.deps, trigger).catch((error) =>
      this.deps.log.error("maintenance.failed", `maintenance failed: ${error}`)
    ).finally(() => this.#arm(this.deps.cleanup.interval_hours * 3_600_000));
  }

  /** Runs again after `delay` ms, waiting in steps a host timer can hold. */
  #arm(delay: number): void {
    if (this.#stopped) return;
    const step = Math.min(delay, LONGEST_TIMER_MS);
    this.#handle = this.timers.set(
      () => step < delay ? this.#arm(delay - step) : this.#run("interval"),
      step,
    );
  }
}
