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
import { appendEvent, lastEventOfKinds } from "../../store/tables/events.ts";
import {
  readCalibration,
  recordCalibration,
  UNCALIBRATED_RATIO,
} from "../../store/tables/token_counts.ts";
import {
  buildRequest,
  compactContext,
  type ContextBudget,
  fitMessages,
  heldBy,
  messagesTokens,
  type RawLimits,
  rawLimits,
  renderAmbient,
  renderInputs as renderBounded,
  type RouteShape,
  shapeMessages,
} from "../context/mod.ts";
import { ambientBefore } from "../../store/tables/ambient_inputs.ts";
import { KlbrError } from "../core/mod.ts";
import type { HookResult } from "../behavior/mod.ts";
import type { ChatMessage, Provider, ProviderTurn } from "../model/mod.ts";
import { hookOr, type TurnHookDeps } from "./_turn_hooks.ts";
import type { PreparedRequest } from "./_turn_sink.ts";
import { contextMove, routeMode } from "./_route_mode.ts";

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
 * stated when it refused a larger request) is sized, and compacted, to that. The contract is
 * never cut: the other contents make room for it.
 *
 * @throws {KlbrError} `invalid_config` when the contract alone passes the route's budget.
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
  refuseOversizedContract(deps, session, { ...parts, limits: built.limits });
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
  const prepared = await hookOr(deps, {
    session,
    name: "context.prepare",
    args: { messages: base },
    fallback: base,
    signal: options.signal,
  });
  // Handed back unchanged (or failed): the built request, already sized within the budget.
  if (prepared === base && built.rawTokens <= built.limits.request) {
    const messages = shapeMessages(base, options.shape) as unknown as ChatMessage[];
    return { messages, rawTokens: built.rawTokens };
  }
  const keep = { keepSystem: true };
  const messages = fitMessages(prepared as Record<string, unknown>[], built.limits.request, keep) ??
    fitMessages(base, built.limits.request, keep) ?? base;
  // Shaped last, so neither the history nor the hook can send what the server refuses.
  const shaped = shapeMessages(messages, options.shape) as unknown as ChatMessage[];
  return { messages: shaped, rawTokens: messagesTokens(messages) };
}

/**
 * Fails the request when the contract (the system message with its skills list) and the tool
 * schema alone pass what the route's requests may hold: cut, the model would lose the end of
 * its instructions without a word. The log (`context.contract_too_large`) and the error, which
 * ends the turn with it, name the route, its context, what the contract needs and the fix.
 *
 * @throws {KlbrError} `invalid_config` when the contract alone does not fit.
 */
function refuseOversizedContract(
  deps: ContextDeps,
  session: string,
  request: { route: string; budget: ContextBudget; system: string; limits: RawLimits },
): void {
  const { route, budget, limits } = request;
  const raw = messagesTokens([{ role: "system", content: request.system }]);
  if (raw <= limits.request) return;
  const need = Math.ceil(raw * limits.ratio);
  const held = budget.contextTokens;
  const configured = deps.contextBudget(route).contextTokens;
  const learned = held < configured ? `, learned from its server; configured ${configured}` : "";
  const message = `cannot build a request for llm "${route}": its contract (the system message ` +
    `and its skills list) alone needs about ${need} tokens, more than the ${held} its requests ` +
    `may hold (context_tokens ${held}${learned}); raise context_tokens of llm "${route}" (and ` +
    `the server's context), or remove skills (got ${need} tokens for ${held})`;
  deps.log.warn("context.contract_too_large", message, {
    session,
    route,
    context_tokens: held,
    contract_tokens: need,
  });
  throw new KlbrError("invalid_config", message);
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
      return name === route ? heldBy(budget, contextTokens) : budget;
    },
  };
}

/**
 * Calibrates the route's token estimate from the `prompt_tokens` a reply reported — unless the
 * server reported so much less than the request holds that it must have cut it
 * ({@linkcode noteCutRequest}).
 */
export function noteUsage(
  deps: ContextDeps,
  session: string,
  sample: {
    route: string;
    provider: Provider;
    request: PreparedRequest;
    usage: ProviderTurn["usage"];
  },
): void {
  const reported = sample.usage.promptTokens;
  if (reported === undefined || reported < 1) return;
  if (noteCutRequest(deps, session, { ...sample, reported })) return;
  recordCalibration(deps.store, session, {
    route: sample.route,
    estimated: sample.request.rawTokens,
    reported,
  });
}

/**
 * Under this share of the tokens a request was expected to hold, a reported prompt was cut by
 * the server: half before the route's first calibration, 70% after it (a calibrated estimate
 * is within about 15% of the server's count).
 */
const CUT_SHARE = { uncalibrated: 0.5, calibrated: 0.7 };

/** The share of what a cutting server kept that the route's requests are kept to: room to answer. */
const CUT_KEEP = 0.9;

/**
 * Whether the server kept far fewer of the request's tokens than it was sent, as Ollama does
 * past a model's `num_ctx` (2,048 or 4,096 unless set): it cuts the prompt from the front,
 * contract first, without an error, and reports what it kept (ollama/ollama#5902, #6026). Its
 * mark is a report far under the request that stays the same while the requests grow: the
 * previous reply on the route reported the same count (within 2%). A report of only the tokens
 * not in a prompt cache (some Ollama 0.30 versions, ollama/ollama#16428) is under the request
 * too, but moves with what is new. Then the route sends requests within 90% of what the server
 * kept, for the session (`route.adapted` `context_tokens`, as a refused request past the
 * context does), and the sample does not calibrate; the log says how to give the model more.
 */
function noteCutRequest(
  deps: ContextDeps,
  session: string,
  sample: { route: string; provider: Provider; request: PreparedRequest; reported: number },
): boolean {
  const { provider, request, reported } = sample;
  const calibration = readCalibration(deps.store, session, sample.route);
  const expected = request.rawTokens * (calibration?.ratio ?? UNCALIBRATED_RATIO);
  const share = calibration === undefined ? CUT_SHARE.uncalibrated : CUT_SHARE.calibrated;
  if (reported >= expected * share) return false;
  const last = lastEventOfKinds(deps.store, session, ["model.reply"])?.body as
    | { route?: string; usage?: { prompt_tokens?: number } }
    | undefined;
  const before = last?.route === sample.route ? last.usage?.prompt_tokens : undefined;
  if (before === undefined || Math.abs(before - reported) > reported * 0.02) return false;
  // A test's provider may carry no route: nothing to size.
  const route = provider.route as Provider["route"] | undefined;
  if (route === undefined) return false;
  const to = Math.floor(reported * CUT_KEEP);
  const current = routeMode(deps.store, session, route).contextTokens ?? route.context_tokens;
  const reason = `the server reported ${reported} prompt tokens for a request of about ` +
    `${Math.round(expected)}: it cut the request without saying so`;
  const move = contextMove(route, { name: sample.route, current, to, reason });
  if (move === undefined) return true;
  appendEvent(deps.store, session, "route.adapted", move);
  deps.log.warn(
    "route.cut",
    `llm "${sample.route}": ${reason}; klbr now sends requests of at most ${to} tokens. Give ` +
      "the model a larger context on the server (Ollama: OLLAMA_CONTEXT_LENGTH, or PARAMETER " +
      "num_ctx in a Modelfile) and set context_tokens to it",
    { route: sample.route, reported, expected: Math.round(expected) },
  );
  return true;
}
