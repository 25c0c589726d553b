/**
 * Behaviour releases: publishing `behavior/` at start, recovery of a broken active
 * release, the agent's editing RPCs (draft, test, publish, activate, rollback, candidates),
 * the `hooks` RPCs (bind, test, trace, release), the host's trusted test of hooks in a
 * throwaway worker, invocation traces, and the contract each policy hook's result must meet.
 *
 * @module
 */

export { type BehaviorEditingOptions, behaviorRpcs, candidateView } from "./_editing.ts";
export { readTraces } from "./_hook_rpcs.ts";
export { rollbackTarget } from "./_rollback.ts";
export { hookErrorOf } from "./_traces.ts";
export {
  AttentionPlan,
  checkHookResult,
  type HookResult,
  routedConversations,
} from "./_hook_contracts.ts";
export { type BehaviorState, prepareBehavior } from "./_releases.ts";
