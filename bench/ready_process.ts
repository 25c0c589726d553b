/**
 * Starting an HTTP server process and timing it until its health route answers.
 *
 * @module
 */

import { fileURLToPath } from "node:url";
import { KlbrError } from "../runtime/core/mod.ts";

/** Options for {@linkcode startUntilReady}. */
export interface ReadyOptions {
  /** The port the process is told to listen on (see {@linkcode freePort}). */
  port: number;
  /** Variables added to the inherited environment. */
  env?: Record<string, string>;
  /** The working directory. */
  cwd?: string;
}

/** A started server process. */
export interface ReadyProcess {
  readonly pid: number;
  readonly port: number;
  /** `http://127.0.0.1:<port>`. */
  readonly url: string;
  /** Milliseconds from spawn until the first 200 from `/health`. */
  readonly readyMs: number;
  /** Sends SIGTERM; after 30 s SIGKILL. Resolves with the exit code. */
  stop(): Promise<number>;
}

const POLL_MS = 5;
/** How long a process may take to answer `/health`. */
const READY_TIMEOUT_MS = 60_000;
/** How long a stopped process may take to exit before it is killed. */
const STOP_GRACE_MS = 30_000;

/**
 * Returns a TCP port on 127.0.0.1 that was free a moment ago.
 *
 * @example
 * ```ts
 * const port = freePort();
 * ```
 */
export function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  return port;
}

/**
 * Spawns `command args` and polls its `/health` every 5 ms until it answers 200.
 *
 * @throws {KlbrError} `worker_failed` when the process exits before it is ready;
 *   `worker_timeout` when it is not ready within 60 s (the process is then killed).
 * @example
 * ```ts
 * const server = await startUntilReady(Deno.execPath(), ["run", "server.ts"], { port });
 * console.log(server.readyMs);
 * await server.stop();
 * ```
 */
export async function startUntilReady(
  command: string,
  args: string[],
  options: ReadyOptions,
): Promise<ReadyProcess> {
  const url = `http://127.0.0.1:${options.port}`;
  const health = `${url}/health`;
  const started = performance.now();
  const child = new Deno.Command(command, {
    args,
    cwd: options.cwd,
    env: options.env,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let output = "";
  const pump = async (stream: ReadableStream<Uint8Array>) => {
    for await (const text of stream.pipeThrough(new TextDecoderStream())) output += text;
  };
  const pumps = Promise.all([pump(child.stdout), pump(child.stderr)]);
  let exited: Deno.CommandStatus | undefined;
  const status = child.status.then((s) => (exited = s));

  let readyMs: number | undefined;
  while (readyMs === undefined) {
    if (exited !== undefined) {
      await pumps;
      throw new KlbrError(
        "worker_failed",
        `cannot start ${command}: it exited with ${exited.code} before ${health} answered (got ${
          JSON.stringify(output.slice(-400))
        })`,
      );
    }
    if (performance.now() - started > READY_TIMEOUT_MS) {
      child.kill("SIGKILL");
      await status;
      await pumps;
      throw new KlbrError(
        "worker_timeout",
        `cannot start ${command}: ${health} did not answer within ${READY_TIMEOUT_MS} ms (got ${
          JSON.stringify(output.slice(-400))
        })`,
      );
    }
    try {
      const response = await fetch(health, { signal: AbortSignal.timeout(2_000) });
      await response.body?.cancel();
      if (response.ok) readyMs = performance.now() - started;
    } catch {
      // Not listening yet.
    }
    if (readyMs === undefined) await new Promise((r) => setTimeout(r, POLL_MS));
  }

  return {
    pid: child.pid,
    port: options.port,
    url,
    readyMs,
    async stop() {
      try {
        child.kill("SIGTERM");
      } catch { /* already gone */ }
      let timer: ReturnType<typeof setTimeout> | undefined;
      const killed = new Promise<void>((resolve) => {
        timer = setTimeout(() => {
          try {
            child.kill("SIGKILL");
          } catch { /* already gone */ }
          resolve();
        }, STOP_GRACE_MS);
      });
      await Promise.race([status, killed]);
      clearTimeout(timer);
      const s = await status;
      await pumps;
      return s.code;
    },
  };
}

/**
 * Starts `bench/floor_server.ts` (a bare `Deno.serve` that answers `/health`) on a free
 * loopback port and resolves once `/health` answers.
 *
 * @throws {KlbrError} what {@linkcode startUntilReady} throws.
 * @example
 * ```ts
 * const server = await startFloorServer();
 * await server.stop();
 * ```
 */
export async function startFloorServer(): Promise<ReadyProcess> {
  const port = freePort();
  const script = fileURLToPath(new URL("./floor_server.ts", import.meta.url));
  return await startUntilReady(Deno.execPath(), [
    "run",
    "--allow-net=127.0.0.1",
    script,
    String(port),
  ], { port });
}
