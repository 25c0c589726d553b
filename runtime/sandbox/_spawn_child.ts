/**
 * Starting a child process with Deno's spawn failures turned into {@linkcode KlbrError}s that
 * say what to fix, shared by the workbench spawn, `workspace.run` and the sandbox's own `ps`,
 * `kill` and `/bin/sh` runs.
 *
 * @module
 */

import { KlbrError } from "../core/mod.ts";

/** What a failed spawn says, by cause: each the text after `cannot `. */
export interface SpawnFailureText {
  /** The program (or its working directory) does not exist; without it, counted as `other`. */
  notFound?: string;
  /**
   * The system refused to execute it (EACCES: a directory, or a file without the execute bit);
   * without it, counted as `forbidden`.
   */
  notExecutable?: string;
  /** Deno's permissions (or the system's) forbid running it. */
  forbidden: string;
  /** Anything else. */
  other: string;
}

/**
 * The typed error for a process that failed to start with `cause`, its message picked from
 * `text` by cause.
 *
 * @example
 * ```ts
 * throw spawnFailure(cause, { forbidden: "run ps: not permitted", other: "run ps: did not start" });
 * ```
 */
export function spawnFailure(cause: unknown, text: SpawnFailureText): KlbrError {
  if (text.notFound !== undefined && cause instanceof Deno.errors.NotFound) {
    return new KlbrError("not_found", `cannot ${text.notFound}`, { cause });
  }
  // Deno's own refusal is NotCapable; PermissionDenied is the system's EACCES.
  if (text.notExecutable !== undefined && cause instanceof Deno.errors.PermissionDenied) {
    return new KlbrError("path_invalid", `cannot ${text.notExecutable}`, { cause });
  }
  if (cause instanceof Deno.errors.NotCapable || cause instanceof Deno.errors.PermissionDenied) {
    return new KlbrError("forbidden", `cannot ${text.forbidden}`, { cause });
  }
  return new KlbrError("internal", `cannot ${text.other}`, { cause });
}

/**
 * Spawns `program` with `options`, or throws a typed error naming the failure.
 *
 * @throws {KlbrError} `not_found`, `path_invalid`, `forbidden` or `internal`, with `text`'s
 * message (the cause's text appended to `other`).
 * @example
 * ```ts
 * const child = spawnChild("python3", { args: ["-V"], stdout: "piped" }, {
 *   notFound: "run: program not found (got \"python3\")",
 *   forbidden: "run: the host may not start this program (got \"python3\")",
 *   other: "run: spawn failed (got \"python3\")",
 * });
 * await child.status;
 * ```
 */
export function spawnChild(
  program: string,
  options: Deno.CommandOptions,
  text: SpawnFailureText,
): Deno.ChildProcess {
  try {
    return new Deno.Command(program, options).spawn();
  } catch (cause) {
    throw spawnFailure(cause, { ...text, other: `${text.other}: ${String(cause)}` });
  }
}
