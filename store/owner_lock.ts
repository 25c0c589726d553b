/**
 * The owner lock: at most one process at a time owns a state directory.
 *
 * The lock is an exclusive `flock` on `<stateDir>/owner.lock`, taken without waiting. The kernel
 * drops it when the holding process dies, however it dies, so a lock left by a killed process
 * is recovered by the next opener without guessing. The file's content names the holder (pid,
 * start time, hostname, boot id and the `/proc/<pid>/stat` start tick) so a refused opener can
 * say who holds it; that content is informational and is never what decides ownership.
 *
 * The file is never deleted: an opener that opened it just before a delete would lock an
 * unlinked inode while a third process locks a new file, and both would own the directory.
 *
 * @module
 */

import { join } from "node:path";
import { z } from "zod";
import { KlbrError } from "../runtime/errors.ts";

/** The lock file's name inside the state directory. */
export const OWNER_LOCK_FILE = "owner.lock";

const HolderSchema = z.object({
  pid: z.number().int().positive(),
  started_at: z.number().int(),
  hostname: z.string(),
  boot_id: z.string().nullable(),
  proc_start: z.string().nullable(),
});

/** Who holds (or last held) an owner lock, as written in the lock file. */
export type OwnerLockHolder = z.infer<typeof HolderSchema>;

/** A held owner lock. Release it exactly once with {@linkcode releaseOwnerLock}. */
export interface OwnerLock {
  /** The lock file's path. */
  readonly path: string;
  /** What this process wrote into the lock file. */
  readonly holder: OwnerLockHolder;
  /** The open, locked file; closing it drops the lock. */
  readonly file: Deno.FsFile;
}

function readText(path: string): string | null {
  try {
    return Deno.readTextFileSync(path);
  } catch {
    return null;
  }
}

/** Field 22 of `/proc/<pid>/stat`: the process start time in clock ticks since boot. */
function procStart(pid: number): string | null {
  const stat = readText(`/proc/${pid}/stat`);
  if (stat === null) return null;
  // The command name (field 2) may contain spaces and parentheses; fields resume after the last ')'.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return fields[19] ?? null;
}

function hostname(): string {
  try {
    return Deno.hostname();
  } catch {
    return "unknown";
  }
}

function parseHolder(text: string | null): OwnerLockHolder | undefined {
  if (!text) return undefined;
  try {
    const parsed = HolderSchema.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Takes the owner lock of `stateDir`, or refuses at once when a live process holds it.
 *
 * When it returns, this process holds the lock and the lock file names it (written and
 * fsynced). Proven by "`openStore()` refuses a second owner process and names its pid" and
 * "`openStore()` recovers the owner lock of a SIGKILLed process".
 *
 * @throws {KlbrError} `owner_locked` naming the holder's pid and start time.
 * @example
 * ```ts
 * const lock = acquireOwnerLock("/srv/klbr/.klbr");
 * try { … } finally { releaseOwnerLock(lock); }
 * ```
 */
export function acquireOwnerLock(stateDir: string, now: number = Date.now()): OwnerLock {
  const path = join(stateDir, OWNER_LOCK_FILE);
  const file = Deno.openSync(path, { read: true, write: true, create: true });
  let locked = false;
  try {
    locked = file.tryLockSync(true);
  } finally {
    if (!locked) file.close();
  }
  if (!locked) {
    const holder = parseHolder(readText(path));
    const who = holder
      ? `pid ${holder.pid} started at ${
        new Date(holder.started_at).toISOString()
      } on ${holder.hostname}`
      : "a process that has not yet written its pid";
    throw new KlbrError(
      "owner_locked",
      `cannot open store as owner: the state directory is held by ${who} (got ${path})`,
    );
  }
  const holder: OwnerLockHolder = {
    pid: Deno.pid,
    started_at: now,
    hostname: hostname(),
    boot_id: readText("/proc/sys/kernel/random/boot_id")?.trim() ?? null,
    proc_start: procStart(Deno.pid),
  };
  try {
    file.truncateSync(0);
    const bytes = new TextEncoder().encode(JSON.stringify(holder) + "\n");
    let written = 0;
    while (written < bytes.length) written += file.writeSync(bytes.subarray(written));
    file.syncSync();
  } catch (error) {
    file.close();
    throw error;
  }
  return { path, holder, file };
}

/**
 * Drops an owner lock. The file stays (see the module comment) and is emptied first, so it no
 * longer names a holder. Releasing twice is a no-op.
 */
export function releaseOwnerLock(lock: OwnerLock): void {
  try {
    lock.file.truncateSync(0);
    lock.file.syncSync();
  } catch {
    // Already closed: the lock is gone with the descriptor.
  }
  try {
    lock.file.close();
  } catch {
    // Closed before; closing drops the flock, which is all release means.
  }
}

/**
 * Reads who the lock file names, and whether that process still runs, without taking the lock.
 *
 * `alive` is `true` when the named pid exists on this boot with the recorded start tick (which
 * rules out a reused pid). Meant for `doctor` and `status`; ownership itself is decided only by
 * {@linkcode acquireOwnerLock}.
 */
export function readOwnerLock(
  stateDir: string,
): { holder: OwnerLockHolder; alive: boolean } | undefined {
  const holder = parseHolder(readText(join(stateDir, OWNER_LOCK_FILE)));
  if (holder === undefined) return undefined;
  const bootId = readText("/proc/sys/kernel/random/boot_id")?.trim() ?? null;
  const sameBoot = holder.boot_id === null || bootId === null || holder.boot_id === bootId;
  const start = procStart(holder.pid);
  const alive = sameBoot && start !== null &&
    (holder.proc_start === null || start === holder.proc_start);
  return { holder, alive };
}
