/**
 * The daemon's decision, once at start, on how its children run: inside bubblewrap where it
 * works — a user namespace, no capabilities, the seccomp filter, its own limits per tree,
 * klbr's code and the git hooks read-only — unconfined (and saying so) where it does not, or
 * not at all when the configuration says `sandbox "required"`.
 *
 * @module
 */

import { join, resolve } from "node:path";
import { replaceFile } from "../../store/tables/files.ts";
import type { Logger } from "../core/mod.ts";
import { closeLimits, type LimitSettings, type LimitsPlan, planLimits } from "./_limits.ts";
import { type CellView, probeCell, probeSandbox, requireSandbox } from "./_probe.ts";
import { protectedPaths } from "./_protect.ts";
import type { SandboxBase, SandboxStatus } from "./_sandbox.ts";
import { seccompBytes } from "./_seccomp.ts";
import { describeConfinement } from "./_describe.ts";

/** Options for {@linkcode prepareConfinement}. */
export interface ConfinementOptions {
  /** The configuration's `sandbox` node. */
  config: { mode: "auto" | "required"; network: boolean };
  /** The limits of each confined tree (the `sandbox` node's). */
  limits: LimitSettings;
  /** `workspace { self_edit }`: whether cells may change klbr's own code. */
  selfEdit: boolean;
  /** The real interpreter and its home. */
  python: { executable: string; home: string };
  /** The bubblewrap executable (`KLBR_BWRAP`, default `bwrap`). */
  bwrap: string;
  /**
   * What a probe of this same bubblewrap, interpreter and network setting found moments ago
   * (the launcher's); when absent the probe runs here.
   */
  status?: SandboxStatus;
  /** The state directory, never bound into a child; the seccomp filter is written there. */
  stateDir: string;
  /** The workspace, and the checkout whose code it may hold. */
  workspace: string;
  repoRoot: string;
  /** Where the decision is logged. */
  log: Logger;
  /**
   * `doctor`'s look without touching a running daemon: the filter is written in this
   * directory instead of the state directory, and the cgroups get names of their own.
   */
  inspect?: { scratch: string };
}

/** How the daemon's children run. */
export interface Confinement {
  /** The real interpreter the workbench runs. */
  python: string;
  /** What every confined child shares; undefined when children run unconfined. */
  base: SandboxBase | undefined;
  /** What `/health`, `doctor` and the UI say about it. */
  status: SandboxStatus;
  /** The state directory's real path (what the workspace API refuses). */
  stateDir: string;
  /** What of the workspace cells may not change (also refused to `code.patch`). */
  protect: string[];
  /** Whether cells may change klbr's own code, and whether the workspace holds it. */
  selfEdit: boolean;
  selfInWorkspace: boolean;
  /** What a confined process has (read inside the sandbox); null when unconfined. */
  cell: CellView | null;
  /** How each tree's limits are enforced; null when unconfined. */
  limits: LimitsPlan | null;
  /** Removes this daemon's cgroups (at exit). */
  close(): Promise<void>;
}

/** The name of the seccomp filter file in the state directory. */
export const SECCOMP_FILE = "seccomp.bpf";

/** Writes the filter, replacing the file whole. */
async function writeFilter(stateDir: string): Promise<string> {
  const path = join(stateDir, SECCOMP_FILE);
  await replaceFile(path, seccompBytes(), { mode: 0o644 });
  return path;
}

/**
 * Probes bubblewrap (unless the launcher's probe is given), plans the limits, writes the
 * seccomp filter, runs one confined probe through the very wrapper a cell starts with, and logs
 * the outcome: `sandbox.confined` (info) or `sandbox.unconfined` (warn, with the reason and
 * what to do). Where the cgroups cannot be joined it falls back to rlimits, and says so.
 *
 * @throws {KlbrError} `sandbox_unavailable` when the configuration requires the sandbox and
 * it cannot run; `invalid_config` when the workspace is not a directory.
 */
