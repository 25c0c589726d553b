/**
 * What each policy hook must return, and the fixture call a candidate release is tested with.
 *
 * One definition serves the running daemon (a result outside its contract is a hook failure
 * with a safe fallback) and the trusted test of a draft (the host runs every hook on its
 * fixture and checks the result here, never the candidate's own claim).
 *
 * @module
 */

import { z } from "zod";
import { describeIssues, type HookName } from "../core/mod.ts";

/**
 * `attention.plan`: which pending inputs one frame consumes (a turn answers them), which it
 * takes without a turn and why (`ignore`: read, recorded in the frame, not answered), and the
 * routing.
 */
export const AttentionPlan = z.object({
  consume: z.array(z.string()).max(1000),
  ignore: z.array(z.object({ id: z.string(), reason: z.string().min(1).max(500) })).max(1000)
    .default([]),
  routing: z.record(z.string(), z.unknown()).default({}),
});

/**
 * The conversations a frame answers, from its routing (`conversation` and `conversations`).
 *
 * @example
 * ```ts
 * routedConversations({ conversations: ["local:default", "discord:1"] }); // both, in order
 * ```
 */
export function routedConversations(routing: unknown): string[] {
  const r = (routing ?? {}) as { conversation?: unknown; conversations?: unknown };
  const list = Array.isArray(r.conversations) ? r.conversations : [];
  return [r.conversation, ...list].filter((c): c is string => typeof c === "string");
}

/** `model.plan`: which route the next request uses. */
export const ModelPlan = z.object({ route: z.enum(["main", "fast", "long"]) });

/**
 * `turn.next`: what happens after a model reply without tool calls. A `reminder` with
 * `continue` is recorded (`turn.reminded`) and sent to the model as the next request's last
 * message.
 */
export const TurnNext = z.object({
  action: z.enum(["continue", "wait", "stop"]),
  reminder: z.string().min(1).max(2000).optional(),
});

const Message = z.object({ role: z.string() }).passthrough();

/** `context.prepare`: the request's messages, as a list or as `{messages}`. */
export const ContextPrepared = z.union([
  z.array(Message),
  z.object({ messages: z.array(Message) }).transform((v) => v.messages),
]);

/** Each hook's contract, by name. */
export const HOOK_CONTRACTS = {
  "attention.plan": AttentionPlan,
  "model.plan": ModelPlan,
  "context.prepare": ContextPrepared,
  "turn.next": TurnNext,
} as const satisfies Record<HookName, z.ZodType>;

/** What a hook returns once checked against its contract. */
export type HookResult<N extends HookName> = z.output<(typeof HOOK_CONTRACTS)[N]>;

/**
 * Checks a hook's result against its contract.
 *
 * @example
 * ```ts
 * const plan = checkHookResult("model.plan", { route: "main" }); // { route: "main" }
 * ```
 * @throws {Error} naming the hook and what was wrong, e.g.
 * `model.plan returned route: Invalid option … (got {"route":"x"})`.
 */
export function checkHookResult<N extends HookName>(
  name: N,
  value: unknown,
): HookResult<N> {
  const parsed = HOOK_CONTRACTS[name].safeParse(value);
  if (!parsed.success) {
    throw new Error(
      `${name} returned ${describeIssues(parsed.error)} (got ${
        JSON.stringify(value)?.slice(0, 200)
      })`,
    );
  }
  return parsed.data as HookResult<N>;
}

/**
 * The arguments each hook is called with when a draft is tested: the arguments a turn gives it
 * (`runtime/session/_attention.ts`, `_turn_hooks.ts`, `_context.ts`), with sample values, so a
 * hook that passes takes what it will be given.
 */
export function hookFixtures(now: number): Record<HookName, Record<string, unknown>> {
  const session = { id: "fixture" };
  return {
    "attention.plan": {
      inputs: [{
        id: "in_fixture",
        source_kind: "local",
        conversation: "local:default",
        author: "owner",
        body: "hello",
        received_at: now,
      }],
      session,
    },
    "model.plan": { session },
    "context.prepare": {
      messages: [{ role: "system", content: "contract" }, { role: "user", content: "hello" }],
    },
    // The end of a step whose reply to a local message was text only: what a reminder is for.
    "turn.next": {
      session,
      consumed_local: true,
      replied_with_text: true,
      sent: 0,
      reminders: 0,
    },
  };
}
