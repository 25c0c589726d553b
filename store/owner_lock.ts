/**
 * The owner lock: at most one process at a time owns a state directory.
 *
 * The lock is an exclusive `flock` on `<stateDir>/owner.lock`, taken without waiting. The kernel
 * drops it when the holding process dies, however it dies, so a lock left by a killed process
 * is recovered by the next opener with no guessing about pids: a reused pid cannot fake a live
 * owner, and a stale file cannot block one. The file's content (pid, start time, hostname) only
 * names the holder in a refusal; it never decides ownership. (Deno needs `--allow-all` to read
 * `/proc/<pid>/stat`, so a start-tick check would not run under the daemon's narrow permissions
 * anyway.)
 *
 * The file is never deleted: an opener that opened it just before a delete would lock an
 * unlinked inode while a third process locks a new file, and both would own the directory.
 *
 * @module
 */

import { join } from "node:path";
import { z } from "zod";
import { KlbrError } from "../runtime/core/mod.ts";

/** The lock file's name inside the state directory. */
export const OWNER_LOCK_FILE = "owner.lock";

const HolderSchema = z.object({
  pid: z.number().int().positive(),
  started_at: z.number().int(),
  hostname: z.string(),
});

/** Who holds (or last held) an owner lock, as written in the lock file. */
export type OwnerLockHolder = z.infer<typeof HolderSchema>;

/** A held owner lock. Release it with {@linkcode releaseOwnerLock}. */
export interface OwnerLock {
  /** The lock file's path. */
  readonly path: string;
  /** What this process wrote into the lock file. */
  readonly holder: OwnerLockHolder;
  /** The open, locked file; closing it drops the lock. */
  readonly file: Deno.FsFile;
}

// A probe (readOwnerLock) holds a shared lock for an instant; an opener that meets only a
// probe tries again, at most this many times.
const MAX_ATTEMPTS = 100;

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

function readHolder(path: string): OwnerLockHolder | undefined {
  try {
    return parseHolder(Deno.readTextFileSync(path));
  } catch {
    return undefined;
  }
}

/** Takes the exclusive lock on `file`; `false` when another process owns it. */
function lockExclusive(file: Deno.FsFile): boolean {
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    if (file.tryLockSync(true)) return true;
    // A shared lock is only refused while someone holds the exclusive one: an owner.
    if (!file.tryLockSync(false)) return false;
    file.unlockSync();
  }
  return false;
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
    locked = lockExclusive(file);
  } finally {
    if (!locked) file.close();
  }
  if (!locked) {
    const holder = readHolder(path);
    const who = holder
      ? `pid ${holder.pid} started at ${
        new Date(holder.started_at).toISOString()
      } on ${holder.hostname}`
      : "a process that has not yet written its pid";
    const stop = holder ? `kill -TERM ${holder.pid}` : "a SIGTERM";
    throw new KlbrError(
      "owner_locked",
      `cannot open store as owner: the state directory is held by ${who}, a running klbr; stop it first (${stop} drains it; systemctl --user stop klbr when it runs as a service) or use another --state (got ${path})`,
    );
  }
  const holder: OwnerLockHolder = { pid: Deno.pid, started_at: now, hostname: hostname() };
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
    // Already closed: the lock went with the descriptor.
  }
  try {
    lock.file.close();
  } catch {
    // Closed before; closing drops the flock, which is all release means.
  }
}

/**
 * Reads who the lock file names and whether that process holds the lock now.
 *
 * `alive` is `true` exactly when some process holds the exclusive lock. The probe takes a
 * shared lock for an instant; an opener that meets it retries, so the probe never refuses an
 * owner. Meant for `doctor` and `status`; returns `undefined` when the file names nobody.
 */
export function readOwnerLock(
  stateDir: string,
): { holder: OwnerLockHolder; alive: boolean } | undefined {
  const path = join(stateDir, OWNER_LOCK_FILE);
  const holder = readHolder(path);
  if (holder === undefined) return undefined;
  let file: Deno.FsFile;
  try {
    file = Deno.openSync(path, { read: true });
  } catch {
    return undefined;
  }
  try {
    const free = file.tryLockSync(false);
    if (free) file.unlockSync();
    return { holder, alive: !free };
  } finally {
    file.close();
  }
}
