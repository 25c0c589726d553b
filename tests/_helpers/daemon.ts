/**
 * Starts the real daemon (`main.ts serve`) as a child process for end-to-end tests, with
 * exactly the permission flags of the `serve` task.
 *
 * @module
 */

import { join } from "node:path";
import { daemonArgs, derivePermissionInput, REPO_ROOT } from "../../runtime/setup/mod.ts";
import { killTree, serveFlags } from "../../bench/daemon.ts";
import { tempDir } from "./temp.ts";
import { watchCgroups } from "./cgroups.ts";

export { REPO_ROOT };

/** Options for {@linkcode startTestDaemon}. */
export interface TestDaemonOptions {
  /** Base URL of an OpenAI-compatible server, e.g. the fake's `url`. */
  modelUrl?: string;
  /** Reuse a state directory (e.g. after a kill); a fresh temp dir otherwise. */
  stateDir?: string;
  /** The workspace; a fresh temp dir otherwise. */
  workspace?: string;
  /** Extra environment for the daemon. */
  env?: Record<string, string>;
  /** Extra KDL appended to the generated configuration. */
  extraConfig?: string;
  /** Extra fields of the generated `main` route (which undeclared roles copy), as KDL lines. */
  routeFields?: string;
  /** The `main` route's model name. @default {"fake"} */
  model?: string;
  /** `daemon` (default) starts `main.ts daemon` under the derived permissions directly;
   * `launcher` starts `main.ts serve`, which derives them itself. */
  via?: "daemon" | "launcher";
  /** `--log-format` for the daemon; its own default (text) otherwise. */
  logFormat?: "text" | "json";
  /** Where the generated configuration is written; the state directory otherwise. */
  configDir?: string;
  /** The port to listen on; a free one (0) otherwise. A restart keeps the port it got. */
  port?: number;
  /** Use the state directory's own `config.kdl` (what `init` wrote) instead of generating one. */
  stateConfig?: boolean;
  /** Extra `deno run` flags (e.g. `--cpu-prof` while profiling), before the script. */
  denoFlags?: string[];
  /**
   * Another checkout (a copy of this one) to run `main.ts serve` from, as `deno task serve`
   * does there: through the launcher, whose permissions then name that checkout.
   */
  repoRoot?: string;
}

/** A running daemon. */
export interface TestDaemon {
  readonly url: string;
  readonly port: number;
  readonly stateDir: string;
  readonly workspace: string;
  readonly token: string;
  readonly pid: number;
  /** Everything the daemon wrote to stdout and stderr so far. */
  logs(): string;
  /** Sends SIGTERM and resolves with the exit code. */
  stop(): Promise<number>;
  /** Sends SIGKILL to the daemon and its workbench process groups. */
  kill(): Promise<void>;
  /**
   * Resolves when the daemon has ended by itself (a fault point's `kill`, a refused start),
   * with its status; its workbench processes are killed too.
   */
  exited(): Promise<Deno.CommandStatus>;
  /**
   * Starts a new daemon on the same state directory and workspace; `options` replace the
   * first start's (e.g. `env` without `KLBR_FAULTS`).
   */
  restart(options?: Partial<TestDaemonOptions>): Promise<TestDaemon>;
}

/** The serve task's `deno run` permission flags, read from deno.json (the bench's reading). */
export { serveFlags };

