/**
 * Confinement of the daemon's children — the workbench, hook workers, the behaviour test
 * worker, `workspace.run` programs and job workbenches — by bubblewrap: a user namespace with
 * an unprivileged uid, every capability dropped, `no_new_privs`, a seccomp filter, limits per
 * process tree (cgroups, else rlimits), and klbr's own code and the repository's git hooks and
 * config read-only. `docs/security.md` states each boundary and the test that proves it.
 *
 * Guarantees:
 * - a confined process has no capability, `no_new_privs` and the filter (`probeCell` reads it
 *   inside; "a cell, its subprocess, a workspace.run child and a job have no capability" in
 *   `tests/runtime/daemon/security_sandbox.test.ts`);
 * - every process of a tree is in its cgroup before bubblewrap forks (the wrapper joins it
 *   first), and the cgroup is removed when the tree has ended.
 *
 * @module
 */

export {
  bwrapArgs,
  type ConfinedSpawn,
  ETC_BINDS,
  type SandboxBase,
  type SandboxStatus,
  SYSTEM_BINDS,
  workerReadOnly,
} from "./_sandbox.ts";
export { type ConfinedCommand, confinedCommand } from "./_confine.ts";
export { runShell, SHELL, type ShellResult } from "./_shell.ts";
export {
  type CellView,
  probeCell,
  type ProbeOptions,
  probeSandbox,
  requireSandbox,
} from "./_probe.ts";
export { type Confinement, type ConfinementOptions, prepareConfinement } from "./_confinement.ts";
export { describeConfinement } from "./_describe.ts";
export {
  cgroupName,
  closeLimits,
  formatBytes,
  type LimitSettings,
  type LimitsPlan,
  planLimits,
} from "./_limits.ts";
export { type Jail, LIMIT_POLL_MS, watchLimits } from "./_jail.ts";
export { protectedPaths, refuseProtected } from "./_protect.ts";
export {
  ARGUMENT_RULES,
  type BpfInstruction,
  CLONE_NAMESPACE_FLAGS,
  CREATE_FLAGS,
  DENIED_SYSCALLS,
  ENOSYS_SYSCALLS,
  seccompBytes,
  seccompProgram,
  SETID_MODE_BITS,
  SYSCALL_TABLES,
} from "./_seccomp.ts";
export { killProcessGroup, processGroupMembers } from "./_process_group.ts";
export { spawnChild, type SpawnFailureText } from "./_spawn_child.ts";
