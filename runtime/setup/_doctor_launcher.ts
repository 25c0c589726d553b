/**
 * `klbr doctor`: reads the configuration, then runs doctor's checks (`main.ts doctor-checks`)
 * in a Deno whose network is derived from it — loopback, each model route's host, Discord's
 * when configured — so a remote route is probed rather than refused by the permission
 * sandbox, and nothing else is reachable.
 *
 * @module
 */

import { join, resolve } from "node:path";
import type { Route } from "../config/mod.ts";
import { REPO_ROOT } from "./_repo_root.ts";
import { doctorNetHosts } from "./_serve_permissions.ts";
import { EVERY_VARIABLE_SET, loadStateConfig, resolveConfigPath } from "./_state_dir.ts";

/** Options for {@linkcode launchDoctor}. */
export interface LaunchDoctorOptions {
  stateDir: string;
  configPath?: string;
  port?: number;
  probeDiscord: boolean;
}

/**
 * The `--allow-net` list doctor's checks run with: from the configuration, or loopback alone
 * when it cannot be read (the checks then report why).
 */
export async function doctorNetwork(options: LaunchDoctorOptions): Promise<string[]> {
  try {
    const path = await resolveConfigPath(resolve(options.stateDir), options.configPath);
    const { config } = await loadStateConfig(path, { env: EVERY_VARIABLE_SET });
    const urls = (Object.values(config.routes) as Route[]).map((route) => route.url);
    const discord = config.discord === undefined
      ? []
      : [config.discord.api_url, config.discord.gateway_url];
    return doctorNetHosts(urls, discord);
  } catch {
    return doctorNetHosts([], []);
  }
}

/**
 * Runs doctor's checks under the derived network and resolves with their exit code (0 when
 * nothing is a problem, 1 otherwise).
 *
 * @example
 * ```ts
 * Deno.exit(await launchDoctor({ stateDir: ".klbr", probeDiscord: false }));
 * ```
 */
export async function launchDoctor(options: LaunchDoctorOptions): Promise<number> {
  const hosts = await doctorNetwork(options);
  const status = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--no-prompt",
      "--allow-read",
      "--allow-write",
      "--allow-env",
      "--allow-run",
      "--allow-sys",
      `--allow-net=${hosts.join(",")}`,
      join(REPO_ROOT, "main.ts"),
      "doctor-checks",
      "--state",
      options.stateDir,
      ...(options.configPath === undefined ? [] : ["--config", options.configPath]),
      ...(options.port === undefined ? [] : ["--port", String(options.port)]),
      ...(options.probeDiscord ? ["--probe"] : []),
    ],
    stdin: "null",
    stdout: "inherit",
    stderr: "inherit",
  }).spawn().status;
  return status.code;
}
