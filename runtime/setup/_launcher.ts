/**
 * `klbr serve`: derives the daemon's permission set from its configuration and starts
 * `main.ts daemon` under exactly that set, forwarding SIGINT and SIGTERM and returning its
 * exit code. The launcher itself only reads the configuration and starts Deno.
 *
 * @module
 */

import { join, resolve } from "node:path";
import { loadConfig, type Route, type ServeOptions } from "../config/mod.ts";
import { DEFAULT_HOST, DEFAULT_PORT } from "../core/mod.ts";
import { REPO_ROOT } from "./_repo_root.ts";
import { requireLoopbackHost } from "../lanes/mod.ts";
import {
  parseRunPrograms,
  servePermissionFlags,
  type ServePermissionInput,
} from "./_serve_permissions.ts";
import { probeSandbox, resolvePython, skillRoots } from "../kernel/mod.ts";
import { resolveConfigPath } from "./_state_dir.ts";

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
  const host = options.host ?? DEFAULT_HOST;
  requireLoopbackHost(host);
  const stateDir = resolve(options.stateDir);
  const configPath = await resolveConfigPath(stateDir, options.configPath);
  const { config } = await loadConfig(configPath, { env });
  const workspace = resolve(env.KLBR_WORKSPACE ?? Deno.cwd());
  const { executable, home } = await resolvePython(env.KLBR_PYTHON ?? "python3");
  const bwrap = env.KLBR_BWRAP ?? "bwrap";
  const sandbox = await probeSandbox({
    bwrap,
    python: executable,
    readOnly: [home],
    network: config.sandbox.network,
  });
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
    skillsRoot: skillRoots({ workspace, stateDir, skillsDir: env.KLBR_SKILLS_DIR }).builtinRoot,
    modelUrls: (Object.values(config.routes) as Route[]).map((route) => route.url),
    discordUrls: config.discord === undefined
      ? []
      : [config.discord.api_url, config.discord.gateway_url],
    envNames,
    python: { executable, home },
    bwrap,
    sandbox,
    deno: Deno.execPath(),
    runPrograms: parseRunPrograms(env.KLBR_RUN_PROGRAMS),
  };
}

/** The `deno run` arguments that start the daemon under its derived permissions. */
export function daemonArgs(
  input: ServePermissionInput,
  options: Pick<ServeOptions, "logFormat"> = {},
): string[] {
  return [
    "run",
    "--no-prompt",
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
    // The daemon may not run the interpreter by name (or read its home) to find it itself.
    "--python",
    input.python.executable,
    "--python-home",
    input.python.home,
  ];
}

/**
 * Starts the daemon under its derived permissions and waits for it; resolves with its exit
 * code (128 + the signal number when a signal ended it).
 *
 * @example
 * ```ts
 * Deno.exit(await launchDaemon({ stateDir: ".klbr" }));
 * ```
 */
export async function launchDaemon(options: ServeOptions): Promise<number> {
  const input = await derivePermissionInput(options);
  const child = new Deno.Command(Deno.execPath(), {
    args: daemonArgs(input, options),
    env: { KLBR_WORKSPACE: input.workspace },
    stdin: "inherit",
    stdout: "inherit",
    stderr: "inherit",
  }).spawn();
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
    const status = await child.status;
    return status.signal === null ? status.code : 128 + signalNumber(status.signal);
  } finally {
    Deno.removeSignalListener("SIGINT", onInt);
    Deno.removeSignalListener("SIGTERM", onTerm);
  }
}

function signalNumber(signal: Deno.Signal): number {
  return ({ SIGINT: 2, SIGKILL: 9, SIGTERM: 15 } as Record<string, number>)[signal] ?? 1;
}
