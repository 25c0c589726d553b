/**
 * The daemon's permission set, derived from its configuration: read and write only where
 * klbr keeps state, network only to the listen address, the configured model hosts and (when
 * configured) the Discord API and gateway hosts, and
 * run only the Python interpreter, `kill`, `ps`, Deno (to bundle the UI) and the programs
 * `workspace.run` may start.
 *
 * @module
 */

import { join, resolve } from "node:path";

/** What the permission set is derived from. */
export interface ServePermissionInput {
  stateDir: string;
  /** The KDL file read at start, when there is one. */
  configPath?: string;
  /** The loopback address to listen on. */
  host: string;
  /** The port; 0 lets the daemon pick one. */
  port: number;
  /** The repository: `behavior/`, `workbench/`, `ui/`, the modules. */
  repoRoot: string;
  /** The session's workspace. */
  workspace: string;
  /** The builtin skills root. */
  skillsRoot: string;
  /** Base URLs of every configured model route. */
  modelUrls: string[];
  /** The Discord API and gateway URLs; empty or absent when Discord is not configured. */
  discordUrls?: string[];
  /** The Python interpreter the workbench runs, as configured (`python3` by default). */
  python: string;
  /** The Deno executable, for `deno bundle`. */
  deno: string;
  /**
   * Programs `workspace.run` may start (`KLBR_RUN_PROGRAMS`); `undefined` leaves run
   * unscoped, because a cell may then ask for any program.
   */
  runPrograms?: string[];
}

/**
 * Returns the `deno run` permission flags for the daemon.
 *
 * @example
 * ```ts
 * const flags = servePermissionFlags({ stateDir, host: "127.0.0.1", port: 8765, ... });
 * // ["--allow-read=/s,/repo,…", "--allow-write=/s,/repo/ui/dist", "--allow-net=127.0.0.1:8765,localhost:8001", …]
 * ```
 */
export function servePermissionFlags(input: ServePermissionInput): string[] {
  const list = (values: (string | undefined)[]) =>
    [...new Set(values.filter((v): v is string => v !== undefined && v !== ""))].join(",");
  const read = list([
    resolve(input.stateDir),
    resolve(input.repoRoot),
    resolve(input.workspace),
    resolve(input.skillsRoot),
    input.configPath === undefined ? undefined : resolve(input.configPath),
  ]);
  // The workspace: `code.patch` writes its files from the host.
  const write = list([
    resolve(input.stateDir),
    join(resolve(input.repoRoot), "ui", "dist"),
    resolve(input.workspace),
  ]);
  const net = list([
    input.port === 0 ? input.host : `${input.host}:${input.port}`,
    ...input.modelUrls.map(hostOf),
    ...(input.discordUrls ?? []).flatMap(discordHostsOf),
  ]);
  const run = input.runPrograms === undefined
    ? "--allow-run"
    : `--allow-run=${list([input.python, "kill", "ps", input.deno, ...input.runPrograms])}`;
  return [
    `--allow-read=${read}`,
    `--allow-write=${write}`,
    `--allow-net=${net}`,
    run,
    // The OpenAI SDK and the config's api_key_env read variables by name at run time.
    "--allow-env",
    // The owner lock records the hostname; the SDK reports the platform.
    "--allow-sys",
  ];
}

/**
 * The hosts a Discord URL needs: its own; for Discord's gateway also its resume hosts
 * (`READY` names one like `gateway-us-east1-b.discord.gg`); for Discord's API also the CDN
 * hosts attachments are fetched from.
 */
function discordHostsOf(url: string): string[] {
  const host = hostOf(url);
  if (host === "gateway.discord.gg:443") return [host, "*.discord.gg:443"];
  if (host === "discord.com:443") {
    return [host, "cdn.discordapp.com:443", "media.discordapp.net:443"];
  }
  return [host];
}

function hostOf(url: string): string {
  const parsed = new URL(url);
  const secure = parsed.protocol === "https:" || parsed.protocol === "wss:";
  const port = parsed.port || (secure ? "443" : "80");
  return `${parsed.hostname}:${port}`;
}

/**
 * Parses `KLBR_RUN_PROGRAMS` (comma-separated program names); unset or empty means unscoped.
 *
 * @example
 * ```ts
 * parseRunPrograms("git, deno,sh"); // ["git", "deno", "sh"]
 * ```
 */
export function parseRunPrograms(value: string | undefined): string[] | undefined {
  if (value === undefined || value.trim() === "") return undefined;
  return value.split(",").map((p) => p.trim()).filter((p) => p !== "");
}
