/**
 * The daemon process: configuration, store, behaviour at start, the coordinator of
 * sessions, the HTTP server, and the drain on SIGINT/SIGTERM.
 *
 * @module
 */

export { serve, type ServeOptions } from "./_serve.ts";
