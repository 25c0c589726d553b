/**
 * `klbr serve`: derives the daemon's permission set from its configuration and starts
 * `main.ts daemon` under exactly that set, forwarding SIGINT and SIGTERM and returning its
 * exit code. The launcher itself only reads the configuration, finds the interpreter, probes
 * bubblewrap and starts Deno: Deno cannot narrow a running process's permissions to a derived
 * list, so the daemon is a second process started under it.
 *
 * @module
 */

import { join, resolve } from "node:path";
import { constants as osConstants } from "node:os";
import type { Route, ServeOptions } from "../config/mod.ts";
import { createLogger, DEFAULT_HOST, DEFAULT_PORT, type Logger } from "../core/mod.ts";
import { REPO_ROOT } from "./_repo_root.ts";
import {
  parseRunPrograms,
  servePermissionFlags,
  type ServePermissionInput,
} from "./_serve_permissions.ts";
import { type PythonInfo, resolvePython, skillRoots } from "../kernel/mod.ts";
import { probeSandbox } from "../sandbox/mod.ts";
import { loadStateConfig, resolveConfigPath } from "./_state_dir.ts";
import { encodeHandoff, type LauncherHandoff } from "./_handoff.ts";
import { later } from "./_later.ts";

/** What the permission set derives from before the interpreter is found and probed. */
type LaunchBase = Omit<ServePermissionInput, "python" | "sandbox"> & {
  /** Whether the configuration lets confined children use the network. */
  network: boolean;
};

/** What finding the interpreter and probing bubblewrap give. */
type HostFindings = Pick<ServePermissionInput, "python" | "sandbox">;

/**
 * Collects what the daemon's permissions derive from: the configuration's model and Discord
 * hosts and key variables, the state directory, workspace, skills root, the real Python
 * interpreter, whether bubblewrap can confine children here, and `KLBR_RUN_PROGRAMS`.
 *
 * @throws {KlbrError} `not_loopback` for a non-loopback host; `invalid_config` for a bad
 * configuration file or a Python older than 3.11; `not_found` when Python does not run.
 */
export async function derivePermissionInput(
  options: ServeOptions,
  env: Record<string, string | undefined> = Deno.env.toObject(),
): Promise<ServePermissionInput> {
  const base = await deriveBase(options, env);
  const { network: _, ...input } = base;
  return { ...input, ...await findOnHost(base, findPython(env)) };
}

/**
 * Everything but the interpreter and the probe: what the configuration and the environment
 * say. It runs no program.
 *
 * @throws {KlbrError} `not_loopback` for a host that is not loopback (it would not even make a
 * valid `--allow-net`); `invalid_config` for a bad configuration file.
 */
async function deriveBase(
  options: ServeOptions,
  env: Record<string, string | undefined>,
): Promise<LaunchBase> {
  const host = options.host ?? DEFAULT_HOST;
  const stateDir = resolve(options.stateDir);
  // The configuration is read while the lanes (Hono among them) load; the host is refused
  // first all the same. The default host is loopback: then the lanes need not load at all.
  const reading = resolveConfigPath(stateDir, options.configPath).then(async (configPath) => ({
    configPath,
    config: (await loadStateConfig(configPath, { env })).config,
  }));
  reading.catch(() => {}); // awaited below
  if (options.host !== undefined) {
    const { requireLoopbackHost } = await later("../lanes/mod.ts");
    requireLoopbackHost(host);
  }
  const { configPath, config } = await reading;
  const workspace = resolve(env.KLBR_WORKSPACE ?? Deno.cwd());
  const envNames = [
    ...(Object.values(config.routes) as Route[]).map((route) => route.api_key_env),
    config.discord?.token_env,
  ].filter((name): name is string => name !== undefined);
  return {
    stateDir,
    configPath,
    host,
    port: options.port ?? DEFAULT_PORT,
    repoRoot: REPO_ROOT,
    workspace,
    skillsRoot:
      skillRoots({ repoRoot: REPO_ROOT, stateDir, skillsDir: env.KLBR_SKILLS_DIR }).builtinRoot,
    modelUrls: (Object.values(config.routes) as Route[]).map((route) => route.url),
    discordUrls: config.discord === undefined
      ? []
      : [config.discord.api_url, config.discord.gateway_url],
    envNames,
    bwrap: env.KLBR_BWRAP ?? "bwrap",
    deno: Deno.execPath(),
    runPrograms: parseRunPrograms(env.KLBR_RUN_PROGRAMS),
    backupDir: config.backup.dir,
    network: config.sandbox.network,
  };
}