export async function prepareConfinement(options: ConfinementOptions): Promise<Confinement> {
  const { python } = options;
  let status = options.status ?? await probeSandbox({
    bwrap: options.bwrap,
    python: python.executable,
    readOnly: [python.home],
    network: options.config.network,
  });
  requireSandbox(status, options.config.mode);
  const stateDir = await Deno.realPath(options.stateDir).catch(() => resolve(options.stateDir));
  const found = await protectedPaths(options.workspace, {
    repoRoot: options.repoRoot,
    selfEdit: options.selfEdit,
  });
  const confined = status.mode === "bwrap"
    ? await confine(options, { status, stateDir, protect: found.paths })
    : null;
  if (confined !== null && "unconfined" in confined) {
    // Unconfined children share the host's network, whatever the sandbox node says.
    status = {
      mode: "none",
      reason: confined.unconfined,
      network: true,
      userns: false,
      usernsReason: null,
    };
    requireSandbox(status, options.config.mode);
  }
  const ok = confined !== null && !("unconfined" in confined) ? confined : null;
  const confinement: Confinement = {
    python: python.executable,
    base: ok?.base,
    status,
    stateDir,
    protect: found.paths,
    selfEdit: options.selfEdit,
    selfInWorkspace: found.selfInWorkspace,
    cell: ok?.cell ?? null,
    limits: ok?.base.limits ?? null,
    close: () => ok?.base.limits ? closeLimits(ok.base.limits) : Promise.resolve(),
  };
  logConfinement(options.log, confinement);
  return confinement;
}

/**
 * The base of every confined child, checked by a confined probe; cgroups that cannot be
 * joined give way to rlimits. What still fails leaves the children unconfined, with why.
 */
async function confine(
  options: ConfinementOptions,
  at: { status: SandboxStatus; stateDir: string; protect: string[] },
): Promise<{ base: SandboxBase; cell: CellView } | { unconfined: string }> {
  // The cgroups are named for the state directory; doctor's for its own look.
  const cgroupKey = options.inspect === undefined ? at.stateDir : `${at.stateDir} (doctor)`;
  const base: SandboxBase = {
    bwrap: options.bwrap,
    network: at.status.network,
    readOnly: [options.python.home],
    stateDir: at.stateDir,
    userns: at.status.userns,
    seccomp: await writeFilter(options.inspect?.scratch ?? at.stateDir),
    protect: at.protect,
    limits: await planLimits(options.limits, { stateDir: cgroupKey }),
  };
  try {
    return { base, cell: await probeCell(base) };
  } catch (error) {
    if (base.limits?.mode === "rlimit") return { unconfined: String(error) };
    await closeLimits(base.limits!);
    const why = `the cgroup cannot be joined (${error instanceof Error ? error.message : error})`;
    base.limits = await planLimits(options.limits, { stateDir: cgroupKey, rlimitsOnly: why });
    try {
      return { base, cell: await probeCell(base) };
    } catch (again) {
      return { unconfined: again instanceof Error ? again.message : String(again) };
    }
  }
}

function logConfinement(log: Logger, c: Confinement): void {
  const lines = describeConfinement(c);
  if (c.status.mode === "bwrap") {
    log.info("sandbox.confined", lines.map(([label, text]) => `${label}: ${text}`).join("; "), {
      mode: c.status.mode,
      network: c.status.network,
      userns: c.status.userns,
      cap_eff: c.cell?.capEff ?? null,
      limits: c.limits?.mode ?? null,
      limits_dirs: c.limits?.parents ?? null,
      self_edit: c.selfEdit,
    });
  } else {
    log.warn(
      "sandbox.unconfined",
      `the workbench is UNCONFINED: a cell can read and write anything this user can, the token and the store included (${c.status.reason}); install bubblewrap, or set sandbox "required" to refuse to start`,
      { mode: c.status.mode, reason: c.status.reason },
    );
  }
}
