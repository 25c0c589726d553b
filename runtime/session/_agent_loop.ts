/**
 * The agent loop: one loop serves the agent's turn and its child agents. Each step is a request
 * step (one model request, its reply durable before any cell runs) and then a tool-call step
 * (the reply's calls run as cells, each answered once). What differs between a turn and a child
 * agent is where the steps write (their sink, `_turn_sink.ts`) and how the loop ends: its
 * {@linkcode AgentEnds}.
 *
 * @module
 */

import { requestStep, type StepScope } from "./_request_step.ts";
import type { RouteMode } from "./_route_mode.ts";
import { runToolCalls } from "./_tool_calls.ts";
import type { ToolCall, ToolCallDeps } from "./_turn_sink.ts";
import type { TurnScope } from "./_turn_scope.ts";
import type { TurnResult } from "./_turn_types.ts";

/**
 * How an agent loop ends, and what it gives back (`R`): the turn's {@linkcode TurnResult}, a
 * job's ending. Each method is called at most once a step; the one that returns a result ends
 * the loop.
 */
export interface AgentEnds<R> {
  /** Model requests the loop may make at most, under the mode of the latest reply. */
  maxSteps(mode: RouteMode): number;
  /**
   * A line added to the result of the last step's last call, telling the model the loop ends
   * after it (`null` for none).
   */
  lastStepNote(maxSteps: number): string | null;
  /** The request failed (its failure as the request step reported it). */
  failed(failure: TurnResult): R;
  /**
   * The model answered with text only, at step `step` (from 1): the loop's result, or `null`
   * to ask again (what the model is told meanwhile is for this method to append).
   */
  answered(text: string, step: number): Promise<R | null>;
  /** A cell called `wait(reason)` at step `step`: its outcome and tool result are durable. */
  waited(reason: string, step: number): R;
  /** The loop's signal was aborted while its cells ran. */
  stopped(): R;
  /** The last step ended without an answer or a wait. */
  exhausted(maxSteps: number): R;
}

/**
 * Runs the loop to one of its ends: asks the model, runs its calls, again, until `ends` says
 * it is over.
 *
 * @example
 * ```ts
 * const ending = await runAgentLoop(scope, { cells, ends: jobEnds, opening: null });
 * ```
 */
export async function runAgentLoop<R>(
  scope: TurnScope | StepScope,
  loop: {
    /** What the tool-call step needs: the kernel, the cell timeout, where cells are kept. */
    cells: ToolCallDeps;
    ends: AgentEnds<R>;
    /** What the first request opens with (the turn's inputs), or `null`. */
    opening: Record<string, unknown> | null;
  },
): Promise<R> {
  const { cells, ends } = loop;
  let opening = loop.opening;
  for (let step = 1;; step++) {
    const reply = await requestStep(scope, opening);
    opening = null;
    if (!("calls" in reply)) return ends.failed(reply);
    const maxSteps = ends.maxSteps(reply.mode);
    const last = step >= maxSteps;
    if (reply.calls.length === 0) {
      const answer = await ends.answered(reply.text, step);
      if (answer !== null) return answer;
      if (!last) continue;
    }
    if (last) noteLastStep(reply.calls, ends.lastStepNote(maxSteps));
    const { waited } = await runToolCalls(cells, scope.ctx, reply.calls, scope.state);
    if (scope.ctx.signal.aborted) return ends.stopped();
    if (waited !== undefined) return ends.waited(waited, step);
    if (last) return ends.exhausted(maxSteps);
  }
}

/** The last step's last call tells the model the loop ends after it. */
function noteLastStep(calls: ToolCall[], note: string | null): void {
  const last = calls[calls.length - 1];
  if (last !== undefined && note !== null) last.notes = [...last.notes ?? [], note];
}
