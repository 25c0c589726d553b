/**
 * The request step of a turn: the route, the context shaped for its server, the streamed
 * reply, and the complete assistant block (with host-minted tool-call ids, or the fenced cell
 * of a text-mode reply) made durable before any of its cells runs.
 *
 * A server that refuses `tools` moves a `tool_calls "auto"` route to text mode, and one that
 * refuses a role order makes the route strict; either is recorded (`route.adapted`) and the
 * request is made again at once, once.
 *
 * The step serves the agent's turn and its child agents alike; its sink (`_turn_sink.ts`) says
 * where the route and the context come from and where the reply goes.
 *
 * @module
 */

import type { Store } from "../../store/store.ts";
import {
  type EventBus,
  isKlbrError,
  newId,
  type RecordInput,
  type RecordType,
} from "../core/mod.ts";
import {
  endedAtLength,
  endedByFilter,
  modelFailureFacts,
  type Provider,
  type ProviderTurn,
} from "../model/mod.ts";
import { fencedCells, leakedCall } from "./_fence_cells.ts";
import { shownUrl } from "./_model_trouble.ts";
import { adaptToRefusal, type RouteCall } from "./_refusals.ts";
import { type RouteMode, routeMode } from "./_route_mode.ts";
import { sessionSink } from "./_session_sink.ts";
import type { RequestSink, ToolCall } from "./_turn_sink.ts";
import { NO_TURN_HEALTH, type TurnHealth } from "./_turn_health.ts";
import type { TurnScope } from "./_turn_scope.ts";
import type { TurnContext, TurnResult } from "./_turn_types.ts";

/** A reply the turn goes on with: its calls (none: a reply of text only) and its text. */
export interface Reply {
  calls: ToolCall[];
  text: string;
  /** The route's mode the reply was asked under. */
  mode: RouteMode;
}

/**
 * A request step's view of the turn it serves, whoever's turn it is: the store and bus, the
 * turn's context, its record writer, whether it has had effects, and its sink, which says
 * where the route, the context and the reply come from and go. The root turn's scope
 * ({@linkcode TurnScope}) gets the session's sink; a child agent brings its own.
 */
export interface StepScope {
  options: {
    store: Store;
    bus: EventBus;
    health?: TurnHealth;
    /** The artifacts directory's size limit. @default 256 MiB */
    artifactBytes?: number;
  };
  ctx: TurnContext;
  /** Appends a record and returns its seq. */
  record: <T extends RecordType>(type: T, body: RecordInput<T>) => number;
  state: { effects: boolean };
  sink: RequestSink;
}

/** What the model is told when its reply ended inside a tool call. */
const CUT_IN_CALL =
  "[not run: your reply hit the token limit in the middle of the call; write a shorter cell]";
/** What the model is told of each cell of a reply the provider's content filter stopped. */
const FILTERED = "[not run: the provider's content filter stopped your reply]";
/** What the model is told when its reply ended with a python block still open. */
const UNCLOSED_FENCE =
  "[not run: your ```python block has no closing ``` line; end the cell with one]";

/**
 * One model request and its durable reply. The root turn passes its {@linkcode TurnScope} (the
 * session's sink); a child agent passes a {@linkcode StepScope} with its own sink.
 *
 * @returns the reply's calls, or the failed result that ends the turn
 */
export async function requestStep(
  given: TurnScope | StepScope,
  opening: Record<string, unknown> | null,
): Promise<Reply | TurnResult> {
  const scope: StepScope = "sink" in given ? given : { ...given, sink: sessionSink(given) };
  const { options, ctx, state, sink } = scope;
  const { session } = ctx;
  const begun = await sink.begin(opening);
  const { route, provider } = begun;
  opening = begun.opening;
  let adapted = false;
  let repaired = false;
  for (;;) {
    const mode = routeMode(options.store, session, provider.route);
    const request = await sink.context(opening, { route, mode, signal: ctx.signal })
      .catch((error: unknown) => unsendable(scope, { route, provider, error }));
    if ("ok" in request) return request;
    const streamed = await streamReply(scope, { route, provider, mode }, request.messages);
    if ("error" in streamed) {
      const refused = { ...streamed, rawTokens: request.rawTokens };
      if (!adapted && adaptToRefusal(scope, { route, provider, mode }, refused)) {
        adapted = true;
        continue;
      }
      if (!repaired && await sink.repair(streamed)) {
        repaired = true;
        continue;
      }
      return await modelFailed(scope, { route, provider, ...streamed });
    }
    const { turn } = streamed;
    const calls = callsOf(scope, { route, mode }, turn);
    await sink.commitReply(opening, { route, provider, request, turn, calls });
    // The reply is in the sequence now: a retry goes on from it, never repeats the inputs.
    state.effects = true;
    return { calls, text: turn.text, mode };
  }
}

/** Streams one reply, its text deltas to the bus; a failure is returned with its message. */
async function streamReply(
  scope: StepScope,
  call: RouteCall,
  messages: Parameters<Provider["streamChat"]>[0]["messages"],
): Promise<{ turn: ProviderTurn } | { error: unknown; message: string }> {
  const { options, ctx } = scope;
  const { session, frame } = ctx;
  const report = (options.health ?? NO_TURN_HEALTH).modelCall(call.route);
  try {
    const turn = await call.provider.streamChat({
      messages,
      tools: call.mode.shape.toolMode === "native",
    }, {
      signal: ctx.signal,
      onDelta: (delta) => {
        report.progress();
        // Tool-call text is progress too; the reply's text and its reasoning are also shown.
        if (delta.type === "tool_call") return;
        const reasoning = delta.type === "reasoning" ? { reasoning: true as const } : {};
        options.bus.emit(session, {
          kind: "token",
          session,
          turn: frame.id,
          text: delta.text,
          ...reasoning,
        });
      },
    });
    report.done(null);
    return { turn };
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    if (!ctx.signal.aborted) report.done(`${call.route}: ${message}`);
    return { error, message };
  }
}

