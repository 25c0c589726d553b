/**
 * The request step of a turn: the route, the context shaped for its server, the streamed
 * reply, and the complete assistant block (with host-minted tool-call ids, or the fenced cell
 * of a text-mode reply) made durable before any of its cells runs.
 *
 * A server that refuses `tools` moves a `tool_calls "auto"` route to text mode, and one that
 * refuses a role order makes the route strict; either is recorded (`route.adapted`) and the
 * request is made again at once, once.
 *
 * @module
 */

import { appendEvent, lastEventOfKinds } from "../../store/events.ts";
import { appendProviderItems, getProviderItem, lastItemIdx } from "../../store/provider_items.ts";
import type { Store } from "../../store/store.ts";
import { newId, type RecordInput } from "../core/mod.ts";
import {
  assistantMessage,
  modelFailureFacts,
  type Provider,
  type ProviderTurn,
} from "../model/mod.ts";
import { noteUsage, prepareContext } from "./_context.ts";
import { SCRATCHPAD_SPOOL_ABOVE_CHARS, spoolLongText } from "./_cell_output.ts";
import { fencedCells } from "./_fence_cells.ts";
import { shownUrl } from "./_model_trouble.ts";
import { adaptToRefusal, repairRefusedHistory, type RouteCall } from "./_refusals.ts";
import { lastReplyWasFenced, type RouteMode, routeMode } from "./_route_mode.ts";
import type { ToolCall } from "./_tool_calls.ts";
import { planRoute } from "./_turn_hooks.ts";
import { NO_TURN_HEALTH } from "./_turn_health.ts";
import type { TurnScope } from "./_turn_scope.ts";
import type { TurnResult } from "./_turn_types.ts";

/** A reply the turn goes on with: its calls (none: a reply of text only) and its text. */
export interface Reply {
  calls: ToolCall[];
  text: string;
  /** The route's mode the reply was asked under. */
  mode: RouteMode;
}

/** What the model is told when its workbench was replaced since its last reply. */
const HEAP_RESET =
  "[runtime] your workbench was restarted since your last step: variables and imports are gone.";

/**
 * Whether the session's newest kernel generation started after the model's last reply and is
 * newer than the one its last cell ran in: the heap the model built is gone, and its next
 * request says so, once. A session that never ran a cell has lost nothing.
 */
function heapResetSinceReply(store: Store, session: string): boolean {
  const last = lastEventOfKinds(store, session, ["kernel.reset", "model.reply"]);
  if (last?.kind !== "kernel.reset") return false;
  const cell = lastEventOfKinds(store, session, ["cell.started"])?.body as
    | { generation?: number }
    | undefined;
  const reset = (last.body as { generation?: number }).generation;
  return cell?.generation !== undefined && reset !== undefined && reset > cell.generation;
}

function lastItemText(store: Store, session: string): unknown {
  return getProviderItem(store, session, lastItemIdx(store, session))?.message.content;
}

/** What the model is told when its reply ended inside a tool call. */
const CUT_IN_CALL =
  "[not run: your reply hit the token limit in the middle of the call; write a shorter cell]";

/**
 * One model request and its durable reply.
 *
 * @returns the reply's calls, or the failed result that ends the turn
 */
