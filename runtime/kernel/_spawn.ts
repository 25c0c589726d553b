/**
 * Spawning a workbench process and finding the Python interpreter to run it with.
 *
 * @module
 */

import { resolve } from "node:path";
import { z } from "zod";
import { DEFAULT_MAX_FRAME_BYTES } from "./_frame_codec.ts";
import { createLogger, describeIssues, KlbrError, type Logger } from "../core/mod.ts";
import { WorkbenchHandle } from "./_handle.ts";
import type { WorkbenchExit } from "./_types.ts";
import type { ProcessRole } from "./_fingerprint.ts";
import { type BoundRpc, RpcRegistry } from "./_rpc_registry.ts";
import { confinedCommand, type Jail, type SandboxBase, spawnChild } from "../sandbox/mod.ts";

const FALLBACK_PATH = "/usr/local/bin:/usr/bin:/bin";

/** The settings of {@linkcode spawnWorkbench}; every default lives here. */
export const WorkbenchSettings = z.object({
  /** The workspace: the worker's cwd and `HOME`. */
  cwd: z.string().min(1),
  /** The checkout; the worker imports `klbr` from `<repoRoot>/workbench`. */
  repoRoot: z.string().min(1),
  /** The largest frame either side accepts; passed as `--max-frame-bytes`. */
  maxFrameBytes: z.number().int().min(64).default(DEFAULT_MAX_FRAME_BYTES),
  /** The worker's only inherited variable; the rest of its environment is fixed. */
  env: z.object({ PATH: z.string().optional() }).strict().default({}),
  /** How long a cancelled request may take to answer before the group is killed. */
  cancelGraceMs: z.number().int().positive().default(2_000),
  /** How long `ping` waits before declaring the worker dead. */
  pingTimeoutMs: z.number().int().positive().default(5_000),
  /** How long `init` waits before declaring the worker dead. */
  initTimeoutMs: z.number().int().positive().default(30_000),
  /** How long an ending worker gets to exit and flush before it is killed and cut off. */
  exitGraceMs: z.number().int().positive().default(2_000),
});

/** Options of {@linkcode spawnWorkbench}. */
export type WorkbenchOptions = z.input<typeof WorkbenchSettings> & {
  /** The host RPCs the worker may call, bound (e.g. `workspace.run`, `local.send`). */
  rpc?: BoundRpc[];
  /** The role of the process: which of `rpc` it may call. @default "workbench" */
  role?: ProcessRole;
  /** Where unexpected RPC failures are logged, with their stack. @default stderr */
  log?: Logger;
  /** Called once when the process has ended and its group is dead. */
  onExit?: (exit: WorkbenchExit) => void;
  /**
   * Runs the worker inside bubblewrap: `cwd` read-write, `readOnly` (the release, the skills)
   * and the workbench package read-only, nothing of the state directory. @default unconfined
   */
  sandbox?: { base: SandboxBase; readOnly: string[] };
};

function hostPath(): string {
  try {
    return Deno.env.get("PATH") ?? FALLBACK_PATH;
  } catch {
    return FALLBACK_PATH;
  }
}

/**
 * Spawns `python -m klbr` as a workbench in its own process group and returns its handle.
 *
 * The worker gets a cleared environment (`PATH`, `PYTHONPATH=<repoRoot>/workbench`,
 * `PYTHONDONTWRITEBYTECODE=1`, `PYTHONUNBUFFERED=1`, `LANG=C.UTF-8`, `HOME=<cwd>`), its cwd in
 * the workspace and piped stdio; stdout carries frames only, stderr is kept in a ring for
 * diagnostics. Call `init` before anything else.
 *
 * @throws {KlbrError} `invalid_config` when the options fail their schema or two RPCs share a
 * name; `not_found` when the interpreter does not exist; `forbidden` when the host may not
 * run it.
 * @example
 * ```ts
 * const wb = spawnWorkbench("python3", { cwd: workspace, repoRoot: Deno.cwd() });
 * await wb.init({ generation: 1, session: "default", workspace, skills, behavior: null });
 * console.log((await wb.execute("cell_1", "1 + 1")).value); // "2"
 * ```
 */
