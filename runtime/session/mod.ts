/**
 * One session's work: the loop from pending inputs through `attention.plan` to an
 * accepted frame, and the model turn that runs for it.
 *
 * @module
 */

export { createModelTurn } from "./_model_loop.ts";
export { type HookCaller, SessionRuntime } from "./_session_runtime.ts";