/**
 * The calls a reply makes: its tool calls with host-minted ids (some providers repeat ids
 * across responses, and a session's sequence needs each id once), or, on a route that is not
 * strictly native, the first fenced python cell of a reply that has none (or the python call
 * its server's parser left in the text).
 */
function callsOf(
  scope: StepScope,
  call: { route: string; mode: RouteMode },
  turn: ProviderTurn,
): ToolCall[] {
  // Content was omitted from a reply the filter stopped: none of its calls is known whole.
  const filtered = endedByFilter(turn.finishReason) ? { refusal: FILTERED } : {};
  if (turn.toolCalls.length > 0) {
    const last = turn.toolCalls.length - 1;
    return turn.toolCalls.map((raw, i) => ({
      ...raw,
      id: newId("call"),
      // The token limit cut the reply inside its last call: that call is not run.
      ...(turn.cutInToolCall && i === last ? { refusal: CUT_IN_CALL } : {}),
      ...filtered,
    }));
  }
  if (call.mode.toolCalls === "native") return [];
  const fenced = fencedCells(turn.text);
  const code = fenced.code ?? leakedCall(turn.text);
  if (code === null) return fenced.unclosed ? [unclosedCell(turn)] : [];
  if (call.mode.shape.toolMode === "native" && scope.sink.lastReplyFenced(call.route)) {
    scope.record("route.adapted", {
      route: call.route,
      setting: "tool_calls",
      to: "text",
      reason: fenced.code === null
        ? "the model's python call was left in its text, not in tool_calls, twice in a row (the server's tool parser missed it)"
        : "the model answered twice in a row with a fenced python cell and no tool call",
    });
  }
  const notes = fenced.ignored > 0
    ? [`[runtime] only the first python block of a reply runs; ${fenced.ignored} more did not.`]
    : [];
  return [{
    id: newId("call"),
    name: "python",
    arguments: JSON.stringify({ code }),
    textCell: true,
    notes,
    ...filtered,
  }];
}

/**
 * The call of a reply whose python block never closed: not run, since its code may be cut, and
 * answered so that the model hears why (the token limit, or a missing closing fence).
 */
function unclosedCell(turn: ProviderTurn): ToolCall {
  return {
    id: newId("call"),
    name: "python",
    arguments: JSON.stringify({ code: "" }),
    textCell: true,
    refusal: endedByFilter(turn.finishReason)
      ? FILTERED
      : endedAtLength(turn.finishReason)
      ? CUT_IN_CALL
      : UNCLOSED_FENCE,
  };
}

/** Records what a failed request leaves (its partial text, the turn's end) and how it ended. */
async function modelFailed(
  scope: StepScope,
  failure: { route: string; provider: Provider; error: unknown; message: string },
): Promise<TurnResult> {
  const { ctx, record, state, sink } = scope;
  const { frame } = ctx;
  const { route, provider, error, message } = failure;
  // The provider's failure (the error's cause) carries what streamed before it.
  const partial = (error as { cause?: { partial?: Partial<ProviderTurn> } }).cause?.partial;
  if (partial !== undefined) await sink.partial(partial);
  if (ctx.signal.aborted) {
    const reason = stopReason(ctx.signal);
    record("turn.ended", { frame_id: frame.id, reason });
    return { ok: false, reason, effects: state.effects };
  }
  return turnFailedOn(scope, {
    route,
    provider,
    reason: `model failed: ${message}`,
    error: message,
    facts: modelFailureFacts(error),
  });
}

/**
 * Records the end of a turn its model call failed (`reason`) and returns the failed result: one
 * the session retries, naming the route, its server and what the failure says (`facts`).
 */
function turnFailedOn(
  scope: StepScope,
  failure: {
    route: string;
    provider: Provider;
    reason: string;
    error: string;
    facts: Record<string, unknown>;
  },
): TurnResult {
  const { route, provider, reason, error, facts } = failure;
  scope.record("turn.ended", { frame_id: scope.ctx.frame.id, reason });
  return {
    ok: false,
    reason,
    effects: scope.state.effects,
    retriable: true,
    model: {
      route,
      url: shownUrl(provider.route.url),
      model: provider.route.model,
      error,
      ...facts,
    },
  };
}

/**
 * The end of a turn whose request cannot be built within its route (`invalid_config`: the
 * contract alone passes the route's context): recorded with the message that names the fix,
 * and a refusal (not retried by itself), since no retry changes the configuration.
 */
function unsendable(
  scope: StepScope,
  failure: { route: string; provider: Provider; error: unknown },
): TurnResult {
  const { error, route, provider } = failure;
  if (!isKlbrError(error) || error.code !== "invalid_config") throw error;
  const { message } = error;
  return turnFailedOn(scope, {
    route,
    provider,
    reason: message,
    error: message,
    facts: { retriable: false },
  });
}

/** Why a turn was stopped, from its abort signal: the operator, or a signal's shutdown. */
export function stopReason(signal: AbortSignal): string {
  const why = signal.reason instanceof Error ? signal.reason.message : String(signal.reason ?? "");
  return why ? `stopped: ${why}` : "stopped by the operator";
}
