/**
 * The base every other part stands on: errors, ids, the wire envelopes of both protocols,
 * the durable record bodies, and the in-process event bus. It imports no domain; it is all of
 * `runtime/` that `store/` and `ui/` import. Its files import zod as a namespace
 * (`import * as z`), which lets the UI bundle keep only the parts of zod that core uses.
 *
 * @module
 */

export {
  DEFAULT_CELL_TIMEOUT_MS,
  DEFAULT_DRAIN_GRACE_MS,
  DEFAULT_HOOK_TIMEOUT_MS,
  DEFAULT_HOST,
  DEFAULT_INPUT_EXPIRE_MS,
  DEFAULT_INPUT_WAIT_WARN_MS,
  DEFAULT_MODEL_STALL_MS,
  DEFAULT_OPERATOR_TIMEOUT_MS,
  DEFAULT_PORT,
  DEFAULT_RETRY_BASE_MS,
  LONGEST_TIMER_MS,
} from "./_defaults.ts";
export { assert, isKlbrError, KlbrError, type KlbrErrorCode } from "./_errors.ts";
export { stateFileError, type StateFileErrorOptions } from "./_state_file_error.ts";
export { faultPoint } from "./_fault.ts";
export {
  type CommittedRecords,
  EventBus,
  type LaneSignal,
  MAX_CARRIED_RECORDS,
  type StoredRecord,
} from "./_event_bus.ts";
export {
  createLogger,
  type LogFields,
  LogFormat,
  type Logger,
  type LoggerOptions,
  SILENT_LOGGER,
} from "./_log.ts";
export { nextMacrotask, SerialRunner, settlesWithin } from "./_serial.ts";
export { describeIssues } from "./_issues.ts";
export {
  AdaptedRoute,
  adaptedRouteText,
  CandidatesResult,
  ContextResult,
  FramesResult,
  HealthReport,
  OPERATOR_RESULTS,
  type OperatorResultKind,
  parseOperatorResult,
  PartHealth,
  SearchResult,
  SessionState,
  SessionStatus,
  SpentBudget,
  StatusResult,
  TraceResult,
  TraceView,
} from "./_operator_results.ts";
export { ID_PREFIXES, type IdKind, newId } from "./_ids.ts";
export {
  BehaviorRef,
  CellReply,
  DraftTestReply,
  HookName,
  HostFrame,
  HostRequest,
  HostRpcReply,
  parseWorkerFrame,
  RunParams,
  SendParams,
  SkillDeleteParams,
  SkillsPayload,
  SkillWriteParams,
  WorkerFrame,
} from "./_protocol.ts";
export {
  ClientMessage,
  type ClientRole,
  InputAttachment,
  LaneRecord,
  MAX_ATTACHMENTS,
  OPERATOR_KINDS,
  parseClientMessage,
  ServerMessage,
} from "./_lane_protocol.ts";
export {
  ArtifactRef,
  CELL_OUTCOMES,
  CellDisplay,
  CellRunResult,
  DurableRecord,
  isRecordType,
  KnownRecord,
  OUTBOX_STATES,
  readRecord,
  RECORD_TYPES,
  type RecordData,
  recordDataSchema,
  type RecordInput,
  type RecordReading,
  type RecordType,
  SOURCE_KINDS,
} from "./_records.ts";
export { JOB_STATES } from "./_records_jobs.ts";
