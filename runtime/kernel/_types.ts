/**
 * The types the workbench handle shares with its callers: RPC handlers, exit reports, the
 * `init` payload and reply, and execute options.
 *
 * @module
 */

import { z } from "zod";
import type { BehaviorRef, KlbrErrorCode, Logger, SkillsPayload } from "../core/mod.ts";
import { type ProcessRole, WorkerFingerprint } from "./_fingerprint.ts";
import type { RpcRegistry } from "./_rpc_registry.ts";
import type { Jail } from "../sandbox/mod.ts";

/** Context an RPC handler gets besides the params. */
export interface RpcContext {
  /** Aborted by `rpc_cancel`, by the end of the parent request, or by the worker's end. */
  signal: AbortSignal;
  /** The RPC method. */
  method: string;
  /** The id of the request (an `execute` or `hook`) the call runs under. */
  parent: string;
  /** The cell id, when the parent is an `execute`. */
  cell: string | null;
}

/** How one hook call runs: its deadline, the release to run it from, and its cancellation. */
export interface HookOptions {
  timeoutMs?: number;
  behavior?: BehaviorRef;
  signal?: AbortSignal;
  /** `context.prepare`'s messages, sent beside `args` (`prepareMessages`). */
  messages?: unknown[];
}

/** How a workbench process ended. */
export interface WorkbenchExit {
  /** `shutdown` (asked), `killed` (the host killed it) or `failed` (framing, exit, no ping). */
  reason: "shutdown" | "killed" | "failed";
  /** The code of the failure (`frame_json`, `worker_timeout`, `worker_failed`, …), else null. */
  code: KlbrErrorCode | null;
  /** Says what happened, naming the cause. */
  message: string;
  /** The process's exit code, or null when a signal ended it or it could not be reaped. */
  exitCode: number | null;
  /** The signal that ended it, or null. */
  signal: string | null;
  /** The end of the worker's stderr, for diagnostics. */
  stderrTail: string;
}

/** The settings a handle runs with (validated and defaulted by `spawnWorkbench`). */
export interface HandleSettings {
  maxFrameBytes: number;
  cancelGraceMs: number;
  pingTimeoutMs: number;
  initTimeoutMs: number;
  exitGraceMs: number;
  /** The host RPCs the process may call. */
  rpc: RpcRegistry;
  /** The role of the process: which RPCs of `rpc` it may call. */
  role: ProcessRole;
  /** Where unexpected RPC failures are logged. */
  log: Logger;
  onExit?: (exit: WorkbenchExit) => void;
  /** The limits of the worker's process tree: watched while a cell runs, released at its end. */
  jail?: Jail | null;
}

/** The `ok.result` of `init`. */
export const InitReply = z.object({
  pid: z.number().int(),
  python: z.string(),
  prelude: z.array(z.string()),
  /** What the process loaded: its interpreter and the package (`klbr.fingerprint`). */
  fingerprint: WorkerFingerprint,
}).passthrough();
/** What a worker reports after `init`. */
export type InitReply = z.infer<typeof InitReply>;

/** The `init` fields the caller supplies. */
export type InitPayload = {
  generation: number;
  session: string;
  workspace: string;
  /** Directories the workspace API refuses inside the root (the state directory). */
  deny?: string[];
  skills: SkillsPayload;
  behavior: { revision: string; path: string } | null;
};

/** Options of `Workbench.execute`. */
export interface ExecuteOptions {
  /** After this long the ladder runs: `cancel`, then a kill. Outcome `timed_out`. */
  timeoutMs?: number;
  /** Aborting runs the ladder. Outcome `cancelled`, or `killed` after the grace. */
  signal?: AbortSignal;
  /** Live output; lossy animation, the result carries the whole capture. */
  onStream?: (name: "stdout" | "stderr", text: string) => void;
}
