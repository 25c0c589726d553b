/**
 * Starting a child process with Deno's spawn failures turned into {@linkcode KlbrError}s that
 * say what to fix, shared by the workbench spawn and `workspace.run`.
 *
 * @module
 */

import { KlbrError } from "../core/mod.ts";

/** What a failed spawn says, by cause: each the text after `cannot `. */
export interface SpawnFailureText {
  /** The program (or its working directory) does not exist. */
  notFound: string;
  /** Deno's permissions (or the system's) forbid running it. */
  forbidden: string;
  /** Anything else; the cause's text is appended. */
  other: string;
}

/**
 * Spawns `program` with `options`, or throws a typed error naming the failure.
 *
 * @throws {KlbrError} `not_found`, `forbidden` or `internal`, with `text`'s message.
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
    if (cause instanceof Deno.errors.NotFound) {
      throw new KlbrError("not_found", `cannot ${text.notFound}`, { cause });
    }
    if (cause instanceof Deno.errors.NotCapable || cause instanceof Deno.errors.PermissionDenied) {
      throw new KlbrError("forbidden", `cannot ${text.forbidden}`, { cause });
    }
    throw new KlbrError("internal", `cannot ${text.other}: ${String(cause)}`, { cause });
  }
}
