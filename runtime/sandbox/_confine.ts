/**
 * The command line of one confined process: `/bin/sh` running the wrapper (`_shell.ts`), which
 * puts the process in its tree's cgroup (or sets its rlimits) and opens the seccomp filter,
 * then `exec`s bubblewrap with the arguments of `_sandbox.ts`.
 *
 * @module
 */

import { type Jail, openJail } from "./_jail.ts";
import { bwrapArgs, type ConfinedSpawn, type SandboxBase } from "./_sandbox.ts";
import { SHELL, WRAPPER } from "./_shell.ts";

/** A confined process's command line and its tree's limits. */
export interface ConfinedCommand {
  /** `/bin/sh`. */
  program: string;
  args: string[];
  /** The tree's cgroup (or rlimits); null where the base has no limits. */
  jail: Jail | null;
}

/**
 * The command that runs `spawn` confined by `base`; the tree's cgroup is made by the wrapper,
 * so the caller releases `jail` once the process (and its group) has ended.
 *
 * @example
 * ```ts
 * const { program, args, jail } = confinedCommand(base, { command: python, args: ["-V"],
 *   cwd: ws, readWrite: [ws], readOnly: [] });
 * const child = new Deno.Command(program, { args, detached: true }).spawn();
 * await child.status; await jail?.release();
 * ```
 */
export function confinedCommand(base: SandboxBase, spawn: ConfinedSpawn): ConfinedCommand {
  const jail = base.limits === null ? null : openJail(base.limits);
  return {
    program: SHELL,
    args: [
      "-c",
      WRAPPER,
      "klbr-sandbox",
      base.seccomp ?? "/dev/null",
      ...(jail?.wrapperArgs ?? ["0"]),
      "--",
      base.bwrap,
      ...bwrapArgs(base, spawn),
    ],
    jail,
  };
}
