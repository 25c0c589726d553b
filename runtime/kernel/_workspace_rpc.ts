/**
 * The `workspace.run` host RPC: {@linkcode runInWorkspace} served to every process (a cell, a
 * hook, a job), each run waiting for a process slot when `runSlot` is given.
 *
 * @module
 */

import { z } from "zod";
import { RunParams } from "../core/mod.ts";
import { runInWorkspace, type RunOptions, type RunResult } from "../workspace/mod.ts";
import { defineRpc, type RpcCall } from "./_rpc_registry.ts";

/** What `workspace.run` is bound to: the run options of its process and its process slots. */
export interface WorkspaceRunDeps {
  options: Omit<RunOptions, "signal">;
  /** Waits for a process slot (the daemon's process budget) and returns its release. */
  runSlot?: (signal: AbortSignal) => Promise<() => void>;
}

/**
 * The `workspace.run` host RPC, served to every process (a cell, a hook, a job): each run waits
 * for a process slot when `runSlot` is given, and is ended with the call it runs under.
 */
export const workspaceRunRpc = defineRpc({
  name: "workspace.run",
  summary: "Runs a program from argv (never a shell) in the workspace, in its own process " +
    "group, with capped output, a timeout and cleanup after a cancellation.",
  roles: ["workbench", "hooks", "job"],
  action: "run",
  args: RunParams,
  reply: z.strictObject({
    exit_code: z.int().nullable(),
    stdout_b64: z.string(),
    stderr_b64: z.string(),
    stdout_truncated: z.boolean(),
    stderr_truncated: z.boolean(),
    timed_out: z.boolean(),
    duration_ms: z.number(),
  }),
  handler: async (args, call: RpcCall<WorkspaceRunDeps>): Promise<RunResult> => {
    const release = await call.deps.runSlot?.(call.signal);
    try {
      return await runInWorkspace(args, { ...call.deps.options, signal: call.signal });
    } finally {
      release?.();
    }
  },
});
