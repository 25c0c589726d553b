/**
 * The daemon process: its settings, the start of its parts, the coordinator of sessions,
 * `/health`, the HTTP server, and the drain on SIGINT/SIGTERM.
 *
 * @module
 */

export { serve } from "./_serve.ts";
