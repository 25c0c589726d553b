/**
 * Copying the files of a backup: whole trees with their modes, single files fsynced, and the
 * sha256 of a file.
 *
 * @module
 */

import { join } from "node:path";

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
