/**
 * Context management: each route's token budget (calibrated from the provider's reported
 * `prompt_tokens`), requests that never pass it, hierarchical bounded summaries written by the
 * `long` model and checked (the extractive summary as fallback), the lexical history index and
 * exact reads of what a summary covers (`history.search`, `history.read`).
 *
 * @module
 */

export {
  budgetOf,
  type ContextBudget,
  heldBy,
  messagesTokens,
  type RawLimits,
  rawLimits,
} from "./_budget.ts";
export {
  compactContext,
  type CompactionDeps,
  type CompactOptions,
  repairContext,
  type RepairOptions,
} from "./_compaction.ts";
export { artifactReadRpc, type HistoryRpcDeps, historyRpcs } from "./_history_rpc.ts";
export { AMBIENT_HEADING, renderAmbient, renderInputs } from "./_inputs.ts";
export {
  buildRequest,
  type BuiltRequest,
  fitMessages,
  type FitOptions,
  type RequestParts,
} from "./_request.ts";
export { contextView } from "./_view.ts";
export {
  AFTER_TOOLS,
  MISSING_RESULT,
  nineCharId,
  objectArguments,
  type RouteShape,
  shapeMessages,
  TEXT_RESULT_HEADER,
  toolArguments,
} from "./_route_shape.ts";
