/**
 * `doctor`'s sandbox section: what a confined child sees, and — read by a probe inside the
 * sandbox, through the very wrapper a cell starts with — the privileges a cell has (its
 * effective capabilities must be none), the limits of each process tree and how they are
 * enforced, and whether cells may change klbr's own code. A running daemon is not disturbed:
 * the probe writes its filter in a temporary directory and its cgroups have names of their own.
 *
 * @module
 */

import { join } from "node:path";
import type { Config } from "../config/mod.ts";
import { SILENT_LOGGER } from "../core/mod.ts";
import {
  describeConfinement,
  ETC_BINDS,
  prepareConfinement,
  SYSTEM_BINDS,
} from "../sandbox/mod.ts";
import type { ServePermissionInput } from "./_serve_permissions.ts";

/** Where doctor's lines go. */
interface Out {
  say: (line: string) => void;
  problem: (line: string) => void;
}

/**
 * Prints the sandbox mode, what a confined child sees and what a cell has; unconfined is a
 * problem (a cell could then read the token and the store), and so is a capability left.
 */
export async function reportSandbox(
  input: ServePermissionInput,
  config: Config,
  out: Out,
): Promise<void> {
  const { sandbox } = input;
  if (sandbox.mode !== "bwrap") {
    out.say(`sandbox none: the workbench runs UNCONFINED (${sandbox.reason})`);
    out.problem(`sandbox: the workbench is unconfined: ${sandbox.reason}`);
    return;
  }
  out.say(`sandbox bwrap (${input.bwrap}), network ${sandbox.network ? "allowed" : "off"}`);
  out.say(`  read-only: ${[...SYSTEM_BINDS, ...ETC_BINDS].join(" ")} (those that exist)`);
  out.say(`  read-only: ${input.python.home} (python), ${join(input.repoRoot, "workbench")}`);
  out.say(
    `  read-only: the active release, ${input.skillsRoot} and ${join(input.stateDir, "skills")}`,
  );
  out.say(`  read-write: ${input.workspace}; private /tmp, /proc and /dev`);
  out.say(`  absent: ${input.stateDir} (store, token, drafts, artifacts: host RPCs only)`);
  out.say(
    `  new namespaces: user, pid, ipc, uts${sandbox.network ? "" : ", net"}; --die-with-parent`,
  );
  const scratch = await Deno.makeTempDir({ prefix: "klbr-doctor-" });
  try {
    const confinement = await prepareConfinement({
      config: config.sandbox,
      limits: {
        maxProcesses: config.sandbox.max_processes,
        memoryBytes: config.sandbox.memory,
        cpuWeight: config.sandbox.cpu_weight,
        fileSizeBytes: config.sandbox.max_file_size,
      },
      selfEdit: config.workspace.self_edit,
      python: input.python,
      status: sandbox,
      bwrap: input.bwrap,
      stateDir: input.stateDir,
      workspace: input.workspace,
      repoRoot: input.repoRoot,
      log: SILENT_LOGGER,
      inspect: { scratch },
    });
    await confinement.close();
    for (const [label, text] of describeConfinement(confinement)) {
      out.say(`  ${label}: ${text}`);
    }
    const cell = confinement.cell;
    if (cell === null) {
      out.problem(`sandbox: a confined probe did not run: ${confinement.status.reason}`);
    } else if (!/^0+$/.test(cell.capEff)) {
      out.problem(`sandbox: a cell keeps capabilities (CapEff ${cell.capEff})`);
    }
  } finally {
    await Deno.remove(scratch, { recursive: true }).catch(() => {});
  }
}
