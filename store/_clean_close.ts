/**
 * The clean-close mark: a file beside the store (`runtime.sqlite.clean`) that the owner writes
 * after it closed the store cleanly, holding the store file's identity then (inode, size,
 * modification and change times). The next open of a large store skips `PRAGMA quick_check`
 * (which reads the whole file, a second a quarter gigabyte here) when the mark still matches and
 * there is no `-wal`: nothing wrote the file since klbr closed it. The owner removes the mark as
 * soon as it has opened the store, so a crash, a kill or any write by someone else leaves no mark
 * that matches, and the next start checks the whole file again. Private to `store/`.
 *
 * @module
 */

import { ifExists } from "./tables/files.ts";

/** Stores smaller than this are always checked: their check costs little. */
export const ALWAYS_CHECK_BELOW_BYTES = 16 * 1024 * 1024;

const SUFFIX = ".clean";

interface Identity {
  ino: number | null;
  size: number;
  mtime: number | null;
  ctime: number | null;
}

function identity(path: string): Identity | undefined {
  const info = ifExists(() => Deno.statSync(path));
  return info && {
    ino: info.ino ?? null,
    size: info.size,
    mtime: info.mtime?.getTime() ?? null,
    ctime: info.ctime?.getTime() ?? null,
  };
}

function walInUse(path: string): boolean {
  return (identity(`${path}-wal`)?.size ?? 0) > 0;
}

/**
 * Whether the store at `path` is large and unchanged since the owner's last clean close, so its
 * whole-file check may be skipped.
 */
export function closedCleanly(path: string): boolean {
  const now = identity(path);
  if (now === undefined || now.size < ALWAYS_CHECK_BELOW_BYTES || walInUse(path)) return false;
  let mark: unknown;
  try {
    mark = JSON.parse(Deno.readTextFileSync(`${path}${SUFFIX}`));
  } catch {
    return false; // no mark, or not one we wrote
  }
  if (now.mtime === null || now.ctime === null) return false;
  const m = mark as Partial<Identity>;
  return m.ino === now.ino && m.size === now.size && m.mtime === now.mtime &&
    m.ctime === now.ctime;
}

/** Removes the mark (the owner has the store open now); no mark is fine. */
export function forgetCleanClose(path: string): void {
  ifExists(() => Deno.removeSync(`${path}${SUFFIX}`));
}

/** Writes the mark after a clean close; nothing when a `-wal` is left or the file is gone. */
export function markCleanClose(path: string): void {
  const now = identity(path);
  if (now === undefined || walInUse(path)) return;
  Deno.writeTextFileSync(`${path}${SUFFIX}`, JSON.stringify(now));
}
