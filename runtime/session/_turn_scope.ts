/**
 * A turn step's view of its turn: the turn's options, its context, the record writer and
 * whether the turn has had effects so far. The request step and the tool-call step share it.
 *
 * @module
 */

import type { RecordInput, RecordType } from "../core/mod.ts";
import type { ContextDeps } from "./_context.ts";
import type { ToolCallDeps } from "./_turn_sink.ts";
import type { TurnHealth } from "./_turn_health.ts";
import type { TurnContext } from "./_turn_types.ts";

/** Options for `runModelTurn`. */
export interface ModelTurnOptions
  extends ContextDeps, Omit<ToolCallDeps, "cellTimeoutMs" | "health"> {
  /** Model requests per turn at most; the route's `max_steps` when absent. */
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
export interface TurnScope {
  options: ModelTurnOptions;
  ctx: TurnContext;
  /** Appends a record and returns its seq. */
  record: <T extends RecordType>(type: T, body: RecordInput<T>) => number;
  state: { effects: boolean };
}