/**
 * Finds the real interpreter behind `KLBR_PYTHON` (default `python3`, often a shim) and runs
 * it once inside bubblewrap with the daemon's own arguments.
 *
 * @throws {KlbrError} `not_found` when Python does not run; `invalid_config` when it is older
 * than 3.11.
 */
async function findOnHost(
  base: Pick<LaunchBase, "bwrap" | "network">,
  python: Promise<PythonInfo>,
): Promise<HostFindings> {
  const { executable, home } = await python;
  const sandbox = await probeSandbox({
    bwrap: base.bwrap,
    python: executable,
    readOnly: [home],
    network: base.network,
  });
  return { python: { executable, home }, sandbox };
}

/** Runs `KLBR_PYTHON` (default `python3`, often a shim) to find the real interpreter. */
function findPython(env: Record<string, string | undefined>): Promise<PythonInfo> {
  return resolvePython(env.KLBR_PYTHON ?? "python3");
}

/** The `deno run` arguments that start the daemon under its derived permissions. */
export function daemonArgs(
  input: ServePermissionInput,
  options: Pick<ServeOptions, "logFormat"> = {},
): string[] {
  return [
    ...commonArgs(input, options),
    // The daemon may not run the interpreter by name (or read its home) to find it itself.
    "--python",
    input.python.executable,
    "--python-home",
    input.python.home,
  ];
}

function commonArgs(
  input: ServePermissionInput,
  options: Pick<ServeOptions, "logFormat">,
): string[] {
  return [
    "run",
    "--no-prompt",
    // V8's heap kept small without slowing its code: a 1 MB young generation and an old one
    // that grows by 10% over what survives a full collection. Under a client that writes 20,000
    // inputs without reading, the daemon peaks at 130–136 MB (figure 1k of `deno task bench`,
    // goal < 150 MB) where V8's defaults reach 200–225 MB; `--optimize-for-size` held it as
    // low but admitted a fifth to a third fewer inputs a second (1a, 1b) and replayed slower
    // (4a), since it also trades the compiled code's speed (`docs/performance.md`, "The
    // daemon's V8 flags").
    "--v8-flags=--max-semi-space-size=1,--heap-growing-percent=10",
    // The launcher's own start (`nodeModulesDir: "auto"`) has just brought node_modules in line
    // with deno.lock; the daemon uses it as it is, which spares it checking each npm package
    // again (about 0.1 s of its start here).
    "--node-modules-dir=manual",
    ...servePermissionFlags(input),
    join(REPO_ROOT, "main.ts"),
    "daemon",
    "--state",
    input.stateDir,
    "--host",
    input.host,
    "--port",
    String(input.port),
    ...(input.configPath === undefined ? [] : ["--config", input.configPath]),
    ...(options.logFormat === undefined ? [] : ["--log-format", options.logFormat]),
  ];
}

/**
 * Starts the daemon under its derived permissions and waits for it; resolves with its exit
 * code (128 + the signal number when a signal ended it).
 *
 * The daemon starts as soon as the configuration is read, under the set for confined
 * children, and loads its modules while this process finds the interpreter and probes
 * bubblewrap; it waits for their outcome on its stdin (`_handoff.ts`) before it touches the
 * state. Where the probe finds that children cannot be confined, that daemon is killed before
 * it did anything and another starts under the unconfined set.
 *
 * @throws {KlbrError} as {@linkcode derivePermissionInput}.
 * @example
 * ```ts
 * Deno.exit(await launchDaemon({ stateDir: ".klbr" }));
 * ```
 */
