/**
 * Attention for one pass of the session loop: `attention.plan` over the pending inputs, and
 * the inputs that waited past the configured age expired — so every input ends with a recorded
 * disposition (a frame that answers it, a frame that ignored it with its reason, or expiry),
 * and none is pending forever.
 *
 * @module
 */

import { z } from "zod";
import {
  expireInputs,
  type InputRecord,
  pendingBefore,
  pendingUpTo,
} from "../../store/tables/inputs.ts";
import { oldestPendingAt, waitingInputs, workCounts } from "../../store/tables/work_counts.ts";
import type { FrameRecord } from "../../store/tables/frames.ts";
import type { Store } from "../../store/store.ts";
import type { AttentionPlan } from "../behavior/mod.ts";
import type { HookCaller } from "./_turn_types.ts";

/** What a plan decided for one pass. */
export type Plan = z.infer<typeof AttentionPlan>;

/** Calls `attention.plan` over `inputs`; rejects with the hook's failure. */
export function callPlan(
  hooks: HookCaller,
  session: string,
  inputs: InputRecord[],
  options: { timeoutMs: number; signal: AbortSignal },
): Promise<Plan> {
  return hooks.call("attention.plan", {
    inputs: inputs.map((input) => ({
      id: input.id,
      source_kind: input.sourceKind,
      conversation: input.conversationId,
      author: input.author,
      body: input.body,
      received_at: input.receivedAt,
    })),
    session: { id: session },
  }, options);
}

/**
 * What a plan makes of `inputs`: the inputs a turn answers, and the ones it ignores — taken by
 * the same frame, their reasons in its routing, given to no turn.
 */
export function frameOfPlan(plan: Plan, inputs: InputRecord[]): {
  chosen: InputRecord[];
  ignoredIds: string[];
  routing: Record<string, unknown>;
} {
  const chosen = inputs.filter((input) => plan.consume.includes(input.id));
  // An input the plan names twice is ignored once, for the first reason it gave.
  const ignored = plan.ignore.filter((i, at) =>
    !plan.consume.includes(i.id) && inputs.some((input) => input.id === i.id) &&
    plan.ignore.findIndex((first) => first.id === i.id) === at
  );
  const routing = ignored.length === 0 ? plan.routing : {
    ...plan.routing,
    ignored: ignored.map((i) => ({ input_id: i.id, reason: i.reason })),
  };
  return { chosen, ignoredIds: ignored.map((i) => i.id), routing };
}

/** The inputs of a frame a turn answers: all but those the plan ignored. */
export function answered(frame: FrameRecord): string[] {
  const ignored = new Set(
    ((frame.routing as { ignored?: { input_id: string }[] })?.ignored ?? []).map((i) => i.input_id),
  );
  return frame.inputIds.filter((id) => !ignored.has(id));
}

/**
 * Expires the inputs pending for longer than `expireMs`, each with an `input.expired` record.
 *
 * @returns how many expired
 */
export function expireOld(store: Store, session: string, expireMs: number): number {
  if (!Number.isFinite(expireMs)) return 0;
  let expired = 0;
  for (let pass = 0; pass < 100; pass++) {
    const old = pendingBefore(store, session, store.clock() - expireMs, 1000);
    if (old.inputs.length === 0) break;
    expired += expireInputs(store, {
      session,
      inputIds: old.inputs.map((input) => input.id),
      reason: `pending for more than ${expireMs} ms without a frame`,
    }).length;
  }
  return expired;
}

/**
 * The session's inputs as `status` shows them: how many are pending, the oldest one's age, and
 * those waiting longer than `warnMs` (how many, and the first five). The counts read the index of
 * pending inputs only (`store/tables/work_counts.ts`), the oldest is one index probe, and the five
 * are a bounded index range.
 */
export function inputsView(store: Store, session: string, warnMs: number) {
  const now = store.clock();
  const pending = workCounts(store, session).pendingInputs;
  const oldest = pending === 0 ? null : oldestPendingAt(store, session);
  const waiting = waitingInputs(store, session, now, warnMs);
  const first = waiting.count === 0 ? [] : pendingUpTo(store, session, waiting.markSeq, 5);
  return {
    pending_inputs: pending,
    oldest_pending_age_ms: oldest === null ? null : now - oldest,
    waiting_inputs: waiting.count,
    waiting_threshold_ms: warnMs,
    waiting: first.map((input) => ({
      id: input.id,
      waited_ms: now - input.admittedAt,
      conversation: input.conversationId,
      author: input.author,
    })),
  };
}
