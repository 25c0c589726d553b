/**
 * Copying the files of a backup: whole trees with their modes, single files fsynced, the
 * sha256 of a file, and what a full or read-only disk under a copy means.
 *
 * @module
 */

import { join } from "node:path";
import { KlbrError } from "../core/mod.ts";
import { storeFailure } from "../../store/store.ts";

/** The sha256 of a file's bytes, hex. */
export async function fileSha256(path: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", await Deno.readFile(path));
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** Copies one file with its mode and fsyncs the copy. */
export async function copyFileSynced(from: string, to: string): Promise<void> {
  await Deno.copyFile(from, to);
  const mode = (await Deno.stat(from)).mode;
  if (mode !== null) await Deno.chmod(to, mode & 0o777);
  const file = await Deno.open(to, { read: true });
  try {
    await file.sync();
  } finally {
    file.close();
  }
}

/** Copies the regular files and directories under `from` into `to` (created); no symlinks. */
export async function copyTree(from: string, to: string): Promise<number> {
  await Deno.mkdir(to, { recursive: true });
  let files = 0;
  for await (const entry of Deno.readDir(from)) {
    const source = join(from, entry.name);
    if (entry.isDirectory) files += await copyTree(source, join(to, entry.name));
    else if (entry.isFile) {
      await copyFileSynced(source, join(to, entry.name));
      files++;
    }
  }
  return files;
}

/** Whether `dir` is absent or an empty directory; a file there is neither. */
export async function isEmptyOrAbsent(dir: string): Promise<boolean> {
  try {
    for await (const _ of Deno.readDir(dir)) return false;
    return true;
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return true;
    if (error instanceof Deno.errors.NotADirectory) return false;
    throw error;
  }
}

/**
 * The one-line refusal for a copy that the disk it writes to would not take: a full disk
 * (the OS's `ENOSPC` or SQLite's `SQLITE_FULL`) or a read-only file system, naming `dir` and
 * the fix; `undefined` for any other failure, which passes on as it is. Only writes meet
 * these, and a backup or a restore writes only under the directory it is given.
 *
 * @example
 * ```ts
 * diskRefusal("back up into", "/mnt/full/b", error)?.code; // "state_unusable"
 * ```
 */
export function diskRefusal(action: string, dir: string, cause: unknown): KlbrError | undefined {
  if (cause instanceof KlbrError || !(cause instanceof Error)) return undefined;
  const { code } = cause as { code?: unknown };
  // The store's own reading of a full disk: SQLite's result code, or its message alone (the
  // online backup throws no code), or the OS's "No space left on device".
  const reason = storeFailure(cause) === "full"
    ? "the disk holding it is full; free space on it or give a directory on another disk"
    : code === "EROFS"
    ? "it is on a read-only file system; make it writable or give another directory"
    : undefined;
  if (reason === undefined) return undefined;
  return new KlbrError(
    "state_unusable",
    `cannot ${action} ${dir}: ${reason}, then run it again (got ${cause.message.slice(0, 300)})`,
    { cause },
  );
}
