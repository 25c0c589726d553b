/**
 * Backups the daemon takes by itself: on the `backup { every … keep … }` schedule (one at
 * start when the newest is older than `every`), the oldest scheduled ones beyond `keep`
 * removed; and one before the store migrates to a newer schema, kept until removed by hand.
 * Each is a verified `backupState`, and each is one line in the log.
 *
 * Names: `klbr-20261203T161800Z` (scheduled) and `klbr-20261203T161800Z-before-schema-14`
 * (before a migration); pruning reads and removes only the first kind.
 *
 * @module
 */

import { join } from "node:path";
import { schemaVersionOnDisk } from "../../store/maintenance/backup.ts";
import { LATEST_VERSION } from "../../store/schema/migrations.ts";
import { STORE_FILE } from "../../store/store.ts";
import type { BackupConfig } from "../config/mod.ts";
import { KlbrError, type Logger, LONGEST_TIMER_MS } from "../core/mod.ts";
import { backupState } from "./_backup.ts";

/** A scheduled backup's directory name; its groups are its UTC time, year to second. */
const SCHEDULED = /^klbr-(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/;

/** Where the backups of `stateDir` go: `backup { dir }`, else `<state>/backups`. */
function backupDir(stateDir: string, config: Pick<BackupConfig, "dir">): string {
  return config.dir ?? join(stateDir, "backups");
}

/** `86400000` → `24h`: the unit the configuration would use. */
function duration(ms: number): string {
  return ms % 86_400_000 === 0 && ms > 86_400_000
    ? `${ms / 86_400_000}d`
    : ms % 3_600_000 === 0
    ? `${ms / 3_600_000}h`
    : `${ms / 60_000}m`;
}

/** `2026-12-03T16:18:00.123Z` → `20261203T161800Z`. */
function stamp(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z").replaceAll(/[-:]/g, "");
}

/** The scheduled backups in `dir`, oldest first. */
async function scheduledIn(dir: string): Promise<{ name: string; at: number }[]> {
  const found: { name: string; at: number }[] = [];
  try {
    for await (const entry of Deno.readDir(dir)) {
      const m = SCHEDULED.exec(entry.name);
      const at = m && Date.UTC(+m[1], +m[2] - 1, +m[3], +m[4], +m[5], +m[6]);
      if (entry.isDirectory && at !== null) found.push({ name: entry.name, at });
    }
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
  return found.sort((a, b) => a.name < b.name ? -1 : 1);
}

/** Options for {@linkcode startBackupSchedule} and {@linkcode backupBeforeMigration}. */
export interface BackupScheduleOptions {
  stateDir: string;
  config: BackupConfig;
  log: Logger;
  /** @default {Date.now} */
  clock?: () => number;
}

/** A running schedule. */
export interface BackupSchedule {
  /** Stops the schedule; resolves once a backup in progress has ended. */
  stop(): Promise<void>;
}

/**
 * Starts taking backups every `config.every`, the first at once when the newest scheduled
 * backup is older than that (or there is none); undefined when `every` is not set.
 *
 * After each run, `dir` holds at most `keep` scheduled backups, each verified; a run that
 * fails is logged (`backup.failed`) and the next is tried an `every` later. Proven by
 * "a daemon with backup { every keep } takes a verified backup at start and keeps the newest
 * keep" in `tests/runtime/backup/schedule.test.ts`.
 */
export function startBackupSchedule(options: BackupScheduleOptions): BackupSchedule | undefined {
  const every = options.config.every;
  if (every === undefined) return undefined;
  const clock = options.clock ?? Date.now;
  const dir = backupDir(options.stateDir, options.config);
  let timer: ReturnType<typeof setTimeout> | undefined;
  let running: Promise<void> = Promise.resolve();
  let stopped = false;
  const arm = (delay: number) => {
    if (stopped) return;
    const step = Math.min(delay, LONGEST_TIMER_MS);
    timer = setTimeout(() => {
      if (step < delay) return arm(delay - step);
      running = takeScheduled(options, dir).finally(() => arm(every));
    }, step);
  };
  running = scheduledIn(dir).then((found) => {
    const next = found.length === 0 ? clock() : found[found.length - 1].at + every;
    options.log.info(
      "backup.schedule",
      `backups every ${duration(every)} into ${dir}, keeping ${options.config.keep}; the next at ${
        new Date(Math.max(next, clock())).toISOString()
      }`,
      { dir, every_ms: every, keep: options.config.keep },
    );
    arm(Math.max(0, next - clock()));
  }).catch((error) => {
    options.log.error("backup.failed", `cannot read ${dir} for the backup schedule: ${error}`);
  });
  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}

/** Takes one scheduled backup, then prunes; logs what happened, never throws. */
async function takeScheduled(options: BackupScheduleOptions, dir: string): Promise<void> {
  const { log, stateDir, config } = options;
  const target = join(dir, `klbr-${stamp((options.clock ?? Date.now)())}`);
  try {
    await Deno.mkdir(dir, { recursive: true });
    const manifest = await backupState(stateDir, target);
    log.info(
      "backup.done",
      `backed up and verified into ${target}: ${manifest.inputs} inputs, ${manifest.releases.length} releases, ${manifest.artifacts.length} artifacts`,
      { path: target, inputs: manifest.inputs },
    );
    const found = await scheduledIn(dir);
    const old = found.slice(0, Math.max(0, found.length - config.keep));
    for (const { name } of old) await Deno.remove(join(dir, name), { recursive: true });
    if (old.length > 0) {
      log.info(
        "backup.pruned",
        `removed ${old.length} old backup(s) of ${dir}, keeping the newest ${config.keep}`,
        { removed: old.map((b) => b.name), keep: config.keep },
      );
    }
  } catch (error) {
    // A refusal klbr worded already names the directory and the fix; anything else is worded here.
    const said = error instanceof KlbrError
      ? error.message
      : `cannot back up into ${target}: ${
        error instanceof Error ? error.message : error
      }; free space there or set backup { dir … }`;
    log.error("backup.failed", `${said}; the next try is in ${duration(config.every!)}`, {
      path: target,
    });
  }
}

/**
 * Backs the state directory up before its store migrates to this build's schema: when the
 * store on disk is older, a verified backup `klbr-<time>-before-schema-<new>` is taken into
 * the backup directory and logged (`store.backup_before_migration`), and its path returned;
 * otherwise nothing is done.
 *
 * On return the backup is complete and verified, or the store is not behind. Proven by "a
 * store of an older schema is backed up, verified and named in the log before it migrates" in
 * `tests/runtime/backup/schedule.test.ts`.
 *
 * @throws {KlbrError} `state_unusable` when the backup fails: the store is not migrated
 *   without one.
 */
export async function backupBeforeMigration(
  options: BackupScheduleOptions,
): Promise<string | undefined> {
  const { stateDir, log } = options;
  const to = LATEST_VERSION;
  const from = schemaVersionOnDisk(join(stateDir, STORE_FILE));
  if (from === undefined || from === 0 || from >= to) return undefined;
  const dir = backupDir(stateDir, options.config);
  const target = join(
    dir,
    `klbr-${stamp((options.clock ?? Date.now)())}-before-schema-${to}`,
  );
  try {
    await Deno.mkdir(dir, { recursive: true });
    await backupState(stateDir, target);
  } catch (cause) {
    throw new KlbrError(
      "state_unusable",
      `cannot migrate the store from schema ${from} to ${to}: the backup taken first failed (${
        cause instanceof Error ? cause.message : cause
      }); free space in ${dir} or set backup { dir … }, then start again (got ${target})`,
      { cause },
    );
  }
  log.info(
    "store.backup_before_migration",
    `store schema ${from} is older than ${to}: backed up and verified into ${target}; migrating now`,
    { from, to, path: target },
  );
  return target;
}
