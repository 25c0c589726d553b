/**
 * One session's work: recovery at start-up, the loop from pending inputs through
 * `attention.plan` to an accepted frame, the model turn that runs for it, its contract
 * message, and `local.send`.
 *
 * @module
 */

export {
  contractMessage,
  type ContractOptions,
  isMaintenanceInput,
  MAINTENANCE_CONVERSATION,
  MAINTENANCE_SKILL,
  type OfferedSkills,
} from "./_contract.ts";
export { renderCellResult } from "./_cell_output.ts";
export { type FencedCells, fencedCells } from "./_fence_cells.ts";
export { localSend, type LocalSendDeps, localSendRpc, type RunningFrame } from "./_local_send.ts";
export { createModelTurn, type ModelTurnOptions } from "./_model_turn.ts";
export { recoverSession, type RecoveryOptions } from "./_recovery.ts";
export { SessionRuntime } from "./_session_runtime.ts";
export type {
  HookCaller,
  SessionRuntimeOptions,
  SessionState,
  TurnContext,
  TurnResult,
  TurnRunner,
} from "./_turn_types.ts";
export { type ModelCallReport, type TurnHealth } from "./_turn_health.ts";
