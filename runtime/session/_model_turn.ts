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

import { appendEvent, countFrameEvents, lastEventOfKinds } from "../../store/tables/events.ts";
import { appendProviderItems } from "../../store/tables/provider_items.ts";
import { requireSession } from "../../store/tables/sessions.ts";
import {
  DEFAULT_CELL_TIMEOUT_MS,
  faultPoint,
  type RecordInput,
  type RecordType,
} from "../core/mod.ts";
import { renderInputs } from "./_context.ts";
import type { TurnContext, TurnResult } from "./_turn_types.ts";
import { runToolCalls, type ToolCall } from "./_tool_calls.ts";
import { decideNext } from "./_turn_hooks.ts";
import { NO_TURN_HEALTH } from "./_turn_health.ts";
import { requestStep, stopReason } from "./_request_step.ts";
import type { ModelTurnOptions, TurnScope } from "./_turn_scope.ts";

export type { ModelTurnOptions } from "./_turn_scope.ts";

/** What the last call of a turn's last step is told. */
function stepLimitNote(maxSteps: number): string {
  return `[runtime] this turn reached its limit of ${maxSteps} model steps and ends after this ` +
    "cell; the person is told that you stopped. Say what is left in a local.send if it matters.";
}

/** The turn's end reason when it ran out of steps; the next turn's opening names it. */
const STEP_LIMIT = "step limit";

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
  return function modelTurn(ctx: TurnContext): Promise<TurnResult> {
    return runModelTurn(options, ctx);
  };
}

/**
 * Runs one model turn for `ctx.frame` (what {@linkcode createModelTurn}'s runner does). It
 * never rejects: a failure is a `failed` result.
 */
export async function runModelTurn(
  options: ModelTurnOptions,
  ctx: TurnContext,
): Promise<TurnResult> {
  // A continued turn's earlier attempt already left its mark in the sequence.
  const state = { effects: ctx.resumed };
  function record<T extends RecordType>(type: T, body: RecordInput<T>): number {
    return appendEvent(options.store, ctx.session, type, body);
  }
  try {
    return await runTurn({ options, ctx, record, state });
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    return { ok: false, reason, effects: state.effects };
  }
}

async function runTurn(scope: TurnScope): Promise<TurnResult> {
  const { options, ctx, record, state } = scope;
  const { frame, session } = ctx;
  // What the turn opens with is sent with each request but written only together with the
  // first reply: a turn that fails before the model answers leaves nothing in the sequence, so
  // its retry does not repeat the inputs. A continued turn opens with nothing new: it goes on
  // from the persisted sequence (recovery has appended what it needs to know).
  let opening: Record<string, unknown> | null = ctx.resumed ? null : openingOf(scope);
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
  for (let step = 0;; step++) {
    const reply = await requestStep(scope, opening);
    opening = null;
    if (!("calls" in reply)) return reply;
    const maxSteps = options.maxSteps ?? reply.mode.maxSteps;
    const last = step + 1 >= maxSteps;
    if (reply.calls.length === 0) {
      const ended = await askNext(scope, reply.text, progress);
      if (ended !== null) return ended;
      if (!last) continue;
    }
    if (last) noteStepLimit(reply.calls, maxSteps);
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
    if (last) {
      const reason = `${STEP_LIMIT} ${maxSteps}`;
      record("turn.ended", { frame_id: frame.id, reason, step_limit: maxSteps });
      return { ok: true, reason, effects: state.effects };
    }
  }
}

/** The last step's last call tells the model the turn ends after it. */
function noteStepLimit(calls: ToolCall[], maxSteps: number): void {
  const last = calls[calls.length - 1];
  if (last !== undefined) last.notes = [...last.notes ?? [], stepLimitNote(maxSteps)];
}

/**
 * The turn's opening message: its inputs, after a line saying the previous turn was cut at
 * its step limit when it was.
 */
function openingOf(scope: TurnScope): Record<string, unknown> {
  const { options, ctx } = scope;
  const opening = renderInputs(options, ctx.session, ctx.inputs);
  const previous = lastEventOfKinds(options.store, ctx.session, ["turn.ended"])?.body as
    | RecordInput<"turn.ended">
    | undefined;
  if (previous?.step_limit === undefined) return opening;
  const note = `[runtime] your previous turn stopped at its limit of ${previous.step_limit} ` +
    "model steps before it finished.";
  return { ...opening, content: `${note}\n\n${opening.content}` };
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
