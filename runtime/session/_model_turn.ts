/**
 * The model turn: one turn of the agent for one accepted frame.
 *
 * The model sees one tool, a Python cell. Each assistant message (scratchpad text and tool
 * calls with their ids) is persisted before any cell runs; each cell's outcome is written with
 * its result before the model is asked again. Assistant text is scratchpad, never speech: only
 * `local.send` from a cell reaches the conversation. `wait()` ends the cell and the turn. The
 * loop is the one child agents run (`_agent_loop.ts`); a turn's ends are {@linkcode TurnEnds}.
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
import { decideNext } from "./_turn_hooks.ts";
import { NO_TURN_HEALTH } from "./_turn_health.ts";
import { type AgentEnds, runAgentLoop } from "./_agent_loop.ts";
import { stopReason } from "./_request_step.ts";
import type { RouteMode } from "./_route_mode.ts";
import type { ModelTurnOptions, TurnScope } from "./_turn_scope.ts";

/** The turn's end reason when it ran out of steps; the next turn's opening names it. */
const STEP_LIMIT = "step limit";

/**
 * Runs one model turn for `ctx.frame`. It never rejects: a failure is a `failed` result saying
 * whether the turn had effects (anything persisted: a model reply, a cell) and whether it may
 * be retried from the persisted sequence (a failed model request).
 *
 * @example
 * ```ts
 * const result = await runModelTurn({ store, bus, kernel, provider, hooks, system, log }, ctx);
 * ```
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

/** The turn on the agent loop: its opening, its `turn.started`, its cells and its ends. */
async function runTurn(scope: TurnScope): Promise<TurnResult> {
  const { options, ctx } = scope;
  const { frame, session } = ctx;
  // What the turn opens with is sent with each request but written only together with the
  // first reply: a turn that fails before the model answers leaves nothing in the sequence, so
  // its retry does not repeat the inputs. A continued turn opens with nothing new: it goes on
  // from the persisted sequence (recovery has appended what it needs to know).
  const opening = ctx.resumed ? null : openingOf(scope);
  // A record of progress, not a guarantee: it commits with the turn's next write (the reply).
  const started = {
    frame_id: frame.id,
    frame: frame.number,
    resumed: ctx.resumed,
    ...(ctx.attempt ? { attempt: ctx.attempt } : {}),
  };
  options.store.defer(() => void appendEvent(options.store, session, "turn.started", started));
  const cells = {
    ...options,
    cellTimeoutMs: options.cellTimeoutMs ?? DEFAULT_CELL_TIMEOUT_MS,
    health: options.health ?? NO_TURN_HEALTH,
  };
  return await runAgentLoop(scope, { cells, ends: new TurnEnds(scope), opening });
}

/**
 * How a turn ends: `turn.next` decides after a reply of text only, a `wait()` or the route's
 * `max_steps` ends it, and each end is a `turn.ended` record.
 */
class TurnEnds implements AgentEnds<TurnResult> {
  readonly #scope: TurnScope;
  /**
   * This turn's sends are the frame's sends after the head as it began: `turn.started`,
   * committed with the next write, takes a later seq than that head and an earlier one than any
   * send.
   */
  readonly #started: number;
  #reminders = 0;

  constructor(scope: TurnScope) {
    this.#scope = scope;
    this.#started = requireSession(scope.options.store, scope.ctx.session).nextSeq - 1;
  }

  maxSteps(mode: RouteMode): number {
    return this.#scope.options.maxSteps ?? mode.maxSteps;
  }

  lastStepNote(maxSteps: number): string {
    return `[runtime] this turn reached its limit of ${maxSteps} model steps and ends after ` +
      "this cell; the person is told that you stopped. Say what is left in a local.send if it " +
      "matters.";
  }

  failed(failure: TurnResult): TurnResult {
    return failure;
  }

  /**
   * After a reply of text only, asks `turn.next`: the turn ends there, or the next request is
   * nudged — by the hook's reminder (recorded as `turn.reminded`) or the plain "continue".
   */
  async answered(text: string): Promise<TurnResult | null> {
    const { options, ctx } = this.#scope;
    const { frame, session } = ctx;
    const next = await decideNext(options, session, {
      consumed_local: ctx.inputs.some((input) => input.sourceKind === "local"),
      replied_with_text: text !== "",
      sent: countFrameEvents(options.store, session, "send", frame.id, this.#started),
      reminders: this.#reminders,
      signal: ctx.signal,
    });
    // Stopped while turn.next ran: the turn ends as stopped, not as its fallback says.
    if (ctx.signal.aborted) return this.stopped();
    if (next.action !== "continue") return this.#ended(`turn.next: ${next.action}`);
    if (next.reminder !== undefined) {
      this.#reminders++;
      this.#scope.record("turn.reminded", { frame_id: frame.id, reminder: next.reminder });
    }
    appendProviderItems(options.store, session, frame.id, [{
      role: "user",
      content: next.reminder ??
        "[runtime] continue: call the python tool, or wait() when you are done.",
    }]);
    return null;
  }

  waited(reason: string): TurnResult {
    const { options, ctx, state } = this.#scope;
    // The wait is durable (its cell's outcome and tool result); the turn has not ended yet.
    faultPoint("wait-before-wake");
    // Commits with the frame's end, which follows at once.
    const ended = { frame_id: ctx.frame.id, reason: "wait", wait_reason: reason };
    options.store.defer(() => void appendEvent(options.store, ctx.session, "turn.ended", ended));
    return { ok: true, reason: "wait", effects: state.effects };
  }

  stopped(): TurnResult {
    const reason = stopReason(this.#scope.ctx.signal);
    this.#scope.record("turn.ended", { frame_id: this.#scope.ctx.frame.id, reason });
    return { ok: false, reason, effects: this.#scope.state.effects };
  }

  exhausted(maxSteps: number): TurnResult {
    return this.#ended(`${STEP_LIMIT} ${maxSteps}`, maxSteps);
  }

  /** Records `turn.ended` and ends the turn `ok`. */
  #ended(reason: string, stepLimit?: number): TurnResult {
    const frameId = this.#scope.ctx.frame.id;
    const limit = stepLimit === undefined ? {} : { step_limit: stepLimit };
    this.#scope.record("turn.ended", { frame_id: frameId, reason, ...limit });
    return { ok: true, reason, effects: this.#scope.state.effects };
  }
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
