/**
 * The host side of the workbench: spawning `python -m klbr` in its own process group,
 * request/reply correlation over length-prefixed stdio frames, the cancellation ladder,
 * host RPC dispatch, and the supervisor that owns a session's kernel generations.
 *
 * Guarantees (each proven in `tests/session.test.ts`, see `docs/workbench.md`):
 * - a cell is ended by a `cancel` frame first; without a reply within the grace (2 s by
 *   default) the worker's whole process group is killed and the cell ends `killed`;
 * - a framing failure or an unexpected exit fails every pending request with
 *   `worker_failed` naming the cause, kills the group and reports `onExit`;
 * - the worker's stderr never mixes with frames; it is kept in a bounded ring;
 * - the workbench module never touches the store: durable records are the caller's
 *   callbacks (`recordGeneration`, `onCellStarted`, `recordOutcome`), awaited before the
 *   generation is used, before the code is sent and before the outcome is returned.
 *
 * @module
 */

export { WorkbenchHandle as Workbench } from "./_workbench_handle.ts";
export {
  type ExecuteOptions,
  type InitPayload,
  InitReply,
  type RpcContext,
  type RpcHandler,
  type WorkbenchExit,
} from "./_workbench_types.ts";
export type { CellOutcome, CellResult } from "./_workbench_parts.ts";
export {
  type PythonInfo,
  resolvePython,
  spawnWorkbench,
  type WorkbenchOptions,
  WorkbenchSettings,
} from "./_workbench_spawn.ts";
export {
  type CellOutcomeRecord,
  type CellStart,
  type GenerationRecord,
  KernelSupervisor,
  type KernelSupervisorOptions,
} from "./_workbench_supervisor.ts";
