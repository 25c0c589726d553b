/**
 * One session's work: the `Session` that owns its running frame, pinned release, cells, hook
 * counters and skills; recovery at start-up; the loop from pending inputs through
 * `attention.plan` to an accepted frame; the model turn that runs for it; its contract
 * message; and `local.send`.
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
export { keepCellOutput, keptCellResult, renderCellResult } from "./_cell_output.ts";
export { TEXT_MODE_RULES } from "./_context.ts";
export { afterThinking, type FencedCells, fencedCells, leakedCall } from "./_fence_cells.ts";
export { localSend, type LocalSendDeps, localSendRpc, type RunningFrame } from "./_local_send.ts";
export { createModelTurn, type ModelTurnOptions } from "./_model_turn.ts";
export { recoverSession, type RecoveryOptions } from "./_recovery.ts";
export { type Activation, type Frame, Session } from "./_session.ts";
export type {
  HookWorkerPort,
  SessionOptions,
  SessionWorkers,
  WorkbenchPort,
} from "./_session_ports.ts";
export { type AgentEnds, runAgentLoop } from "./_agent_loop.ts";
export type { StepScope } from "./_request_step.ts";
export type { RouteMode } from "./_route_mode.ts";
export type {
  CellAnswer,
  CellSink,
  FinishedCell,
  PreparedRequest,
  ReplyToCommit,
  RequestSink,
  RouteChoice,
  ToolCall,
  TurnKernel,
} from "./_turn_sink.ts";
export { SessionRuntime } from "./_session_runtime.ts";
export type {
  HookCaller,
  SessionRuntimeOptions,
  SessionState,
  SessionTimers,
  TurnContext,
  TurnResult,
  TurnRunner,
} from "./_turn_types.ts";
export { type ModelCallReport, NO_TURN_HEALTH, type TurnHealth } from "./_turn_health.ts";
