/**
 * The one-line refusal for a file in the state directory that the operating system would not
 * let klbr read or write: which file, why, and what to do — never a bare OS error and its stack.
 *
 * @module
 */

import { KlbrError } from "./_errors.ts";

/** Options for {@linkcode stateFileError}. */
export interface StateFileErrorOptions {
  /** What the operating system threw. */
  cause: unknown;
  /** What to do when a directory stands where the file belongs, e.g. "move it aside, then start again". */
  fix: string;
}

/**
 * Turns an OS error on `path` into `state_unusable`: a directory in the file's place, a file
 * this user may not read or write, a read-only or full file system each name their own fix.
 *
 * @example
 * ```ts
 * stateFileError("read the session key", "/x/.klbr/session.key", { cause, fix: "move it aside, then start again" });
 * // cannot read the session key: /x/.klbr/session.key is a directory, not a file; move it aside, …
 * ```
 */
export function stateFileError(
  action: string,
  path: string,
  options: StateFileErrorOptions,
): KlbrError {
  const { cause, fix } = options;
  const code = (cause as { code?: unknown } | null)?.code;
  const reason = code === "EISDIR"
    ? `${path} is a directory, not a file; ${fix}`
    : code === "EACCES" || code === "EPERM"
    ? `this user may not use ${path} (permission denied); give the user running klbr read and write access to it (chown, chmod u+rw), then run it again`
    : code === "EROFS"
    ? `${path} is on a read-only file system; make it writable, then run it again`
    : code === "ENOTDIR"
    ? `a part of ${path} is a file, not a directory; choose a path whose parents are directories`
    : code === "ENOSPC"
    ? `the disk holding ${path} is full; free space on it, then run it again`
    : `${path} cannot be used; check it and the disk holding it, then run it again`;
  const detail = cause instanceof Error ? cause.message : String(cause);
  return new KlbrError("state_unusable", `cannot ${action}: ${reason} (got ${detail})`, { cause });
}