export async function requestStep(
  scope: TurnScope,
  opening: Record<string, unknown> | null,
): Promise<Reply | TurnResult> {
  const { options, ctx, state } = scope;
  const { session } = ctx;
  if (heapResetSinceReply(options.store, session)) {
    if (opening !== null) opening = { ...opening, content: `${HEAP_RESET}\n\n${opening.content}` };
    else if (lastItemText(options.store, session) !== HEAP_RESET) {
      appendProviderItems(options.store, session, ctx.frame.id, [{
        role: "user",
        content: HEAP_RESET,
      }]);
    }
  }
  // The route comes first: its budget sizes the request (and may compact the context).
  const route = await planRoute(options, session);
  const provider = options.provider(route);
  let adapted = false;
  let repaired = false;
  for (;;) {
    const mode = routeMode(options.store, session, provider.route);
    const request = await prepareContext(options, session, opening ? [opening] : [], {
      route,
      signal: ctx.signal,
      shape: mode.shape,
      frameId: ctx.frame.id,
      maxSteps: options.maxSteps ?? mode.maxSteps,
    });
    const streamed = await streamReply(scope, { route, provider, mode }, request.messages);
    if ("error" in streamed) {
      if (!adapted && adaptToRefusal(scope, { route, provider, mode }, streamed)) {
        adapted = true;
        continue;
      }
      if (!repaired && await repairRefusedHistory(scope, streamed)) {
        repaired = true;
        continue;
      }
      return await modelFailed(scope, { route, provider, ...streamed });
    }
    const { turn } = streamed;
    noteUsage(options, session, { route, request, usage: turn.usage });
    const calls = callsOf(scope, { route, mode }, turn);
    const pad = turn.text === "" ? null : await scratchpadBody(scope, turn.text, turn.textPartial);
    commitReply(scope, opening, { route, provider, turn, calls, pad });
    // The reply is in the sequence now: a retry goes on from it, never repeats the inputs.
    state.effects = true;
    return { calls, text: turn.text, mode };
  }
}

