/**
 * The daemon process: its settings, the start of its parts, the coordinator of sessions,
 * `/health`, the HTTP server, and the drain on SIGINT/SIGTERM.
 *
 * @module
 */

export { serve } from "./_serve.ts";
export { readServeSettings, type ServeSettings } from "./_serve_settings.ts";
export { type DaemonParts, startDaemon, type StartOptions } from "./_start.ts";
export { hostRpcCatalog } from "./_session_rpc.ts";
export { rpcDocsTable, withRpcTable } from "./_rpc_docs.ts";
