/**
 * The model turn: one turn of the agent for one accepted frame.
 *
 * The model sees one tool, a Python cell. Each assistant message (scratchpad text and tool
 * calls with their ids) is persisted before any cell runs; each cell's outcome is written
 * before its result is given back to the model. Assistant text is scratchpad, never speech:
 * only `local.send` from a cell reaches the conversation. `wait()` ends the cell and the turn.
 *
 * @module
 */

import { appendEvent, countFrameEvents } from "../../store/events.ts";
import { appendProviderItems } from "../../store/provider_items.ts";
import { requireSession } from "../../store/sessions.ts";
import {
  DEFAULT_CELL_TIMEOUT_MS,
  faultPoint,
  newId,
  type RecordInput,
  type RecordType,
} from "../core/mod.ts";
import {
  assistantMessage,
  modelFailureFacts,
  type Provider,
  type ProviderTurn,
} from "../model/mod.ts";
import { type ContextDeps, noteUsage, prepareContext, renderInputs } from "./_context.ts";
import type { TurnContext, TurnResult } from "./_turn_types.ts";
import { runToolCalls, type ToolCall, type ToolCallDeps } from "./_tool_calls.ts";
import { decideNext, planRoute } from "./_turn_hooks.ts";
import { NO_TURN_HEALTH, type TurnHealth } from "./_turn_health.ts";
import { shownUrl } from "./_model_trouble.ts";

/** Options for {@linkcode createModelTurn}. */
export interface ModelTurnOptions
  extends ContextDeps, Omit<ToolCallDeps, "cellTimeoutMs" | "health"> {
  /** Model requests per turn at most. @default {16} */
  maxSteps?: number;
  /**
   * How long one cell may run before it is cancelled (then killed): a cell never holds the
   * agent forever. @default {DEFAULT_CELL_TIMEOUT_MS}
   */
  cellTimeoutMs?: number;
  /** Where model calls and artifact writes are reported for `/health`. */
  health?: TurnHealth;
}

/** A turn step's view of the turn: its options, context, record writer and effects so far. */
interface TurnScope {
  options: ModelTurnOptions;
  ctx: TurnContext;
  /** Appends a record and returns its seq. */
  record: <T extends RecordType>(type: T, body: RecordInput<T>) => number;
  state: { effects: boolean };
}

/**
 * Builds the turn runner that drives the model for each frame. It never rejects: a failure is
 * a `failed` result saying whether the turn had effects (anything persisted: a model reply, a
 * cell) and whether it may be retried from the persisted sequence (a failed model request).
 *
 * @example
 * ```ts
 * const turn = createModelTurn({ store, bus, kernel, provider, hooks, system, log });
 * const runtime = new SessionRuntime({ ..., turn });
 * ```
 */
export function createModelTurn(
  options: ModelTurnOptions,
): (ctx: TurnContext) => Promise<TurnResult> {
  return async (ctx) => {
    // A continued turn's earlier attempt already left its mark in the sequence.
    const state = { effects: ctx.resumed };
    const record = <T extends RecordType>(type: T, body: RecordInput<T>) => {
      const seq = appendEvent(options.store, ctx.session, type, body);
      options.bus.wake(ctx.session);
      return seq;
    };
    try {
      return await runTurn({ options, ctx, record, state });
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      return { ok: false, reason, effects: state.effects };
    }
  };
}

async function runTurn(scope: TurnScope): Promise<TurnResult> {
  const { options, ctx, record, state } = scope;
  const { frame, session } = ctx;
  const maxSteps = options.maxSteps ?? 16;
  // What the turn opens with is sent with each request but written only together with the
  // first reply: a turn that fails before the model answers leaves nothing in the sequence, so
  // its retry does not repeat the inputs. A continued turn opens with nothing new: it goes on
  // from the persisted sequence (recovery has appended what it needs to know).
  let opening: Record<string, unknown> | null = ctx.resumed
    ? null
    : renderInputs(options, session, ctx.inputs);
  // A record of progress, not a guarantee: it commits with the turn's next write (the reply).
  const started = {
    frame_id: frame.id,
    frame: frame.number,
    resumed: ctx.resumed,
    ...(ctx.attempt ? { attempt: ctx.attempt } : {}),
  };
  options.store.defer(() => void appendEvent(options.store, session, "turn.started", started));
  // This turn's sends are the frame's sends after the head as it began: turn.started, committed
  // with the next write, takes a later seq than that head and an earlier one than any send.
  const progress = { started: requireSession(options.store, session).nextSeq - 1, reminders: 0 };
  for (let step = 0; step < maxSteps; step++) {
    const reply = await requestStep(scope, opening);
    opening = null;
    if (!("calls" in reply)) return reply;
    if (reply.calls.length === 0) {
      const ended = await askNext(scope, reply.text, progress);
      if (ended !== null) return ended;
      continue;
    }
    const { waited } = await runToolCalls(
      {
        ...options,
        cellTimeoutMs: options.cellTimeoutMs ?? DEFAULT_CELL_TIMEOUT_MS,
        health: options.health ?? NO_TURN_HEALTH,
      },
      ctx,
      reply.calls,
      state,
    );
    if (ctx.signal.aborted) {
      const reason = stopReason(ctx.signal);
      record("turn.ended", { frame_id: frame.id, reason });
      return { ok: false, reason, effects: state.effects };
    }
    if (waited !== undefined) {
      // The wait is durable (its cell's outcome and tool result); the turn has not ended yet.
      faultPoint("wait-before-wake");
      // Commits with the frame's end, which follows at once.
      const ended = { frame_id: frame.id, reason: "wait", wait_reason: waited };
      options.store.defer(() => void appendEvent(options.store, session, "turn.ended", ended));
      return { ok: true, reason: "wait", effects: state.effects };
    }
  }
  record("turn.ended", { frame_id: frame.id, reason: `step limit ${maxSteps}` });
  return { ok: true, reason: `step limit ${maxSteps}`, effects: state.effects };
}

