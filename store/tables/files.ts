/**
 * Small file-system facts the store and the state directory share.
 *
 * @module
 */

import { basename, dirname, join } from "node:path";

/**
 * Runs `touch`, a synchronous file-system call on one path, and returns its result, or
 * `undefined` when nothing is at that path; every other error throws.
 *
 * @example
 * ```ts
 * const size = ifExists(() => Deno.statSync(path).size); // undefined: no file
 * ifExists(() => Deno.removeSync(path)); // removed, or was not there
 * ```
 */
export function ifExists<T>(touch: () => T): T | undefined {
  try {
    return touch();
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return undefined;
    throw error;
  }
}

/**
 * Returns whether anything (file, directory or link) exists at `path`; other errors throw.
 *
 * @example
 * ```ts
 * if (!(await pathExists(config))) await Deno.writeTextFile(config, text);
 * ```
 */
export async function pathExists(path: string): Promise<boolean> {
  try {
    await Deno.lstat(path);
    return true;
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return false;
    throw error;
  }
}

/**
 * Fsyncs the file or directory at `path`: a file's bytes, or a directory's entries, so a file
 * renamed or created in it survives a power loss.
 *
 * @throws what opening or syncing it throws (it does not exist, a full disk).
 * @example
 * ```ts
 * await Deno.rename(temp, path);
 * await syncPath(dirname(path));
 * ```
 */
export async function syncPath(path: string): Promise<void> {
  const handle = await Deno.open(path, { read: true });
  try {
    await handle.sync();
  } finally {
    handle.close();
  }
}

/**
 * Replaces the file at `path` whole: `data` goes to a new file beside it
 * (`.<name>.<uuid>.tmp`), which is fsynced and renamed over `path`, then the directory is
 * fsynced. A reader sees the old file or the new one, never a part; after a crash the file is
 * one of the two (at worst with the temp file left beside it). The new file's mode is `mode`
 * exactly: the umask does not narrow it.
 *
 * @throws what creating, writing, syncing or renaming throws (a missing directory, a full
 *   disk); the temp file is removed first.
 * @example
 * ```ts
 * await replaceFile(join(stateDir, "operator-token"), `${token}\n`, { mode: 0o600 });
 * ```
 */
export async function replaceFile(
  path: string,
  data: string | Uint8Array,
  options: { mode: number },
): Promise<void> {
  const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
  const temp = join(dirname(path), `.${basename(path)}.${crypto.randomUUID()}.tmp`);
  const file = await Deno.open(temp, { write: true, createNew: true, mode: options.mode });
  try {
    try {
      await Deno.chmod(temp, options.mode);
      for (let at = 0; at < bytes.length;) at += await file.write(bytes.subarray(at));
      await file.sync();
    } finally {
      file.close();
    }
    await Deno.rename(temp, path);
  } catch (error) {
    await Deno.remove(temp).catch(() => {});
    throw error;
  }
  await syncPath(dirname(path));
}
