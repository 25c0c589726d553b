/**
 * `klbr service install | uninstall [--system]`: writes (or removes) the systemd unit that runs
 * `serve` for one state directory, and says what it wrote and how to enable it. Nothing here
 * runs `systemctl`: enabling a service is the owner's step.
 *
 * @module
 */

import { basename, dirname, isAbsolute, join, resolve } from "node:path";
import { replaceFile } from "../../store/tables/files.ts";
import type { Route } from "../config/mod.ts";
import { DEFAULT_DRAIN_GRACE_MS, KlbrError } from "../core/mod.ts";
import { loadStateConfig, REPO_ROOT, resolveConfigPath, shellWord } from "../setup/mod.ts";
import { prepareEnvironmentFile } from "./_environment_file.ts";
import { renderUnit, type UnitFacts } from "./_unit.ts";

/** The unit's file name. */
const UNIT_NAME = "klbr.service";

/** The variables a service passes on when they are set at install (beside the workspace). */
const PASSED_ON = [
  "KLBR_SKILLS_DIR",
  "KLBR_PYTHON",
  "KLBR_BWRAP",
  "KLBR_RUN_PROGRAMS",
  "KLBR_CELL_TIMEOUT_MS",
  "KLBR_MAINTENANCE_INTERVAL_S",
  "KLBR_DRAIN_GRACE_MS",
  "KLBR_INPUT_EXPIRE_MS",
  "KLBR_INPUT_WAIT_WARN_MS",
  "KLBR_MODEL_STALL_MS",
  "KLBR_HOOK_SLOW_MS",
  "KLBR_RETRY_BASE_MS",
] as const;

/** What `serve`'s drain may take beyond its grace: closing connections (5 s) and a margin. */
const STOP_MARGIN_S = 20;

/** Options for {@linkcode installService} and {@linkcode uninstallService}. */
export interface ServiceOptions {
  stateDir: string;
  /** `--config`, else `KLBR_CONFIG`, else the state directory's `config.kdl` at each start. */
  configPath?: string;
  /** A system unit in `/etc/systemd/system` instead of the user's. */
  system: boolean;
  /** `serve` options to pass on. */
  host?: string;
  port?: number;
  logFormat?: string;
  /** The environment at install: `XDG_CONFIG_HOME`, `HOME`, `PATH`, `KLBR_*`. */
  env: Record<string, string | undefined>;
  cwd: string;
  /** @default {Deno.execPath()} */
  deno?: string;
  /** @default {new Date()} */
  now?: Date;
}

/**
 * Where the unit goes: `$XDG_CONFIG_HOME/systemd/user` (default `~/.config`) for a user unit,
 * `/etc/systemd/system` for a system unit.
 *
 * @throws {KlbrError} `usage` when neither `XDG_CONFIG_HOME` nor `HOME` names an absolute path.
 */
function unitDirectory(system: boolean, env: Record<string, string | undefined>): string {
  if (system) return "/etc/systemd/system";
  const config = env.XDG_CONFIG_HOME && isAbsolute(env.XDG_CONFIG_HOME)
    ? env.XDG_CONFIG_HOME
    : env.HOME && isAbsolute(env.HOME)
    ? join(env.HOME, ".config")
    : undefined;
  if (config === undefined) {
    throw new KlbrError(
      "usage",
      `cannot place a user unit: set HOME or XDG_CONFIG_HOME to an absolute path, or pass --system (got HOME=${
        env.HOME ?? "unset"
      })`,
    );
  }
  return join(config, "systemd", "user");
}

/** The `serve` task's `deno run` arguments, from deno.json, with `main.ts` made absolute. */
async function serveTaskArgs(): Promise<string[]> {
  const config = JSON.parse(await Deno.readTextFile(join(REPO_ROOT, "deno.json")));
  const [deno, ...args] = (config.tasks.serve as string).trim().split(/\s+/);
  if (deno !== "deno") throw new KlbrError("internal", `cannot read the serve task (got ${deno})`);
  return args.map((arg) => arg === "main.ts" ? join(REPO_ROOT, "main.ts") : arg);
}

/**
 * Works out the unit: the command, the environment, the stop timeout and, for a system unit,
 * the account it runs as; with the key variables the configuration names and the arguments
 * that point `doctor` at the unit's state directory and configuration.
 *
 * @throws {KlbrError} `invalid_config` for a configuration that does not load.
 */
