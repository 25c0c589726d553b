/**
 * Small file-system facts the store and the state directory share.
 *
 * @module
 */

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