export function spawnWorkbench(python: string, options: WorkbenchOptions): WorkbenchHandle {
  const parsed = WorkbenchSettings.safeParse(options);
  if (!parsed.success) {
    throw new KlbrError(
      "invalid_config",
      `cannot spawn workbench: ${describeIssues(parsed.error)}`,
    );
  }
  const settings = parsed.data;
  const registry = new RpcRegistry(options.rpc ?? []);
  const cwd = resolve(settings.cwd);
  const workbench = resolve(settings.repoRoot, "workbench");
  let program = python;
  let args = ["-m", "klbr", "--max-frame-bytes", String(settings.maxFrameBytes)];
  let jail: Jail | null = null;
  if (options.sandbox !== undefined) {
    const { base, readOnly } = options.sandbox;
    ({ program, args, jail } = confinedCommand(base, {
      command: python,
      args,
      cwd,
      readWrite: [cwd],
      readOnly: [workbench, ...readOnly],
    }));
  }
  const child = spawnChild(program, {
    args,
    cwd,
    clearEnv: true,
    env: {
      PATH: settings.env.PATH ?? hostPath(),
      PYTHONPATH: workbench,
      PYTHONDONTWRITEBYTECODE: "1",
      PYTHONUNBUFFERED: "1",
      LANG: "C.UTF-8",
      HOME: cwd,
    },
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
    detached: true,
  }, {
    notFound: `spawn workbench: interpreter or workspace not found (got ${
      JSON.stringify(program)
    } in ${cwd})`,
    forbidden: `spawn workbench: the host may not run the interpreter (got ${
      JSON.stringify(program)
    })`,
    other: "spawn workbench",
  });
  return new WorkbenchHandle(child, {
    maxFrameBytes: settings.maxFrameBytes,
    cancelGraceMs: settings.cancelGraceMs,
    pingTimeoutMs: settings.pingTimeoutMs,
    initTimeoutMs: settings.initTimeoutMs,
    exitGraceMs: settings.exitGraceMs,
    rpc: registry,
    role: options.role ?? "workbench",
    log: options.log ?? createLogger(),
    onExit: options.onExit,
    jail,
  });
}

/** The interpreter {@linkcode resolvePython} found. */
export interface PythonInfo {
  /** The absolute path of the interpreter: `sys.executable` with its links resolved (kept as
   * it is in a virtual environment, whose `pyvenv.cfg` sits beside the link). */
  executable: string;
  /** Its version, e.g. `"3.11.7"`. */
  version: string;
  /** Where its standard library lives (`sys.base_prefix`): bound read-only when confined. */
  home: string;
}

/**
 * Finds the real interpreter behind `python` (a name on `PATH`, a shim, a link or a path) and
 * checks it is Python ≥ 3.11. Spawning the real executable keeps launcher shims from adding
 * their own variables to the worker's cleared environment, and keeps a link outside the folders
 * bubblewrap binds from hiding the interpreter inside the sandbox.
 *
 * @throws {KlbrError} `not_found` when `python` cannot be run; `invalid_config` when it is
 * older than 3.11 or does not answer as expected.
 * @example
 * ```ts
 * const { executable } = await resolvePython("python3");
 * ```
 */
export async function resolvePython(python: string): Promise<PythonInfo> {
  let output: Deno.CommandOutput;
  try {
    output = await new Deno.Command(python, {
      args: [
        "-c",
        // Outside a virtual environment the real file is run: a link in a folder bubblewrap
        // does not bind (/opt/x/bin/python3 -> /opt/pyenv/...) would not be found inside.
        "import os, sys; venv = sys.prefix != sys.base_prefix; " +
        "print(sys.executable if venv else os.path.realpath(sys.executable)); " +
        "print('%d.%d.%d' % sys.version_info[:3]); print(sys.base_prefix)",
      ],
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
  } catch (cause) {
    throw new KlbrError(
      "not_found",
      `cannot find python: it does not run (got ${JSON.stringify(python)})`,
      { cause },
    );
  }
  const [executable = "", version = "", home = ""] = new TextDecoder().decode(output.stdout)
    .trim().split("\n");
  if (!output.success || executable === "" || home === "" || !/^\d+\.\d+\.\d+$/.test(version)) {
    throw new KlbrError(
      "invalid_config",
      `cannot use python: it did not report its executable and version (got ${
        JSON.stringify(python)
      }, exit ${output.code})`,
    );
  }
  const [major, minor] = version.split(".").map(Number);
  if (major < 3 || (major === 3 && minor < 11)) {
    throw new KlbrError(
      "invalid_config",
      `cannot use python: the workbench needs Python 3.11 or newer (got ${version} at ${executable})`,
    );
  }
  return { executable, version, home };
}