export async function unitFacts(
  options: ServiceOptions,
): Promise<{ facts: UnitFacts; keyNames: string[]; doctorArgs: string[] }> {
  const { env } = options;
  const stateDir = resolve(options.cwd, options.stateDir);
  const flagged = options.configPath ?? env.KLBR_CONFIG;
  const configPath = flagged === undefined ? undefined : resolve(options.cwd, flagged);
  // The keys it will need are named now, so the owner knows what the environment file holds.
  const everySet = new Proxy({}, { get: () => "set" }) as Record<string, string>;
  const { config } = await loadStateConfig(
    configPath ?? await resolveConfigPath(stateDir, undefined),
    { env: everySet },
  );
  const keyNames = [
    ...new Set([
      ...(Object.values(config.routes) as Route[]).map((route) => route.api_key_env),
      config.discord?.token_env,
    ]),
  ].filter((name): name is string => name !== undefined);
  const command = [
    options.deno ?? Deno.execPath(),
    ...await serveTaskArgs(),
    "--state",
    stateDir,
    ...(configPath === undefined ? [] : ["--config", configPath]),
    ...(options.host === undefined ? [] : ["--host", options.host]),
    ...(options.port === undefined ? [] : ["--port", String(options.port)]),
    ...(options.logFormat === undefined ? [] : ["--log-format", options.logFormat]),
  ];
  const environment: [string, string][] = [
    ["KLBR_WORKSPACE", resolve(options.cwd, env.KLBR_WORKSPACE ?? options.cwd)],
    ...PASSED_ON.filter((name) => env[name] !== undefined).map(
      (name): [string, string] => [name, env[name]!],
    ),
    // Python and the programs workspace.run starts are found as from the installing shell.
    ...(env.PATH === undefined ? [] : [["PATH", servicePath(env.PATH)] as [string, string]]),
  ];
  const grace = Number(env.KLBR_DRAIN_GRACE_MS ?? DEFAULT_DRAIN_GRACE_MS);
  const graceS = Math.ceil((Number.isFinite(grace) ? grace : DEFAULT_DRAIN_GRACE_MS) / 1000);
  // `$XDG_CONFIG_HOME/klbr` beside `$XDG_CONFIG_HOME/systemd/user`, or `/etc/klbr`.
  const envDir = options.system
    ? "/etc/klbr"
    : join(dirname(dirname(unitDirectory(false, env))), "klbr");
  const facts: UnitFacts = {
    system: options.system,
    user: options.system ? env.SUDO_USER ?? env.USER ?? "root" : undefined,
    stateDir,
    repoRoot: REPO_ROOT,
    command,
    environment,
    environmentFile: join(envDir, `${basename(UNIT_NAME, ".service")}.env`),
    stopTimeoutS: graceS + STOP_MARGIN_S,
    writtenAt: (options.now ?? new Date()).toISOString(),
  };
  // Doctor checks the upgrade against the unit's own state and configuration, not ./.klbr.
  const doctorArgs = [
    "--state",
    stateDir,
    ...(configPath === undefined ? [] : ["--config", configPath]),
  ];
  return { facts, keyNames, doctorArgs };
}

/** The installing shell's PATH without what `deno task` put first (`node_modules/.bin`). */
function servicePath(path: string): string {
  return path.split(":").filter((dir) => dir !== "" && !dir.endsWith("/node_modules/.bin"))
    .join(":");
}

/** What {@linkcode installService} did. */
export interface InstallReport {
  path: string;
  text: string;
  /** Whether a unit was there before (and was replaced). */
  replaced: boolean;
  /** The lines that tell the owner what to do next. */
  next: string[];
}

/**
 * Writes the unit (temp file, fsync, rename) and returns it with the commands that enable it.
 *
 * On return the unit file is complete at `path`, or was not touched; the environment file
 * exists (created mode 600 when it was missing; an existing one is kept as it is, and named in
 * `next` when group or others can read it).
 *
 * @throws {KlbrError} `usage` when the unit directory or the environment file cannot be
 *   written (say `sudo`, or leave out `--system`), or for a user unit under sudo (root's, not the caller's);
 *   `invalid_config` for a configuration that does not load.
 */
export async function installService(options: ServiceOptions): Promise<InstallReport> {
  const { env } = options;
  if (!options.system && env.USER === "root" && env.SUDO_USER && env.SUDO_USER !== "root") {
    const owner = env.SUDO_USER;
    throw new KlbrError(
      "usage",
      `cannot install the service: a user unit under sudo would be root's, not ${owner}'s (got USER=root, SUDO_USER=${owner}); run it without sudo for ${owner}'s user unit, or add --system for a system unit that runs as ${owner}`,
    );
  }
  const { facts, keyNames, doctorArgs } = await unitFacts(options);
  const text = renderUnit(facts);
  const dir = unitDirectory(options.system, options.env);
  const path = join(dir, UNIT_NAME);
  const replaced = await Deno.stat(path).then(() => true, () => false);
  try {
    await Deno.mkdir(dir, { recursive: true });
    await replaceFile(path, text, { mode: 0o644 });
  } catch (cause) {
    if (cause instanceof Deno.errors.PermissionDenied) {
      throw new KlbrError(
        "usage",
        `cannot install the service: ${dir} is not writable; ${
          options.system
            ? "run it with sudo, or leave out --system for a user unit"
            : "check its owner"
        } (got ${cause.message})`,
        { cause },
      );
    }
    throw cause;
  }
  // Made private here: one made by hand under umask 022 is world-readable.
  const envNote = await prepareEnvironmentFile(facts.environmentFile, keyNames);
  const noBus = options.system ? undefined : await missingUserManager(env);
  const next = nextSteps(options, facts, { keyNames, doctorArgs, noBus });
  return { path, text, replaced, next: envNote === undefined ? next : [...next, envNote] };
}