/** Streams one reply, its text deltas to the bus; a failure is returned with its message. */
async function streamReply(
  scope: TurnScope,
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
        // Reasoning and tool-call text are progress too; only text animates the scratchpad.
        if (delta.type !== "text") return;
        options.bus.emit(session, { kind: "token", session, turn: frame.id, text: delta.text });
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
 * strictly native, the first fenced python cell of a reply that has none.
 */
function callsOf(
  scope: TurnScope,
  call: { route: string; mode: RouteMode },
  turn: ProviderTurn,
): ToolCall[] {
  if (turn.toolCalls.length > 0) {
    const last = turn.toolCalls.length - 1;
    return turn.toolCalls.map((raw, i) => ({
      ...raw,
      id: newId("call"),
      // The token limit cut the reply inside its last call: that call is not run.
      ...(turn.cutInToolCall && i === last ? { refusal: CUT_IN_CALL } : {}),
    }));
  }
  if (call.mode.toolCalls === "native") return [];
  const fenced = fencedCells(turn.text);
  if (fenced.code === null) return [];
  const { store } = scope.options;
  const { session } = scope.ctx;
  if (call.mode.shape.toolMode === "native" && lastReplyWasFenced(store, session, call.route)) {
    scope.record("route.adapted", {
      route: call.route,
      setting: "tool_calls",
      to: "text",
      reason: "the model answered twice in a row with a fenced python cell and no tool call",
    });
  }
  const notes = fenced.ignored > 0
    ? [`[runtime] only the first python block of a reply runs; ${fenced.ignored} more did not.`]
    : [];
  return [{
    id: newId("call"),
    name: "python",
    arguments: JSON.stringify({ code: fenced.code }),
    textCell: true,
    notes,
  }];
}

/** Records what a failed request leaves (its partial text, the turn's end) and how it ended. */
async function modelFailed(
  scope: TurnScope,
  failure: { route: string; provider: Provider; error: unknown; message: string },
): Promise<TurnResult> {
  const { ctx, record, state } = scope;
  const { frame } = ctx;
  const { route, provider, error, message } = failure;
  // The provider's failure (the error's cause) carries what streamed before it.
  const partial = (error as { cause?: { partial?: Partial<ProviderTurn> } }).cause?.partial;
  if (partial?.reasoning) {
    const { field, text } = partial.reasoning;
    record("reasoning", { frame_id: frame.id, text, field, partial: true });
  }
  if (partial?.text) record("scratchpad", await scratchpadBody(scope, partial.text, true));
  if (ctx.signal.aborted) {
    const reason = stopReason(ctx.signal);
    record("turn.ended", { frame_id: frame.id, reason });
    return { ok: false, reason, effects: state.effects };
  }
  record("turn.ended", { frame_id: frame.id, reason: `model failed: ${message}` });
  return {
    ok: false,
    reason: `model failed: ${message}`,
    effects: state.effects,
    retriable: true,
    model: {
      route,
      url: shownUrl(provider.route.url),
      model: provider.route.model,
      error: message,
      ...modelFailureFacts(error),
    },
  };
}

/**
 * The scratchpad record of a reply's text: the text itself, or past
 * {@linkcode SCRATCHPAD_SPOOL_ABOVE_CHARS} characters an excerpt naming the artifact that holds
 * the whole text (written before the record, so the record never names a missing artifact).
 */
async function scratchpadBody(
  scope: TurnScope,
  text: string,
  partial: boolean,
): Promise<RecordInput<"scratchpad">> {
  const { options, ctx } = scope;
  const health = options.health ?? NO_TURN_HEALTH;
  const kept = await spoolLongText(options.store.stateDir, text, {
    above: SCRATCHPAD_SPOOL_ABOVE_CHARS,
    noun: "text",
    budgetBytes: options.artifactBytes,
    report: (error) => health.artifactWrite(error),
  });
  return {
    frame_id: ctx.frame.id,
    text: kept.text,
    partial,
    ...(kept.artifact === undefined ? {} : { text_artifact: { ...kept.artifact } }),
    ...(kept.artifactError === undefined ? {} : { text_artifact_error: kept.artifactError }),
  };
}

/** The reply, its `model.reply` record and its scratchpad, in one transaction, before any cell. */
function commitReply(
  scope: TurnScope,
  opening: Record<string, unknown> | null,
  reply: {
    route: string;
    provider: Provider;
    turn: ProviderTurn;
    calls: ToolCall[];
    pad: RecordInput<"scratchpad"> | null;
  },
): void {
  const { options, ctx } = scope;
  const { session, frame } = ctx;
  const { turn, calls, pad } = reply;
  options.store.transaction(() => {
    // Every reply's route, model and usage is recorded, also a reply with no text.
    appendEvent(options.store, session, "model.reply", replyRecord(frame.id, reply));
    appendProviderItems(options.store, session, frame.id, [
      ...(opening ? [opening] : []),
      // Reasoning is kept under the server's own field; the route's shape decides what goes back.
      assistantMessage(turn.text, calls, { reasoning: turn.reasoning }),
    ]);
    if (turn.reasoning !== null) {
      appendEvent(options.store, session, "reasoning", {
        frame_id: frame.id,
        text: turn.reasoning.text,
        field: turn.reasoning.field,
      });
    }
    if (pad !== null) {
      appendEvent(options.store, session, "scratchpad", { ...pad, usage: turn.usage });
    }
  });
}

/** The `model.reply` body of one reply: counts the provider did not report stay absent. */
function replyRecord(
  frameId: string,
  reply: { route: string; provider: Provider; turn: ProviderTurn; calls: ToolCall[] },
): RecordInput<"model.reply"> {
  const { route, provider, turn, calls } = reply;
  const u = turn.usage;
  const usage = Object.fromEntries(
    Object.entries({
      prompt_tokens: u.promptTokens,
      completion_tokens: u.completionTokens,
      cache_read_tokens: u.cacheReadTokens,
      cache_write_tokens: u.cacheWriteTokens,
    }).filter(([, value]) => value !== undefined),
  );
  // A test's provider may carry no route; the record then names the route only.
  const described = provider.route as Provider["route"] | undefined;
  return {
    frame_id: frameId,
    route,
    ...(described === undefined ? {} : { model: described.model, url: described.url }),
    usage,
    finish_reason: turn.finishReason,
    tool_calls: turn.toolCalls.length,
    text_chars: turn.text.length,
    ...(calls.some((call) => call.textCell) ? { text_cell: true } : {}),
  };
}

/** Why a turn was stopped, from its abort signal: the operator, or a signal's shutdown. */
export function stopReason(signal: AbortSignal): string {
  const why = signal.reason instanceof Error ? signal.reason.message : String(signal.reason ?? "");
  return why ? `stopped: ${why}` : "stopped by the operator";
}
