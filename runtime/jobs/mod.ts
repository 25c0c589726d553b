/**
 * Unattended work: durable timers that wake the agent, jobs in workbenches of their own,
 * child model calls (`llm()`, `agent()`), the budgets that govern them, and the cleanup
 * policy. See `docs/jobs.md` for every guarantee and the test that proves it.
 *
 * @module
 */

export { HOUR_MS, liftHint } from "./_budget.ts";
export { Jobs } from "./_domain.ts";
export type { UnattendedInput } from "./_inputs.ts";
export { runMaintenance } from "./_maintenance.ts";
export { type RpcScope, unattendedRpcs } from "./_rpc.ts";
export { type HostTimers, TimerScheduler } from "./_timers.ts";
