/**
 * Starts the real daemon for a bench phase: `main.ts daemon` under the permission set `serve`
 * derives from the configuration (`runtime/setup`), on a free port, with a generated route to
 * the bench's own model server.
 *
 * @module
 */

import { join } from "node:path";
import { KlbrError } from "../runtime/core/mod.ts";
import { daemonArgs, derivePermissionInput, REPO_ROOT } from "../runtime/setup/mod.ts";

export { REPO_ROOT };

/** Options for {@linkcode startBenchDaemon}. */
export interface BenchDaemonOptions {
  /** The state directory (made when missing; reused across starts). */
  stateDir: string;
  /** The workspace (made when missing). */
  workspace: string;
  /** Base URL of an OpenAI-compatible server. @default {"http://127.0.0.1:9/v1"} (nothing) */
  modelUrl?: string;
  /** KDL appended to the generated configuration. */
  extraConfig?: string;
  /** Extra `deno run` flags (e.g. `--cpu-prof`), before the script. */
  denoFlags?: string[];
}

/** A running daemon. */
export interface BenchDaemon {
  readonly url: string;
  readonly port: number;
  readonly token: string;
  readonly pid: number;
  /** Sends SIGTERM and resolves with the exit code. */
  stop(): Promise<number>;
  /** SIGKILLs the daemon and the process groups its children lead (the workbench). */
  kill(): Promise<void>;
}

/** How long the daemon may take to listen. */
const LISTEN_MS = 30_000;

/**
 * The serve task's `deno run` permission flags, read from `deno.json`.
 *
 * @example
 * ```ts
 * const args = ["run", ...serveFlags(), "main.ts", "serve"];
 * ```
 */
export function serveFlags(): string[] {
  const config = JSON.parse(Deno.readTextFileSync(join(REPO_ROOT, "deno.json")));
  const task: string = config.tasks.serve;
  return task.split(/\s+/).filter((part) => part.startsWith("--allow-"));
}

/**
 * Starts the daemon on a free port and resolves once it listens.
 *
 * @throws {KlbrError} `worker_failed` when it exits before listening; `worker_timeout` when it
 *   does not listen within 30 s (it is then killed).
 */
export async function startBenchDaemon(options: BenchDaemonOptions): Promise<BenchDaemon> {
  await Deno.mkdir(options.stateDir, { recursive: true });
  await Deno.mkdir(options.workspace, { recursive: true });
  const configPath = join(options.stateDir, "bench-config.kdl");
  await Deno.writeTextFile(
    configPath,
    `llm "main" {\n    url "${options.modelUrl ?? "http://127.0.0.1:9/v1"}"\n` +
      `    model "bench"\n    timeout_ms 20000\n}\n${options.extraConfig ?? ""}`,
  );
  const env = {
    ...Deno.env.toObject(),
    KLBR_WORKSPACE: options.workspace,
    KLBR_SKILLS_DIR: join(REPO_ROOT, "skills"),
    NO_COLOR: "1",
  };
  const input = await derivePermissionInput(
    { stateDir: options.stateDir, configPath, port: 0 },
    env,
  );
  const args = daemonArgs(input, {});
  if (options.denoFlags?.length) args.splice(1, 0, ...options.denoFlags);
  const child = new Deno.Command(Deno.execPath(), {
    args,
    cwd: REPO_ROOT,
    clearEnv: true,
    env,
    stdout: "piped",
    stderr: "piped",
    stdin: "null",
  }).spawn();
  const output = new DaemonOutput();
  const pumps = Promise.all([output.pump(child.stdout), output.pump(child.stderr)]);
  let timer: ReturnType<typeof setTimeout> | undefined;
  let port: number;
  try {
    port = await Promise.race([
      output.port,
      child.status.then((s) => {
        throw new KlbrError(
          "worker_failed",
          `cannot start the bench daemon: it exited before listening (got code ${s.code}):\n${output.text}`,
        );
      }),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() =>
          reject(
            new KlbrError(
              "worker_timeout",
              `cannot start the bench daemon: no listen line within ${LISTEN_MS} ms (got:\n${output.text})`,
            ),
          ), LISTEN_MS);
      }),
    ]);
  } catch (error) {
    await killTree(child.pid);
    throw error;
  } finally {
    clearTimeout(timer);
  }
  const token = (await Deno.readTextFile(join(options.stateDir, "operator.token"))).trim();
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    token,
    pid: child.pid,
    async stop() {
      try {
        child.kill("SIGTERM");
      } catch { /* already gone */ }
      const status = await child.status;
      await pumps;
      return status.code;
    },
    async kill() {
      await killTree(child.pid);
      await child.status;
      await pumps;
    },
  };
}

/** The daemon's output so far, and the port of its listen line. */
class DaemonOutput {
  text = "";
  readonly port: Promise<number>;
  #found!: (port: number) => void;

  constructor() {
    this.port = new Promise((resolve) => (this.#found = resolve));
  }

  /** Reads one of the daemon's streams to its end. */
  async pump(stream: ReadableStream<Uint8Array>): Promise<void> {
    for await (const text of stream.pipeThrough(new TextDecoderStream())) {
      this.text += text;
      const match = /listening on http:\/\/127\.0\.0\.1:(\d+)\//.exec(this.text);
      if (match) this.#found(Number(match[1]));
    }
  }
}

/**
 * SIGKILLs a process and every process group its children lead (read with `ps`); a child left
 * in the caller's own group is killed alone. The tests' daemon helper uses it too.
 */
export async function killTree(pid: number): Promise<void> {
  const out = await new Deno.Command("ps", { args: ["-e", "-o", "pid=,ppid=,pgid="] }).output();
  const rows = new TextDecoder().decode(out.stdout).split("\n")
    .map((line) => line.trim().split(/\s+/).map(Number));
  // A child left in this process's own group (not detached) is killed alone, never the group:
  // that would kill this process and everything started beside it.
  const own = rows.find(([p]) => p === Deno.pid)?.[2];
  const groups = new Set<number>();
  for (const [child, ppid, pgid] of rows) {
    if (ppid !== pid) continue;
    if (pgid !== pid && pgid !== own) groups.add(pgid);
    else if (pgid === own) {
      try {
        Deno.kill(child, "SIGKILL");
      } catch { /* gone */ }
    }
  }
  try {
    Deno.kill(pid, "SIGKILL");
  } catch { /* gone */ }
  for (const pgid of groups) {
    try {
      Deno.kill(-pgid, "SIGKILL");
    } catch { /* gone */ }
  }
}
