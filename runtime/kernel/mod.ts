/**
 * The host side of the workbench: spawning `python -m klbr` in its own process group,
 * request/reply correlation over length-prefixed stdio frames, the cancellation ladder,
 * host RPC dispatch, and the supervisor that owns a session's kernel generations.
 *
 * Guarantees (each proven in `tests/runtime/kernel/supervisor.test.ts`, see `docs/workbench.md`):
 * - a cell is ended by a `cancel` frame first; without a reply within the grace (2 s by
 *   default) the worker's whole process group is killed and the cell ends `killed`;
 * - a framing failure or an unexpected exit fails every pending request with
 *   `worker_failed` naming the cause, kills the group and reports `onExit`;
 * - the worker's stderr never mixes with frames; it is kept in a bounded ring;
 * - every generation reports the fingerprint of what it loaded (interpreter and package);
 *   `staleAgainst` says when a fresh one differs, and `retire` replaces a generation at its
 *   next boundary, letting its running requests finish;
 * - the kernel never touches the store: a generation is recorded by the caller's
 *   `recordGeneration`, awaited before the generation is used; cells are recorded by the
 *   caller around `execute`.
 *
 * @module
 */

export { type ExecuteOptions, type RpcContext, type WorkbenchExit } from "./_types.ts";
export type { CellResult } from "./_parts.ts";
export { type PythonInfo, resolvePython, spawnWorkbench } from "./_spawn.ts";
export { KernelSupervisor } from "./_supervisor.ts";
export type { GenerationRecord, KernelSupervisorOptions } from "./_generation.ts";
export { DEFAULT_MAX_FRAME_BYTES, encodeFrame, FrameDecoder } from "./_frame_codec.ts";
export { prepareMessages } from "./_prepare_messages.ts";
export {
  type LoadedSkills,
  loadSkills,
  MAX_SKILL_BYTES,
  SkillRoots,
  skillRoots,
  skillsRevision,
} from "./_skills.ts";
export { type SkillChange, skillRpcDeps, skillRpcs } from "./_skill_writes.ts";
export {
  bindRpcs,
  type BoundRpc,
  declareRefused,
  defineRpc,
  type RpcCall,
  type RpcDefinition,
  RpcRegistry,
} from "./_rpc_registry.ts";
export { workspaceRunRpc } from "./_workspace_rpc.ts";
export {
  packageHash,
  ProcessRole,
  type RoleFingerprint,
  WorkerFingerprint,
} from "./_fingerprint.ts";
export { replaceStaleRoles, type RoleAtBoundary, roleLoadedBody } from "./_roles.ts";