/**
 * After a reply without tool calls, asks `turn.next`: returns the turn's result when it ends
 * there, else `null` with the next request's nudge appended — the hook's reminder (recorded
 * as `turn.reminded`) or the plain "continue".
 */
async function askNext(
  scope: TurnScope,
  text: string,
  progress: { started: number; reminders: number },
): Promise<TurnResult | null> {
  const { options, ctx, record, state } = scope;
  const { frame, session } = ctx;
  const next = await decideNext(options, session, {
    consumed_local: ctx.inputs.some((input) => input.sourceKind === "local"),
    replied_with_text: text !== "",
    sent: countFrameEvents(options.store, session, "send", frame.id, progress.started),
    reminders: progress.reminders,
  });
  if (next.action !== "continue") {
    record("turn.ended", { frame_id: frame.id, reason: `turn.next: ${next.action}` });
    return { ok: true, reason: `turn.next: ${next.action}`, effects: state.effects };
  }
  if (next.reminder !== undefined) {
    progress.reminders++;
    record("turn.reminded", { frame_id: frame.id, reminder: next.reminder });
  }
  appendProviderItems(options.store, session, frame.id, [{
    role: "user",
    content: next.reminder ??
      "[runtime] continue: call the python tool, or wait() when you are done.",
  }]);
  return null;
}

/**
 * One model request: the context, the route, the streamed reply, then the complete assistant
 * block (with host-minted tool-call ids) made durable before any of its cells runs.
 *
 * @returns the reply's tool calls, or the failed result that ends the turn
 */
async function requestStep(
  scope: TurnScope,
  opening: Record<string, unknown> | null,
): Promise<{ calls: ToolCall[]; text: string } | TurnResult> {
  const { options, ctx, state } = scope;
  const { session } = ctx;
  // The route comes first: its budget sizes the request (and may compact the context).
  const route = await planRoute(options, session);
  const request = await prepareContext(options, session, opening ? [opening] : [], {
    route,
    signal: ctx.signal,
  });
  const provider = options.provider(route);
  const streamed = await streamReply(scope, route, provider, request.messages);
  if ("failed" in streamed) return streamed.failed;
  const { turn } = streamed;
  noteUsage(options, session, { route, request, usage: turn.usage });
  // Tool-call ids are minted here: some providers repeat ids across responses, and a
  // session's sequence needs each id once.
  const calls = turn.toolCalls.map((call) => ({ ...call, id: newId("call") as string }));
  commitReply(scope, opening, { route, provider, turn, calls });
  options.bus.wake(session);
  // The reply is in the sequence now: a retry goes on from it, never repeats the inputs.
  state.effects = true;
  return { calls, text: turn.text };
}

/** Streams one reply, its text deltas to the bus; a failure becomes the result ending the turn. */
async function streamReply(
  scope: TurnScope,
  route: string,
  provider: Provider,
  messages: Parameters<Provider["streamChat"]>[0]["messages"],
): Promise<{ turn: ProviderTurn } | { failed: TurnResult }> {
  const { options, ctx } = scope;
  const { session, frame } = ctx;
  const report = (options.health ?? NO_TURN_HEALTH).modelCall(route);
  try {
    const turn = await provider.streamChat({ messages }, {
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
    if (!ctx.signal.aborted) report.done(`${route}: ${message}`);
    return { failed: modelFailed(scope, { route, provider, error, message }) };
  }
}

/** Records what a failed request leaves (its partial text, the turn's end) and how it ended. */
function modelFailed(
  scope: TurnScope,
  failure: { route: string; provider: Provider; error: unknown; message: string },
): TurnResult {
  const { ctx, record, state } = scope;
  const { frame } = ctx;
  const { route, provider, error, message } = failure;
  // The provider's failure (the error's cause) carries the text streamed before it.
  const partial = (error as { cause?: { partial?: { text: string } } }).cause?.partial;
  if (partial?.text) {
    record("scratchpad", { frame_id: frame.id, text: partial.text, partial: true });
  }
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

/** The reply, its `model.reply` record and its scratchpad, in one transaction, before any cell. */
function commitReply(
  scope: TurnScope,
  opening: Record<string, unknown> | null,
  reply: { route: string; provider: Provider; turn: ProviderTurn; calls: ToolCall[] },
): void {
  const { options, ctx } = scope;
  const { session, frame } = ctx;
  const { route, provider, turn, calls } = reply;
  options.store.transaction(() => {
    // Every reply's route, model and usage is recorded, also a reply with no text.
    appendEvent(
      options.store,
      session,
      "model.reply",
      replyRecord(frame.id, route, provider, turn),
    );
    appendProviderItems(options.store, session, frame.id, [
      ...(opening ? [opening] : []),
      assistantMessage(turn.text, calls),
    ]);
    if (turn.text !== "") {
      appendEvent(options.store, session, "scratchpad", {
        frame_id: frame.id,
        text: turn.text,
        partial: turn.textPartial,
        usage: turn.usage,
      });
    }
  });
}

/** The `model.reply` body of one reply: counts the provider did not report stay absent. */
function replyRecord(
  frameId: string,
  route: string,
  provider: Provider,
  turn: ProviderTurn,
): RecordInput<"model.reply"> {
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
  };
}

/** Why a turn was stopped, from its abort signal: the operator, or a signal's shutdown. */
function stopReason(signal: AbortSignal): string {
  const why = signal.reason instanceof Error ? signal.reason.message : String(signal.reason ?? "");
  return why ? `stopped: ${why}` : "stopped by the operator";
}