/**
 * Why `systemctl --user` has no manager to talk to here (no XDG_RUNTIME_DIR, as over `su`,
 * `sudo -u` or in a container; or no manager's socket in it), or undefined when it has one.
 */
async function missingUserManager(
  env: Record<string, string | undefined>,
): Promise<string | undefined> {
  const runtime = env.XDG_RUNTIME_DIR;
  if (!runtime) return "XDG_RUNTIME_DIR is unset";
  for (const socket of ["systemd/private", "bus"]) {
    if (await Deno.stat(join(runtime, socket)).then(() => true, () => false)) return undefined;
  }
  return `no systemd/private or bus socket in ${runtime}`;
}

function nextSteps(
  options: Pick<ServiceOptions, "system" | "env">,
  facts: UnitFacts,
  more: { keyNames: string[]; doctorArgs: string[]; noBus?: string },
): string[] {
  const { keyNames, doctorArgs, noBus } = more;
  const { system } = options;
  const ctl = system ? "sudo systemctl" : "systemctl --user";
  const user = options.env.USER ?? "$USER";
  const steps = [
    // The first step would fail with "Failed to connect to bus"; say why and what to do first.
    ...(noBus === undefined ? [] : [
      `note: \`systemctl --user\` will fail here with "Failed to connect to bus": there is no user session (${noBus}); run \`sudo loginctl enable-linger ${user}\` and log in again as ${user} (ssh, not su or sudo), or install a system unit instead: sudo deno task klbr service install --system …`,
    ]),
    "enable and start it:",
    `  ${ctl} daemon-reload`,
    `  ${ctl} enable --now ${UNIT_NAME}`,
    ...(system ? [] : [
      `  loginctl enable-linger ${user}    # keeps it running while you are logged out`,
    ]),
    `logs: journalctl ${system ? "" : "--user "}-u ${UNIT_NAME} -f`,
    `upgrade: ${ctl} stop ${UNIT_NAME}; git pull; deno task doctor ${
      doctorArgs.map(shellWord).join(" ")
    }; ${ctl} start ${UNIT_NAME}`,
  ];
  if (keyNames.length > 0) {
    steps.push(
      `keys: the configuration reads ${keyNames.join(", ")} from the environment; put ${
        keyNames.map((name) => `${name}=…`).join(" and ")
      } in ${facts.environmentFile} (one per line, chmod 600), not in the unit`,
    );
  }
  if (/\/_npx\/|\/\.npm\//.test(facts.command[0])) {
    steps.push(
      `note: Deno runs from npm's cache (${
        facts.command[0]
      }), which npm may clean; install Deno (e.g. npm install -g deno@2.9.6) and install the service again`,
    );
  }
  return steps;
}

/** What {@linkcode uninstallService} did. */
export interface UninstallReport {
  path: string;
  /** Whether there was a unit to remove. */
  removed: boolean;
  next: string[];
}

/**
 * Removes the unit, and the link `systemctl enable` made for it; a missing unit is not an
 * error.
 *
 * @throws {KlbrError} `usage` when the unit directory cannot be written.
 */
export async function uninstallService(
  options: Pick<ServiceOptions, "system" | "env">,
): Promise<UninstallReport> {
  const dir = unitDirectory(options.system, options.env);
  const path = join(dir, UNIT_NAME);
  const wanted = join(dir, `${options.system ? "multi-user" : "default"}.target.wants`, UNIT_NAME);
  let removed = true;
  try {
    await Deno.remove(path);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) removed = false;
    else if (error instanceof Deno.errors.PermissionDenied) {
      throw new KlbrError(
        "usage",
        `cannot uninstall the service: ${dir} is not writable; run it with sudo (got ${error.message})`,
      );
    } else throw error;
  }
  await Deno.remove(wanted).catch(() => {});
  const ctl = options.system ? "sudo systemctl" : "systemctl --user";
  return {
    path,
    removed,
    next: removed
      ? [`if it still runs: ${ctl} stop ${UNIT_NAME}`, `then: ${ctl} daemon-reload`]
      : [],
  };
}
