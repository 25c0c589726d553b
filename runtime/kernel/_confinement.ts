/**
 * The daemon's decision, once at start, on how its children run: inside bubblewrap where it
 * works, unconfined (and saying so) where it does not, or not at all when the configuration
 * says `sandbox "required"`.
 *
 * @module
 */

import type { Logger } from "../core/mod.ts";
import { probeSandbox, requireSandbox, type SandboxBase, type SandboxStatus } from "./_sandbox.ts";
import { resolvePython } from "./_spawn.ts";

/** Options for {@linkcode prepareConfinement}. */
export interface ConfinementOptions {
  /** The configuration's `sandbox` node. */
  config: { mode: "auto" | "required"; network: boolean };
  /** The real interpreter and its home, when the launcher found them. */
  python?: { executable: string; home: string };
  /** The interpreter to look up otherwise (`KLBR_PYTHON`, default `python3`). */
  pythonName: string;
  /** The bubblewrap executable (`KLBR_BWRAP`, default `bwrap`). */
  bwrap: string;
  /**
   * What a probe of this same bubblewrap, interpreter and network setting found moments ago
   * (the launcher's); when absent the probe runs here.
   */
  status?: SandboxStatus;
  /** The state directory, never bound into a child. */
  stateDir: string;
  /** Where the decision is logged. */
  log: Logger;
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
}

/**
 * Probes bubblewrap with the real interpreter (unless the launcher's probe is given) and logs the outcome: `sandbox.confined` (info)
 * or `sandbox.unconfined` (warn, with the reason and what to do).
 *
 * @throws {KlbrError} `sandbox_unavailable` when the configuration requires the sandbox and
 * it cannot run; `not_found` / `invalid_config` when the interpreter cannot be found.
 */
export async function prepareConfinement(options: ConfinementOptions): Promise<Confinement> {
  const python = options.python ?? await resolvePython(options.pythonName);
  const status = options.status ?? await probeSandbox({
    bwrap: options.bwrap,
    python: python.executable,
    readOnly: [python.home],
    network: options.config.network,
  });
  requireSandbox(status, options.config.mode);
  const stateDir = await Deno.realPath(options.stateDir);
  if (status.mode === "bwrap") {
    options.log.info(
      "sandbox.confined",
      `the workbench, hook workers and workspace.run run inside bubblewrap (network ${
        status.network ? "allowed" : "off"
      }; the state directory is not bound)`,
      { mode: status.mode, network: status.network },
    );
  } else {
    options.log.warn(
      "sandbox.unconfined",
      `the workbench is UNCONFINED: a cell can read and write anything this user can, the token and the store included (${status.reason}); install bubblewrap, or set sandbox "required" to refuse to start`,
      { mode: status.mode, reason: status.reason },
    );
  }
  const base = status.mode === "bwrap"
    ? { bwrap: options.bwrap, network: status.network, readOnly: [python.home], stateDir }
    : undefined;
  return { python: python.executable, base, status, stateDir };
}
