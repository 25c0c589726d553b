/**
 * The v2 lane protocol's server side: the Hono app, one connection's state machine, the
 * operator token and its session cookies, the loopback, `Host` and `Origin` checks, and the
 * per-client bounds.
 *
 * @module
 */

export {
  type AdmitOutcome,
  type InputMessage,
  type LaneAuth,
  LaneConnection,
  type LaneHost,
  type OperatorMessage,
} from "./_lane_connection.ts";
export {
  DaemonAddress,
  findDaemon,
  removeDaemonAddress,
  writeDaemonAddress,
} from "./_daemon_address.ts";
export { type ListenAddress, ownOrigin, requireLoopbackHost } from "./_loopback.ts";
export { type CookieState, OperatorAuth, type OperatorAuthOptions } from "./_auth.ts";
export { type LaneLimits } from "./_lane_registry.ts";
export {
  ensureOperatorToken,
  ensureSessionKey,
  readOperatorToken,
  writeNewOperatorToken,
} from "./_operator_token.ts";
export { type AppDeps, createApp } from "./_server.ts";
export { type AppFetch, listenApp, type ListenerEnv, type Listening } from "./_listener.ts";
export {
  AttemptLimiter,
  type AttemptLimiterOptions,
  type Refusal,
  RefusalLog,
  type RefusalLogOptions,
} from "./_refusals.ts";
export {
  type EncodedRecord,
  encodeStoredRecords,
  type RecordBatch,
  recordBatches,
  storedBatches,
  type StoredRecord,
  type TextBatch,
  textBatches,
} from "./_record_batches.ts";
