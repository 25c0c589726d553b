/**
 * Running `jupyter_peer.py`: a Jupyter kernel's execute round trip and start-up, the peer of
 * figures 3c/3d and 5d. The bench never installs anything: when the interpreter or Jupyter is
 * missing, the result says why and the rows show no peer.
 *
 * @module
 */

import { join } from "node:path";
import { REPO_ROOT } from "../runtime/setup/mod.ts";
import { type LatencySummary, summarize } from "./stats.ts";

/** Options for {@linkcode runJupyterPeer}. */
export interface JupyterPeerOptions {
  /** The interpreter that has `jupyter_client` and `ipykernel`. @default "/usr/bin/python3" */
  python?: string;
  /** Timed executions of `1+1`. */
  count: number;
  /** Untimed executions first. */
  warmup: number;
  /** Kernels to start and time. */
  starts: number;
  /** A scratch directory for Jupyter's connection files. */
  scratch: string;
}

/** What the peer measured, or why it could not. */
export type JupyterPeerResult =
  | {
    ok: true;
    /** e.g. `ipykernel 6.17.0, jupyter_client 7.4.9, Python 3.11.2 (/usr/bin/python3)`. */
    versions: string;
    /** `execute_request` until both `execute_reply` and `execute_result`, in ms. */
    roundTrip: LatencySummary;
    /** Starting a kernel until it answers `kernel_info`, in ms. */
    start: LatencySummary;
  }
  | { ok: false; reason: string };

const INSTALL_HINT = "apt-get install python3-ipykernel python3-jupyter-client";
/** How long the peer may run before it is killed. */
const TIMEOUT_MS = 180_000;

/**
 * Runs `bench/jupyter_peer.py` with `python` and returns its measurements. Never throws: every
 * failure (no interpreter, no Jupyter, a crash, a timeout) is a result with a reason.
 *
 * @example
 * ```ts
 * const peer = await runJupyterPeer({ count: 500, warmup: 20, starts: 3, scratch });
 * if (!peer.ok) console.log(peer.reason);
 * ```
 */
export async function runJupyterPeer(options: JupyterPeerOptions): Promise<JupyterPeerResult> {
  const python = options.python ?? "/usr/bin/python3";
  let output: Deno.CommandOutput;
  try {
    output = await new Deno.Command(python, {
      args: [
        join(REPO_ROOT, "bench", "jupyter_peer.py"),
        "--count",
        String(options.count),
        "--warmup",
        String(options.warmup),
        "--starts",
        String(options.starts),
      ],
      cwd: options.scratch,
      env: {
        JUPYTER_RUNTIME_DIR: join(options.scratch, "jupyter-runtime"),
        PYDEVD_DISABLE_FILE_VALIDATION: "1",
      },
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
      signal: AbortSignal.timeout(TIMEOUT_MS),
    }).output();
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) {
      return { ok: false, reason: `${python} does not exist; ${INSTALL_HINT} to measure it` };
    }
    return {
      ok: false,
      reason: `the Jupyter peer did not finish within ${TIMEOUT_MS} ms or could not run (${
        error instanceof Error ? error.message : error
      })`,
    };
  }
  const lines = new TextDecoder().decode(output.stdout).trim().split("\n");
  let parsed: Record<string, unknown>;
  try {
    parsed = JSON.parse(lines[lines.length - 1]);
  } catch {
    const stderr = new TextDecoder().decode(output.stderr).trim().split("\n").slice(-3).join(" ");
    return {
      ok: false,
      reason: `the Jupyter peer exited with ${output.code} without a result (${stderr})`,
    };
  }
  if (parsed.ok !== true) {
    return {
      ok: false,
      reason: `${String(parsed.reason)}; ${INSTALL_HINT} to measure it`,
    };
  }
  return {
    ok: true,
    versions: `ipykernel ${parsed.ipykernel}, jupyter_client ${parsed.jupyter_client}, ` +
      `Python ${parsed.python} (${parsed.executable})`,
    roundTrip: summarize(parsed.round_trip_ms as number[]),
    start: summarize(parsed.start_ms as number[]),
  };
}
