/**
 * The v2 lane protocol's server side: the Hono app, one connection's state machine, the
 * operator token and the loopback checks.
 *
 * @module
 */

export {
  type AdmitOutcome,
  type InputMessage,
  LaneConnection,
  type LaneHost,
} from "./_lane_connection.ts";
export { requireLoopbackHost } from "./_loopback.ts";
export { ensureOperatorToken, readOperatorToken } from "./_operator_token.ts";
export { createApp } from "./_server.ts";
