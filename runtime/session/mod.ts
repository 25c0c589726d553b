/**
 * One session's work: the `Session` that owns its running frame, pinned release, cells, hook
 * counters and skills; recovery at start-up; the loop from pending inputs through
 * `attention.plan` to an accepted frame; the model turn that runs for it; its contract
 * message; and `local.send`.
 *
 * @module
 */

export { contractMessage, MAINTENANCE_CONVERSATION, type OfferedSkills } from "./_contract.ts";
export { keepCellOutput, keptCellResult, renderCellResult } from "./_cell_output.ts";
export { TEXT_MODE_RULES } from "./_context.ts";
export { afterThinking, fencedCells, leakedCall } from "./_fence_cells.ts";
export { localSend, localSendRpc } from "./_local_send.ts";
export { recoverSession } from "./_recovery.ts";
export { Session } from "./_session.ts";
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
  FinishedCell,
  PreparedRequest,
  ReplyToCommit,
  RequestSink,
  RouteChoice,
  ToolCall,
  TurnKernel,
} from "./_turn_sink.ts";
export { HOST_TIMERS, type SessionTimers, type TurnResult } from "./_turn_types.ts";
export { type ModelCallReport, NO_TURN_HEALTH, type TurnHealth } from "./_turn_health.ts";
