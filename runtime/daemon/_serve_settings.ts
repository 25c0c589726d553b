/**
 * Everything the daemon reads before it writes anything: the listen address, the
 * configuration with its keys, the cell timeout, the workspace and the interpreter. A bad
 * value stops here, before the state directory is touched or anything listens.
 *
 * @module
 */

import { join } from "node:path";
import {
  type Config,
  resolveApiKey,
  resolveDiscordToken,
  type Route,
  type Secret,
  type ServeOptions,
} from "../config/mod.ts";
import {
  DEFAULT_CELL_TIMEOUT_MS,
  DEFAULT_DRAIN_GRACE_MS,
  DEFAULT_HOST,
  DEFAULT_INPUT_EXPIRE_MS,
  DEFAULT_INPUT_WAIT_WARN_MS,
  DEFAULT_MODEL_STALL_MS,
  DEFAULT_PORT,
  DEFAULT_RETRY_BASE_MS,
  KlbrError,
  LONGEST_TIMER_MS,
} from "../core/mod.ts";
import type { SandboxStatus } from "../sandbox/mod.ts";
import { DEFAULT_HOOK_SLOW_MS } from "./_health.ts";
import { requireLoopbackHost } from "../lanes/mod.ts";
import {
  CONFIG_FILE,
  daemonEnv,
  loadStateConfig,
  parseRunPrograms,
  resolveConfigPath,
} from "../setup/mod.ts";

/** The daemon's settings, validated. */
export interface ServeSettings {
  stateDir: string;
  host: string;
  port: number;
  config: Config;
  /** The configuration file: the one read, or the one this start writes (`configWritten`). */
  configPath: string;
  /** True when there was no file: the start writes the defaults it read to `configPath`. */
  configWritten: boolean;
  /** Configuration warnings to log once a logger exists. */
  warnings: string[];
  /** Each route's API key, by route name. */
  apiKeys: Map<string, string | undefined>;
  /** The Discord bot token, when Discord is configured and its variable is set. */
  discordToken: Secret | undefined;
  cellTimeoutMs: number;
  /** How often a scheduled maintenance turn runs (`KLBR_MAINTENANCE_INTERVAL_S`); null: never. */
  maintenanceIntervalMs: number | null;
  /** `KLBR_DRAIN_GRACE_MS`: how long a drain lets accepted turns finish. */
  drainGraceMs: number;
  /** `KLBR_INPUT_EXPIRE_MS`: how long an input may stay pending before it expires. */
  inputExpireMs: number;
  /** `KLBR_INPUT_WAIT_WARN_MS`: how long an input may wait before status and /health say so. */
  inputWaitWarnMs: number;
  /** `KLBR_MODEL_STALL_MS`: how long a reply may go silent after its first data before /health says stalled. */
  modelStallMs: number;
  /** `KLBR_HOOK_SLOW_MS`: how long a hook call may run before /health reports it slow. */
  hookSlowMs?: number;
  /** `KLBR_RETRY_BASE_MS`: the first retry's delay after a failed plan or model request. */
  retryBaseMs: number;
  workspace: string;
  /** The interpreter's name (`KLBR_PYTHON`), looked up when `pythonInfo` is not given. */
  python: string;
  /** The real interpreter and its home, as the launcher found them. */
  pythonInfo: { executable: string; home: string } | undefined;
  /** The bubblewrap executable (`KLBR_BWRAP`). */
  bwrap: string;
  /** What the launcher's probe of bubblewrap found; undefined: the daemon probes itself. */
  sandbox: SandboxStatus | undefined;
  /** The programs `workspace.run` may start (`KLBR_RUN_PROGRAMS`); undefined means any. */
  runPrograms: string[] | undefined;
  /** `KLBR_SKILLS_DIR`, when set. */
  skillsDir: string | undefined;
}

/**
 * Reads and validates the daemon's settings from its options and environment.
 *
 * @throws {KlbrError} `not_loopback` for a non-loopback host, `invalid_config` for a bad port,
 * configuration, `KLBR_CELL_TIMEOUT_MS`, `KLBR_MAINTENANCE_INTERVAL_S` or another duration
 * variable.
 */