export async function launchDaemon(options: ServeOptions): Promise<number> {
  const env = Deno.env.toObject();
  // The shim needs nothing from the configuration: it starts first, and runs on meanwhile.
  const python = findPython(env);
  python.catch(() => {}); // awaited through findOnHost
  const derived = await deriveBase(options, env);
  const findings = findOnHost(derived, python);
  findings.catch(() => {}); // awaited below; the daemon starts meanwhile
  const { network, ...base } = derived;
  const confined: ServePermissionInput = {
    ...base,
    // A confined set never names the interpreter: every child is started through bwrap.
    python: { executable: "", home: "" },
    sandbox: { mode: "bwrap", reason: null, network, userns: true, usernsReason: null },
  };
  let child = spawnDaemon(confined, options);
  const forward = (signal: Deno.Signal) => () => {
    try {
      child.kill(signal);
    } catch { /* already gone */ }
  };
  const onInt = forward("SIGINT");
  const onTerm = forward("SIGTERM");
  Deno.addSignalListener("SIGINT", onInt);
  Deno.addSignalListener("SIGTERM", onTerm);
  try {
    const found = await findings.catch(async (error) => {
      await stopChild(child);
      throw error;
    });
    const early = await exited(child);
    if (early !== undefined) return early;
    if (found.sandbox.mode !== "bwrap") {
      await stopChild(child);
      child = spawnDaemon({ ...base, ...found }, options);
    }
    await handOver(child, { python: found.python, sandbox: found.sandbox });
    const status = await child.status;
    reportExit(status, createLogger({ format: options.logFormat }));
    return exitCode(status);
  } finally {
    Deno.removeSignalListener("SIGINT", onInt);
    Deno.removeSignalListener("SIGTERM", onTerm);
  }
}

function spawnDaemon(input: ServePermissionInput, options: ServeOptions): Deno.ChildProcess {
  return new Deno.Command(Deno.execPath(), {
    args: [...commonArgs(input, options), "--handoff"],
    env: { KLBR_WORKSPACE: input.workspace },
    stdin: "piped",
    stdout: "inherit",
    stderr: "inherit",
  }).spawn();
}

/** Writes the hand-over and closes the daemon's stdin; a daemon that already exited is fine. */
async function handOver(child: Deno.ChildProcess, handoff: LauncherHandoff): Promise<void> {
  const writer = child.stdin.getWriter();
  try {
    await writer.write(encodeHandoff(handoff));
    await writer.close();
  } catch { /* the daemon exited; its status says why */ }
}

/** Kills a daemon that has not been handed over yet (it touched nothing) and reaps it. */
async function stopChild(child: Deno.ChildProcess): Promise<void> {
  try {
    child.kill("SIGKILL");
  } catch { /* already gone */ }
  await child.status;
}

/** The child's exit code when it has already exited (a refused port), else undefined. */
async function exited(child: Deno.ChildProcess): Promise<number | undefined> {
  const now = Symbol("running");
  const status = await Promise.race([child.status, Promise.resolve(now)]);
  return status === now ? undefined : exitCode(status as Deno.CommandStatus);
}

/**
 * Logs a daemon that ended other than by a drain (0) or a refusal that said why in one line
 * (2): `daemon.exited`. serve does not start it again; it exits with the daemon's code, so a
 * service manager restarts it (the unit `klbr service install` writes has Restart=on-failure)
 * and a person at a terminal sees it stop.
 */
function reportExit(status: Deno.CommandStatus, log: Logger): void {
  const code = exitCode(status);
  if (code === 0 || code === 2) return;
  const how = status.signal === "SIGKILL"
    ? " (killed by SIGKILL: the kernel's out-of-memory killer or kill -9; journalctl -k says which)"
    : status.signal !== null
    ? ` (ended by ${status.signal})`
    : code === 1
    ? " (its reason is above)"
    : "";
  log.error(
    "daemon.exited",
    `the daemon exited with code ${code}${how}; serve exits with it: as a service it is started again (Restart=on-failure), by hand start it again with deno task serve`,
    { code, signal: status.signal ?? undefined },
  );
}

function exitCode(status: Deno.CommandStatus): number {
  return status.signal === null ? status.code : 128 + signalNumber(status.signal);
}

/** The signal's number on this platform, as a shell reports `128 + n` (1 for one it lacks). */
function signalNumber(signal: Deno.Signal): number {
  return (osConstants.signals as Record<string, number>)[signal] ?? 1;
}
