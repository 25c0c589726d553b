/**
 * The agent's workspace as the host touches it: paths resolved inside its root (no `..`, no
 * symlink out, the state directory refused) and `workspace.run`, a program started from argv in
 * its own process group with capped output and a timeout. Below the kernel, above the sandbox:
 * it imports `runtime/sandbox/` and never `runtime/kernel/` (`tests/architecture.test.ts`).
 *
 * @module
 */

export {
  resolveInWorkspace,
  withinRoot,
  type WorkspacePath,
  type WorkspacePathOptions,
} from "./_paths.ts";
export { runInWorkspace, RunOptions, type RunResult } from "./_run.ts";