export async function readServeSettings(
  options: ServeOptions,
  // Only the variables --allow-env names can be read; the rest read as unset.
  env: Record<string, string | undefined> = daemonEnv(),
): Promise<ServeSettings> {
  const host = options.host ?? DEFAULT_HOST;
  const port = options.port ?? DEFAULT_PORT;
  requireLoopbackHost(host);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new KlbrError(
      "invalid_config",
      `cannot serve: port must be 0-65535 (got ${options.port})`,
    );
  }
  const found = await resolveConfigPath(options.stateDir, options.configPath);
  const { config, warnings } = await loadStateConfig(found, { env });
  const apiKeys = new Map<string, string | undefined>();
  for (const route of Object.values(config.routes) as Route[]) {
    apiKeys.set(route.name, resolveApiKey(route, env));
  }
  return {
    stateDir: options.stateDir,
    host,
    port,
    config,
    // None yet: the start writes the defaults it just read into the state directory.
    configPath: found ?? join(options.stateDir, CONFIG_FILE),
    configWritten: found === undefined,
    warnings,
    apiKeys,
    discordToken: config.discord === undefined
      ? undefined
      : resolveDiscordToken(config.discord, env),
    cellTimeoutMs: parseCellTimeout(env.KLBR_CELL_TIMEOUT_MS),
    maintenanceIntervalMs: parseMaintenanceInterval(env.KLBR_MAINTENANCE_INTERVAL_S),
    // One host timer stops the turn at the grace's end: a longer one would fire at once.
    drainGraceMs: parseMs("KLBR_DRAIN_GRACE_MS", env, {
      fallback: DEFAULT_DRAIN_GRACE_MS,
      min: 100,
      max: LONGEST_TIMER_MS,
    }),
    inputExpireMs: parseMs("KLBR_INPUT_EXPIRE_MS", env, {
      fallback: DEFAULT_INPUT_EXPIRE_MS,
      min: 1_000,
    }),
    inputWaitWarnMs: parseMs("KLBR_INPUT_WAIT_WARN_MS", env, {
      fallback: DEFAULT_INPUT_WAIT_WARN_MS,
      min: 100,
    }),
    modelStallMs: parseMs("KLBR_MODEL_STALL_MS", env, {
      fallback: DEFAULT_MODEL_STALL_MS,
      min: 100,
    }),
    hookSlowMs: parseMs("KLBR_HOOK_SLOW_MS", env, { fallback: DEFAULT_HOOK_SLOW_MS, min: 10 }),
    retryBaseMs: parseMs("KLBR_RETRY_BASE_MS", env, { fallback: DEFAULT_RETRY_BASE_MS, min: 10 }),
    workspace: env.KLBR_WORKSPACE ?? Deno.cwd(),
    python: env.KLBR_PYTHON ?? "python3",
    pythonInfo: options.python,
    bwrap: env.KLBR_BWRAP ?? "bwrap",
    sandbox: undefined,
    runPrograms: parseRunPrograms(env.KLBR_RUN_PROGRAMS),
    skillsDir: env.KLBR_SKILLS_DIR,
  };
}

/**
 * Reads `KLBR_CELL_TIMEOUT_MS`: how long one cell may run (default 10 minutes).
 *
 * @throws {KlbrError} `invalid_config` for anything but a whole number of 1,000–86,400,000 ms.
 */
export function parseCellTimeout(value: string | undefined): number {
  if (value === undefined || value === "") return DEFAULT_CELL_TIMEOUT_MS;
  const ms = Number(value);
  if (!Number.isInteger(ms) || ms < 1_000 || ms > 86_400_000) {
    throw new KlbrError(
      "invalid_config",
      `cannot serve: KLBR_CELL_TIMEOUT_MS must be a whole number of milliseconds from 1000 to 86400000 (got ${value})`,
    );
  }
  return ms;
}

/**
 * Reads `KLBR_MAINTENANCE_INTERVAL_S`: how many seconds apart scheduled maintenance turns are
 * (each loads the `maintenance` skill); unset, empty or `0` schedules none.
 *
 * @throws {KlbrError} `invalid_config` for anything but a whole number of 0–2,592,000 s (30 days).
 * @example
 * ```ts
 * parseMaintenanceInterval("86400"); // 86_400_000: one maintenance turn a day
 * ```
 */
export function parseMaintenanceInterval(value: string | undefined): number | null {
  if (value === undefined || value === "" || value === "0") return null;
  const s = Number(value);
  if (!Number.isInteger(s) || s < 1 || s > 2_592_000) {
    throw new KlbrError(
      "invalid_config",
      `cannot serve: KLBR_MAINTENANCE_INTERVAL_S must be a whole number of seconds from 0 (none) to 2592000 (got ${value})`,
    );
  }
  return s * 1000;
}

/** Reads a duration variable in ms: a whole number from `min` to `max` (30 days), or its default. */
function parseMs(
  name: string,
  env: Record<string, string | undefined>,
  bounds: { fallback: number; min: number; max?: number },
): number {
  const { fallback, min, max = 2_592_000_000 } = bounds;
  const value = env[name];
  if (value === undefined || value === "") return fallback;
  const ms = Number(value);
  if (!Number.isInteger(ms) || ms < min || ms > max) {
    throw new KlbrError(
      "invalid_config",
      `cannot serve: ${name} must be a whole number of milliseconds from ${min} to ${max} (got ${value})`,
    );
  }
  return ms;
}
