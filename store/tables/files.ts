/**
 * Small file-system facts the store and the state directory share.
 *
 * @module
 */

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