/** Starts the daemon on a free port and waits until `/health` answers. */
export async function startTestDaemon(options: TestDaemonOptions = {}): Promise<TestDaemon> {
  const stateDir = options.stateDir ?? await tempDir("klbr-state-");
  const workspace = options.workspace ?? await tempDir("klbr-ws-");
  const configPath = options.stateConfig
    ? undefined
    : join(options.configDir ?? stateDir, "test-config.kdl");
  const modelUrl = options.modelUrl ?? "http://127.0.0.1:9/v1";
  if (configPath !== undefined) {
    await Deno.writeTextFile(
      configPath,
      `llm "main" {\n    url "${modelUrl}"\n    model "${
        options.model ?? "fake"
      }"\n    timeout_ms 20000\n` +
        `${options.routeFields ?? ""}\n}\n` +
        (options.extraConfig ?? ""),
    );
  }
  const env = {
    ...Deno.env.toObject(),
    KLBR_WORKSPACE: workspace,
    KLBR_SKILLS_DIR: join(REPO_ROOT, "skills"),
    NO_COLOR: "1",
    ...options.env,
  };
  // By default the daemon runs exactly as `serve` starts it: under the permission set derived
  // from this configuration. `via: "launcher"` goes through `serve` itself.
  const root = options.repoRoot ?? REPO_ROOT;
  const args = options.via === "launcher" || options.repoRoot !== undefined
    ? [
      "run",
      ...serveFlags(),
      join(root, "main.ts"),
      "serve",
      "--state",
      stateDir,
      ...(configPath === undefined ? [] : ["--config", configPath]),
      "--port",
      String(options.port ?? 0),
      ...(options.logFormat === undefined ? [] : ["--log-format", options.logFormat]),
    ]
    : daemonArgs(
      await derivePermissionInput({ stateDir, configPath, port: options.port ?? 0 }, env),
      {
        logFormat: options.logFormat,
      },
    );
  if (options.denoFlags?.length) args.splice(1, 0, ...options.denoFlags);
  const child = new Deno.Command(Deno.execPath(), {
    args,
    cwd: root,
    clearEnv: true,
    env,
    stdout: "piped",
    stderr: "piped",
    stdin: "null",
  }).spawn();
  const status = child.status;
  // A killed daemon leaves its cgroups for a next start; when none comes, the test process
  // removes them at its end.
  await watchCgroups(stateDir, status);
  let output = "";
  let portResolve!: (port: number) => void;
  const portPromise = new Promise<number>((r) => (portResolve = r));
  const pump = async (stream: ReadableStream<Uint8Array>) => {
    for await (const text of stream.pipeThrough(new TextDecoderStream())) {
      output += text;
      const match = output.match(/listening on http:\/\/127\.0\.0\.1:(\d+)\//);
      if (match) portResolve(Number(match[1]));
    }
  };
  const pumps = Promise.all([pump(child.stdout), pump(child.stderr)]);
  let timer: ReturnType<typeof setTimeout> | undefined;
  const port = await Promise.race([
    portPromise,
    status.then(async (s) => {
      // The exit can be seen before the pipes are read to their end: what it wrote last is
      // what the caller needs (a refusal's one line), so it waits for both, 5 s at most.
      let drained: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([pumps, new Promise((done) => (drained = setTimeout(done, 5_000)))]);
      clearTimeout(drained);
      throw new Error(`daemon exited with ${s.code} before listening:\n${output}`);
    }),
    new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`daemon did not listen within 30 s:\n${output}`)),
        30_000,
      );
    }),
  ]).finally(() => clearTimeout(timer));
  const token = (await Deno.readTextFile(join(stateDir, "operator.token"))).trim();
  const daemon: TestDaemon = {
    url: `http://127.0.0.1:${port}`,
    port,
    stateDir,
    workspace,
    token,
    pid: child.pid,
    logs: () => output,
    async stop() {
      try {
        child.kill("SIGTERM");
      } catch { /* already gone */ }
      const s = await status;
      await pumps;
      return s.code;
    },
    async kill() {
      await killTree(child.pid);
      await status;
      await pumps;
    },
    async exited() {
      const s = await status;
      await pumps;
      await killProcessesIn(workspace);
      return s;
    },
    // The same port: the page's origin, and the cookie named for it, stay the daemon's own.
    restart: (more = {}) => startTestDaemon({ ...options, stateDir, workspace, port, ...more }),
  };
  return daemon;
}

/**
 * SIGKILLs every process whose working directory is inside `dir`: what a daemon that killed
 * itself leaves of its workbench and hook workers (they would end at end of input anyway).
 */
export async function killProcessesIn(dir: string): Promise<void> {
  const real = await Deno.realPath(dir).catch(() => dir);
  // Deno reads /proc only with --allow-all; the shell may.
  const script = 'for p in /proc/[0-9]*; do c=$(readlink "$p/cwd" 2>/dev/null); ' +
    'case "$c" in "$1"|"$1"/*) echo "${p#/proc/}";; esac; done';
  const out = await new Deno.Command("sh", { args: ["-c", script, "sh", real] }).output();
  for (const pid of new TextDecoder().decode(out.stdout).split("\n").filter(Boolean)) {
    try {
      Deno.kill(Number(pid), "SIGKILL");
    } catch { /* gone */ }
  }
}

/**
 * Asks the daemon's `/health` until `done` holds for its body (bounded: `tries` times, `everyMs`
 * apart; 500 × 20 ms unless given) and returns that body.
 *
 * @throws {Error} naming the last body when it never held.
 * @example
 * ```ts
 * const slow = await healthUntil(daemon, (h) => h.status !== "ok");
 * ```
 */
export async function healthUntil(
  daemon: { url: string },
  done: (health: Record<string, unknown>) => boolean,
  options: { tries?: number; everyMs?: number } = {},
): Promise<Record<string, unknown>> {
  let health: Record<string, unknown> = {};
  for (let i = 0; i < (options.tries ?? 500); i++) {
    health = await (await fetch(`${daemon.url}/health`)).json();
    if (done(health)) return health;
    await new Promise((resolve) => setTimeout(resolve, options.everyMs ?? 20));
  }
  throw new Error(`/health never matched: ${JSON.stringify(health)}`);
}
