/**
 * Behaviour releases: publishing `behavior/` at start, recovery of a broken active
 * release, the agent's editing RPCs (draft, test, publish, activate, rollback) and the
 * contract each policy hook's result must meet.
 *
 * @module
 */

export { behaviorHandlers } from "./_editing.ts";
export {
  AttentionPlan,
  checkHookResult,
  type HookResult,
  routedConversations,
} from "./_hook_contracts.ts";
export { type BehaviorState, prepareBehavior } from "./_releases.ts";
