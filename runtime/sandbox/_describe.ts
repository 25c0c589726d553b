/**
 * The confinement in words, one line per boundary, for the start-up block, the log and
 * `doctor`: the sandbox, a cell's privileges (read inside it), its limits and whether it may
 * change klbr's own code.
 *
 * @module
 */

import { basename } from "node:path";
import { describeSettings, type LimitsPlan } from "./_limits.ts";
import type { CellView } from "./_probe.ts";
import type { SandboxStatus } from "./_sandbox.ts";

/** What {@linkcode describeConfinement} reads. */
export interface Described {
  status: SandboxStatus;
  cell: CellView | null;
  limits: LimitsPlan | null;
  protect: string[];
  selfEdit: boolean;
  selfInWorkspace: boolean;
}

/** The privileges a cell has, as the probe inside the sandbox read them. */
function privileges(status: SandboxStatus, cell: CellView | null): string {
  if (cell === null) return "not read";
  const who = status.userns
    ? `uid ${cell.uid} in a user namespace (the daemon's uid outside)`
    : `uid ${cell.uid}: ${status.usernsReason}`;
  // With no_new_privs an exec gains nothing past the permitted set: both empty is none.
  const caps = /^0+$/.test(cell.capEff) && /^0+$/.test(cell.capPrm)
    ? `capabilities none (CapEff ${cell.capEff})`
    : `CAPABILITIES LEFT: CapEff ${cell.capEff}, CapPrm ${cell.capPrm}`;
  return `${who}; ${caps}; no_new_privs ${cell.noNewPrivs ? "on" : "OFF"}; seccomp ${
    cell.seccomp ? "filter on" : "OFF"
  }`;
}

/** The limits of each tree, and how they are enforced. */
function limits(plan: LimitsPlan | null): string {
  if (plan === null) return "none";
  return `${describeSettings(plan.settings)} a process tree; ${plan.reason}`;
}

/** What of the workspace cells may not change. */
function selfEdit(d: Described): string {
  const names = d.protect.map((path) => basename(path));
  const git = names.filter((n) => [".git", "hooks", "config"].includes(n));
  const gitText = git.length > 0 ? "the git hooks and config stay read-only" : "no git repository";
  if (!d.selfInWorkspace) return `klbr's checkout is not in the workspace; ${gitText}`;
  return d.selfEdit
    ? `ON (workspace { self_edit #true }): cells may change klbr's own code; ${gitText}`
    : `off: klbr's own code (${
      names.filter((n) => !git.includes(n)).join(", ")
    }) is read-only to cells; ${gitText}`;
}

/**
 * The confinement as `[label, text]` lines: `sandbox`, then, when confined, `privileges`,
 * `limits` and `self-edit`.
 *
 * @example
 * ```ts
 * for (const [label, text] of describeConfinement(c)) console.log(`  ${label.padEnd(10)} ${text}`);
 * ```
 */
export function describeConfinement(d: Described): [string, string][] {
  if (d.status.mode !== "bwrap") {
    return [["sandbox", `NONE: the workbench runs unconfined (${d.status.reason})`]];
  }
  return [
    ["sandbox", `bubblewrap (network ${d.status.network ? "allowed" : "off"})`],
    ["privileges", privileges(d.status, d.cell)],
    ["limits", limits(d.limits)],
    ["self-edit", selfEdit(d)],
  ];
}
