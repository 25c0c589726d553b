/**
 * Starts a peer server in a process of its own, as the daemon runs in one: `deno run` on a
 * script of this folder that prints its port as its first line of stdout.
 *
 * @module
 */

import { fileURLToPath } from "node:url";
import { KlbrError } from "../../runtime/core/mod.ts";

/** A running peer process. */
export interface PeerProcess {
  port: number;
  pid: number;
  /** Sends SIGTERM and waits for the process to end. */
  stop(): Promise<void>;
}

/**
 * Runs `bench/peers/<script>` with `args` and resolves once it printed its port.
 *
 * @throws {KlbrError} `worker_failed` when it ends or prints no port within `timeoutMs`.
 * @example
 * ```ts
 * const peer = await startPeer("durable_server.ts", [dbPath]);
 * await peer.stop();
 * ```
 */
export async function startPeer(
  script: string,
  args: string[],
  options: { timeoutMs?: number; flags?: string[] } = {},
): Promise<PeerProcess> {
  const path = fileURLToPath(new URL(`./${script}`, import.meta.url));
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--allow-net=127.0.0.1",
      "--allow-read",
      "--allow-write",
      ...(options.flags ?? []),
      path,
      ...args,
    ],
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  const timer = setTimeout(() => child.kill("SIGKILL"), options.timeoutMs ?? 30_000);
  let text = "";
  try {
    while (!text.includes("\n")) {
      const { value, done } = await reader.read();
      if (done) break;
      text += value;
    }
  } finally {
    clearTimeout(timer);
  }
  const port = Number.parseInt(text, 10);
  if (!Number.isSafeInteger(port) || port <= 0) {
    throw new KlbrError(
      "worker_failed",
      `cannot start peer ${script}: it printed no port (got ${JSON.stringify(text)})`,
    );
  }
  // Keep draining stdout so the peer never blocks on a full pipe.
  void drain(reader);
  return {
    port,
    pid: child.pid,
    stop: async () => {
      try {
        child.kill("SIGTERM");
      } catch {
        // already gone
      }
      await child.status;
    },
  };
}

async function drain(reader: ReadableStreamDefaultReader<string>): Promise<void> {
  try {
    while (!(await reader.read()).done);
  } catch {
    // the process ended
  }
}
