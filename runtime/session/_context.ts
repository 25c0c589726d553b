/**
 * What a request carries, through the context domain: the contract message, the summary
 * standing in for the items it covers, the newest items that fit the route's budget, and the
 * turn's opening message — compacted first when the request would pass the budget's
 * compaction threshold, passed through `context.prepare`, and cut to the budget if the hook
 * made it larger.
 *
 * @module
 */

import type { InputRecord } from "../../store/tables/inputs.ts";
import { recordCalibration } from "../../store/tables/token_counts.ts";
import {
  buildRequest,
  compactContext,
  type ContextBudget,
  fitMessages,
  messagesTokens,
  rawLimits,
  renderAmbient,
  renderInputs as renderBounded,
  type RouteShape,
  shapeMessages,
} from "../context/mod.ts";
import { ambientBefore } from "../../store/tables/ambient_inputs.ts";
import type { HookResult } from "../behavior/mod.ts";
import type { ChatMessage, Provider, ProviderTurn } from "../model/mod.ts";
import { hookOr, type TurnHookDeps } from "./_turn_hooks.ts";
import type { PreparedRequest } from "./_turn_sink.ts";

/** What building a request needs. */
export interface ContextDeps extends TurnHookDeps {
  /** The contract message the model reads first, for a route of `maxSteps` steps a turn. */
  system: (route: { maxSteps: number }) => string;
  /** Each route's token budget. */
  contextBudget: (route: string) => ContextBudget;
  /** The provider of a route; compaction asks `long` for the summary. */
  provider: (route: string) => Provider;
}

/**
 * What the contract adds on a route in text mode: the fence rules (`_fence_cells.ts`).
 */
export const TEXT_MODE_RULES = [
  "",
  "This model server takes no tool calls: write each cell as one ```python fenced block.",
  "The first python block of a reply runs as the cell; the rest of the reply is scratchpad,",
  "and further python blocks in the same reply do not run. The cell's result comes back in a",
  'message starting "[runtime] result of your python cell". Call wait() in a cell when done.',
].join("\n");

/**
 * The message a new turn opens with, within a quarter of `main`'s budget: the talk its
 * conversations had meanwhile that the plan read without answering (at most a quarter of that
 * share), then its inputs.
 */
export function renderInputs(
  deps: ContextDeps,
  session: string,
  inputs: InputRecord[],
): Record<string, unknown> {
  const limits = rawLimits(deps.store, session, "main", deps.contextBudget("main"));
  const firstSeq = new Map<string, number>();
  for (const input of inputs) {
    const seen = firstSeq.get(input.conversationId);
    if (seen === undefined || input.seq < seen) firstSeq.set(input.conversationId, input.seq);
  }
  const ambient = [...firstSeq].flatMap(([conversation, seq]) =>
    ambientBefore(deps.store, { session, conversation, beforeSeq: seq })
  );
  const ambientShare = Math.floor(limits.opening / 4);
  const meanwhile = renderAmbient(ambient, ambientShare);
  const opening = renderBounded(inputs, limits.opening - (meanwhile ? ambientShare : 0));
  return meanwhile ? { ...opening, content: `${meanwhile}\n\n${opening.content}` } : opening;
}

/**
 * The request's messages for `route`: compacted first when over the threshold, then
 * `context.prepare`, then cut to the budget. A failed compaction is logged and the request
 * goes out without it (the newest items that fit, the rest named as left out). A route whose
 * server holds less than its configured `context_tokens` (`contextTokens`, what the server
 * stated when it refused a larger request) is sized, and compacted, to that.
 */
export async function prepareContext(
  deps: ContextDeps,
  session: string,
  opening: Record<string, unknown>[],
  options: {
    route: string;
    signal: AbortSignal;
    shape: RouteShape;
    frameId?: string;
    maxSteps: number;
    /** The server's context, when it is smaller than the route's configured one. */
    contextTokens?: number;
  },
): Promise<PreparedRequest> {
  const text = options.shape.toolMode === "text";
  const sized = withServerContext(deps, options);
  const parts = {
    route: options.route,
    budget: sized.contextBudget(options.route),
    system: deps.system({ maxSteps: options.maxSteps }) + (text ? TEXT_MODE_RULES : ""),
    opening,
    frameId: options.frameId,
  };
  let built = buildRequest(sized.store, session, parts);
  if (built.overCompact) {
    try {
      const done = await compactContext(sized, session, {
        keep: { tokens: built.limits.keep },
        model: true,
        signal: options.signal,
      });
      if (done !== undefined) built = buildRequest(sized.store, session, parts);
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      deps.log.warn("context.compaction_failed", `compaction skipped: ${message}`, { session });
    }
  }
  const base = built.messages as HookResult<"context.prepare">;
  const prepared = await hookOr(deps, session, "context.prepare", { messages: base }, base);
  // Handed back unchanged (or failed): the built request, already sized within the budget.
  if (prepared === base && built.rawTokens <= built.limits.request) {
    const messages = shapeMessages(base, options.shape) as unknown as ChatMessage[];
    return { messages, rawTokens: built.rawTokens };
  }
  const messages = fitMessages(prepared as Record<string, unknown>[], built.limits.request) ??
    fitMessages(base, built.limits.request) ?? base;
  // Shaped last, so neither the history nor the hook can send what the server refuses.
  const shaped = shapeMessages(messages, options.shape) as unknown as ChatMessage[];
  return { messages: shaped, rawTokens: messagesTokens(messages) };
}

/**
 * `deps` whose budget for `route` is at most `contextTokens`: what the request and its
 * compaction (its kept items, its summary) are sized to.
 */
function withServerContext(
  deps: ContextDeps,
  server: { route: string; contextTokens?: number },
): ContextDeps {
  const { route, contextTokens } = server;
  if (contextTokens === undefined) return deps;
  return {
    ...deps,
    contextBudget(name: string): ContextBudget {
      const budget = deps.contextBudget(name);
      return name === route && contextTokens < budget.contextTokens
        ? { ...budget, contextTokens }
        : budget;
    },
  };
}

/** Calibrates the route's token estimate from the `prompt_tokens` a reply reported. */
export function noteUsage(
  deps: ContextDeps,
  session: string,
  sample: { route: string; request: PreparedRequest; usage: ProviderTurn["usage"] },
): void {
  const reported = sample.usage.promptTokens;
  if (reported === undefined || reported < 1) return;
  recordCalibration(deps.store, session, {
    route: sample.route,
    estimated: sample.request.rawTokens,
    reported,
  });
}
