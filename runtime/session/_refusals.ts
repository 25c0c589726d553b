/**
 * What a request step does when its server refuses a request: adapt the route to the server
 * (text-mode cells, strict role order), or rewrite a history it refuses from the durable
 * records — each at most once per request step, each recorded.
 *
 * @module
 */

import { lastEventOfKinds } from "../../store/tables/events.ts";
import { recordCalibration } from "../../store/tables/token_counts.ts";
import type { Store } from "../../store/store.ts";
import { repairContext } from "../context/mod.ts";
import { modelFailureFacts, type Provider } from "../model/mod.ts";
import { contextMove, type RouteMode } from "./_route_mode.ts";
import type { TurnScope } from "./_turn_scope.ts";

/** One request's route: its name, its provider and its mode. */
export interface RouteCall {
  route: string;
  provider: Provider;
  mode: RouteMode;
}

/**
 * Records the move a refusal calls for, if the route can make it: `tools` refused on an
 * `auto` route still native → text mode; a role order refused on a relaxed route → strict; a
 * request past the server's context → requests within the context it stated (less the route's
 * `max_tokens`, which the server counts too), or three quarters of the current size when it
 * stated none. A context refusal that states the refused request's size in the server's
 * tokens (llama-server's `n_prompt_tokens`, vLLM's and OpenAI's words) calibrates the route's
 * estimate against `rawTokens`, the request's raw estimate, as a reply's `prompt_tokens` does:
 * text the estimate undercounts (CJK, emoji, in a session calibrated on English) is sized by
 * the server's count when the request is built again, so it fits at the first retry.
 */
export function adaptToRefusal(
  scope: Pick<TurnScope, "ctx" | "record"> & { options: { store: Store } },
  call: RouteCall,
  failure: { error: unknown; message: string; rawTokens?: number },
): boolean {
  if (scope.ctx.signal.aborted) return false;
  const { refusal, serverContext, serverPrompt } = modelFailureFacts(failure.error);
  const { shape, toolCalls } = call.mode;
  if (refusal === "context") {
    const { rawTokens } = failure;
    if (serverPrompt !== undefined && rawTokens !== undefined && rawTokens > 0) {
      recordCalibration(scope.options.store, scope.ctx.session, {
        route: call.route,
        estimated: rawTokens,
        reported: serverPrompt,
      });
    }
    return adaptContext(scope, call, { ...failure, serverContext });
  }
  if (refusal === "tools" && toolCalls === "auto" && shape.toolMode === "native") {
    scope.record("route.adapted", {
      route: call.route,
      setting: "tool_calls",
      to: "text",
      reason: `the server refused tools: ${failure.message.slice(0, 300)}`,
    });
    return true;
  }
  if (refusal === "role_order" && !shape.strictRoles) {
    scope.record("route.adapted", {
      route: call.route,
      setting: "role_order",
      to: "strict",
      reason: `the server refused the role order: ${failure.message.slice(0, 300)}`,
    });
    return true;
  }
  return false;
}

/** Records the smaller context a `context` refusal calls for; false when there is none to go to. */
function adaptContext(
  scope: Pick<TurnScope, "record">,
  call: RouteCall,
  failure: { message: string; serverContext?: number },
): boolean {
  // A test's provider may carry no route: nothing to size.
  const route = call.provider.route as RouteCall["provider"]["route"] | undefined;
  if (route === undefined) return false;
  const current = call.mode.contextTokens ?? route.context_tokens;
  const stated = failure.serverContext === undefined
    ? undefined
    : failure.serverContext - (route.max_tokens ?? 0);
  const to = stated !== undefined && stated < current ? stated : Math.floor((current * 3) / 4);
  const reason = `the server refused a request past its context: ${failure.message.slice(0, 300)}`;
  const move = contextMove(route, { name: call.route, current, to, reason });
  if (move === undefined) return false;
  scope.record("route.adapted", move);
  return true;
}

/**
 * The daemon's one attempt at a history its server refuses (the provider names the refusal:
 * tool-call arguments, reasoning not sent back, or the request itself — not the key, the model,
 * `tools` or the role order): the context is rewritten from the durable records
 * (`context.repaired`) and the request made again, once per request step and never twice
 * without a reply in between, before the failure is recorded.
 */
export async function repairRefusedHistory(
  scope: TurnScope,
  failure: { error: unknown; message: string },
): Promise<boolean> {
  const { options, ctx } = scope;
  if (ctx.signal.aborted) return false;
  // What the server refused is the history itself, not the key, the model, tools or the order.
  const { refusal } = modelFailureFacts(failure.error);
  if (refusal !== "arguments" && refusal !== "request" && refusal !== "reasoning") return false;
  const last = lastEventOfKinds(options.store, ctx.session, ["context.repaired", "model.reply"]);
  if (last?.kind === "context.repaired") return false;
  const done = await repairContext(options, ctx.session, {
    by: "daemon",
    reason: `the server refused the history: ${failure.message}`,
  });
  return done !== undefined;
}
