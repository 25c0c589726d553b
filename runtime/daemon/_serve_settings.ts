/**
 * Everything the daemon reads before it writes anything: the listen address, the
 * configuration with its keys, the cell timeout, the workspace and the interpreter. A bad
 * value stops here, before the state directory is touched or anything listens.
 *
 * @module
 */

import {
  type Config,
  loadConfig,
  resolveApiKey,
  resolveDiscordToken,
  type Route,
  type Secret,
  type ServeOptions,
} from "../config/mod.ts";
import { DEFAULT_CELL_TIMEOUT_MS, DEFAULT_HOST, DEFAULT_PORT, KlbrError } from "../core/mod.ts";
import { requireLoopbackHost } from "../lanes/mod.ts";
import { resolveConfigPath } from "../setup/mod.ts";

/** The daemon's settings, validated. */
export interface ServeSettings {
  stateDir: string;
  host: string;
  port: number;
  config: Config;
  /** Configuration warnings to log once a logger exists. */
  warnings: string[];
  /** Each route's API key, by route name. */
  apiKeys: Map<string, string | undefined>;
  /** The Discord bot token, when Discord is configured and its variable is set. */
  discordToken: Secret | undefined;
  cellTimeoutMs: number;
  workspace: string;
  python: string;
  /** `KLBR_SKILLS_DIR`, when set. */
  skillsDir: string | undefined;
}

/**
 * Reads and validates the daemon's settings from its options and environment.
 *
 * @throws {KlbrError} `not_loopback` for a non-loopback host, `invalid_config` for a bad port,
 * configuration or `KLBR_CELL_TIMEOUT_MS`.
 */
export async function readServeSettings(
  options: ServeOptions,
  env: Record<string, string | undefined> = Deno.env.toObject(),
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
  const configPath = await resolveConfigPath(options.stateDir, options.configPath);
  const { config, warnings } = await loadConfig(configPath, { env });
  const apiKeys = new Map<string, string | undefined>();
  for (const route of Object.values(config.routes) as Route[]) {
    apiKeys.set(route.name, resolveApiKey(route, env));
  }
  return {
    stateDir: options.stateDir,
    host,
    port,
    config,
    warnings,
    apiKeys,
    discordToken: config.discord === undefined
      ? undefined
      : resolveDiscordToken(config.discord, env),
    cellTimeoutMs: parseCellTimeout(env.KLBR_CELL_TIMEOUT_MS),
    workspace: env.KLBR_WORKSPACE ?? Deno.cwd(),
    python: env.KLBR_PYTHON ?? "python3",
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
