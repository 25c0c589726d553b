/**
 * The daemon's permission set, derived from its configuration: read and write only where
 * klbr keeps state, network only to the listen address, the configured model hosts and (when
 * configured) the Discord API and gateway hosts, environment variables by name, `hostname`
 * as the only system call, and run only what the daemon starts itself: bubblewrap, `/bin/sh`
 * (the sandbox's wrapper), `kill`, `ps` and Deno (to bundle the UI), plus — only where children run unconfined — the Python
 * interpreter and the programs `workspace.run` may start.
 *
 * @module
 */

import { join, resolve } from "node:path";
import { type SandboxStatus, SHELL } from "../sandbox/mod.ts";

/**
 * Every environment variable the daemon reads by a fixed name; the configuration adds the
 * `api_key_env` and `token_env` names it gives. `docs/security.md` lists them.
 */
export const DAEMON_ENV_NAMES = [
  "KLBR_WORKSPACE",
  "KLBR_SKILLS_DIR",
  "KLBR_CONFIG",
  "KLBR_PYTHON",
  "KLBR_BWRAP",
  "KLBR_CELL_TIMEOUT_MS",
  "KLBR_RUN_PROGRAMS",
  "KLBR_MAINTENANCE_INTERVAL_S",
  "KLBR_DRAIN_GRACE_MS",
  "KLBR_INPUT_EXPIRE_MS",
  "KLBR_INPUT_WAIT_WARN_MS",
  "KLBR_MODEL_STALL_MS",
  "KLBR_HOOK_SLOW_MS",
  "KLBR_RETRY_BASE_MS",
  // The crash tests' fault points (off unless set).
  "KLBR_FAULTS",
  "KLBR_FAULT",
  "KLBR_FAULT_AFTER",
  "PATH",
  // The `ws` package under the Discord gateway reads these two when it loads.
  "WS_NO_BUFFER_UTIL",
  "WS_NO_UTF_8_VALIDATE",
] as const;

/** The only system information the daemon asks for: the owner lock records the hostname. */
export const DAEMON_SYS = ["hostname"] as const;

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
  /** `backup { dir }` when it lies outside the state directory: the daemon writes backups there. */
  backupDir?: string;
  /** The builtin skills root. */
  skillsRoot: string;
  /** Base URLs of every configured model route. */
  modelUrls: string[];
  /** The Discord API and gateway URLs; empty or absent when Discord is not configured. */
  discordUrls?: string[];
  /** The configuration's `api_key_env` and `token_env` names. */
  envNames?: string[];
  /** The Python interpreter the workbench runs: its real executable and its home. */
  python: { executable: string; home: string };
  /** The bubblewrap executable. */
  bwrap: string;
  /** Whether children can be confined here (the launcher's own probe). */
  sandbox: SandboxStatus;
  /** The Deno executable, for `deno bundle`. */
  deno: string;
  /**
   * Programs `workspace.run` may start (`KLBR_RUN_PROGRAMS`); `undefined` means any, which
   * leaves run unscoped where children are unconfined.
   */
  runPrograms?: string[];
}

/**
 * Returns the `deno run` permission flags for the daemon.
 *
 * @example
 * ```ts
 * const flags = servePermissionFlags({ stateDir, host: "127.0.0.1", port: 8765, ... });
 * // ["--allow-read=/s,/repo,…", "--allow-write=/s,/repo/ui/dist", "--allow-net=127.0.0.1:8765,…",
 * //  "--allow-run=/usr/bin/bwrap,/bin/sh,kill,ps,/usr/bin/deno", "--allow-env=KLBR_WORKSPACE,…", "--allow-sys=hostname"]
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
    input.backupDir === undefined ? undefined : resolve(input.backupDir),
  ]);
  // The workspace: `code.patch` writes its files from the host.
  const write = list([
    resolve(input.stateDir),
    join(resolve(input.repoRoot), "ui", "dist"),
    resolve(input.workspace),
    input.backupDir === undefined ? undefined : resolve(input.backupDir),
  ]);
  const net = list([
    input.port === 0 ? input.host : `${input.host}:${input.port}`,
    ...input.modelUrls.map(hostOf),
    ...(input.discordUrls ?? []).flatMap(discordHostsOf),
  ]);
  // /bin/sh starts every confined child (it joins the tree's cgroup, then runs bwrap) and
  // makes, reads and removes the cgroups, which Deno may not touch under /sys.
  const own = [input.bwrap, SHELL, "kill", "ps", input.deno];
  // Confined, every child is started through bwrap; unconfined, Deno's list is the only
  // boundary there is, so it names the interpreter and the programs (or stays unscoped).
  const run = input.sandbox.mode === "bwrap"
    ? `--allow-run=${list(own)}`
    : input.runPrograms === undefined
    ? "--allow-run"
    : `--allow-run=${list([...own, input.python.executable, ...input.runPrograms])}`;
  return [
    `--allow-read=${read}`,
    `--allow-write=${write}`,
    `--allow-net=${net}`,
    run,
    `--allow-env=${list([...DAEMON_ENV_NAMES, ...(input.envNames ?? [])])}`,
    `--allow-sys=${DAEMON_SYS.join(",")}`,
  ];
}

/**
 * The hosts `doctor` may reach: loopback (for local routes and a running daemon), each model
 * route's host and, when Discord is configured, its hosts — derived like the daemon's, so a
 * remote route is checked, not refused by the sandbox.
 *
 * @example
 * ```ts
 * doctorNetHosts(["https://api.example/v1"], []); // ["127.0.0.1", "localhost", "[::1]", "api.example:443"]
 * ```
 */
export function doctorNetHosts(modelUrls: string[], discordUrls: string[]): string[] {
  return [
    ...new Set([
      "127.0.0.1",
      "localhost",
      "[::1]",
      ...modelUrls.map(hostOf),
      ...discordUrls.flatMap(discordHostsOf),
    ]),
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
 * Parses `KLBR_RUN_PROGRAMS` (comma-separated program names); unset or empty means any.
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

/**
 * The daemon's view of its environment: reading a variable `--allow-env` does not name
 * gives `undefined`, as if it were unset, instead of throwing.
 *
 * @example
 * ```ts
 * const env = daemonEnv();
 * env.KLBR_WORKSPACE; // the value, or undefined
 * ```
 */
export function daemonEnv(): Record<string, string | undefined> {
  return new Proxy({}, {
    get(_target, name) {
      if (typeof name !== "string") return undefined;
      try {
        return Deno.env.get(name);
      } catch {
        return undefined;
      }
    },
  });
}
