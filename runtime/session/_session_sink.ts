/**
 * The root turn's sink: its steps write the session's durable sequence. A reply is committed
 * with its `model.reply`, reasoning and scratchpad records in one transaction before any cell
 * runs; each cell is a `cells` row before it runs, and its outcome (a spooled output indexed for
 * `history.search`) is written with its tool result, a provider item, in one transaction.
 *
 * @module
 */

import { appendEvent, lastEventOfKinds } from "../../store/tables/events.ts";
import { finishCell, openCellOfToolCall, startCell } from "../../store/tables/cells.ts";
import { effectsOfCell } from "../../store/tables/effects.ts";
import { indexArtifact } from "../../store/tables/history_index.ts";
import {
  appendProviderItems,
  getProviderItem,
  lastItemIdx,
} from "../../store/tables/provider_items.ts";
import type { Store } from "../../store/store.ts";
import type { RecordInput } from "../core/mod.ts";
import { assistantMessage, type Provider, type ProviderTurn } from "../model/mod.ts";
import { noteUsage, prepareContext } from "./_context.ts";
import {
  codeOfCall,
  keptCellResult,
  SCRATCHPAD_SPOOL_ABOVE_CHARS,
  spoolLongText,
} from "./_cell_output.ts";
import { repairRefusedHistory } from "./_refusals.ts";
import { lastReplyWasFenced } from "./_route_mode.ts";
import {
  type CellAnswer,
  type CellSink,
  type FinishedCell,
  type ReplyToCommit,
  type RequestSink,
  type ToolCall,
  type ToolCallDeps,
  WorkbenchUnavailable,
} from "./_turn_sink.ts";
import { planRoute } from "./_turn_hooks.ts";
import { NO_TURN_HEALTH } from "./_turn_health.ts";
import type { TurnScope } from "./_turn_scope.ts";
import type { TurnContext } from "./_turn_types.ts";

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

/**
 * The session's cell sink for one turn: cells in the `cells` table against the kernel's
 * generation, tool results as provider items of the turn's frame, live output on the bus.
 */
export function sessionCells(
  deps: Pick<ToolCallDeps, "store" | "bus" | "kernel">,
  ctx: TurnContext,
): CellSink {
  const { store, bus, kernel } = deps;
  const { session, frame } = ctx;
  return {
    answer(call: ToolCall, content: string): void {
      appendProviderItems(store, session, frame.id, [toolResult({ call, content })]);
    },
    async startCell(cell: { toolCallId: string; code: string }): Promise<string> {
      const { toolCallId, code } = cell;
      // The reply's first cell was started with the reply (`commitReply`).
      const started = openCellOfToolCall(store, session, toolCallId);
      if (started !== undefined) return started;
      const generation = await kernel.generation().catch((cause) => {
        throw new WorkbenchUnavailable(cause);
      });
      return startCell(store, { session, generation, frameId: frame.id, toolCallId, code }).cellId;
    },
    stream(cellId: string, name: "stdout" | "stderr", text: string): void {
      bus.emit(session, { kind: "cell.output", session, cell: cellId, name, text });
    },
    effects: (cellId: string) => effectsOfCell(store, cellId),
    finishCell(cellId: string, finished: FinishedCell, answer: CellAnswer): void {
      const { result, stdout, stderr } = finished;
      store.transaction(() => {
        // A spooled output is searchable whole (history.search), not only its excerpt.
        for (const [spooled, text] of [[stdout, result.stdout], [stderr, result.stderr]] as const) {
          if (spooled.artifact === undefined) continue;
          const { id, bytes } = spooled.artifact;
          indexArtifact(store, { session, cellId, id, bytes, text });
        }
        finishCell(store, cellId, { outcome: result.outcome, result: keptCellResult(finished) });
        appendProviderItems(store, session, frame.id, [toolResult(answer)]);
      });
    },
  };
}

/** The provider item of a call's one tool result. */
function toolResult(answer: CellAnswer): Record<string, unknown> {
  return { role: "tool", tool_call_id: answer.call.id, content: answer.content };
}

/**
 * The root turn's sink: the route from `model.plan`, the context from the session's sequence
 * (compacted, `context.prepare`, shaped), the reply committed with its records, a refused
 * history repaired from the records, and its cells as {@linkcode sessionCells} keeps them.
 */
export function sessionSink(scope: TurnScope): RequestSink {
  const { options, ctx } = scope;
  const { store } = options;
  const { session } = ctx;
  return {
    ...sessionCells(options, ctx),
    async begin(opening: Record<string, unknown> | null) {
      if (heapResetSinceReply(store, session)) {
        if (opening !== null) {
          opening = { ...opening, content: `${HEAP_RESET}\n\n${opening.content}` };
        } else if (lastItemText(store, session) !== HEAP_RESET) {
          appendProviderItems(store, session, ctx.frame.id, [{
            role: "user",
            content: HEAP_RESET,
          }]);
        }
      }
      // The route comes first: its budget sizes the request (and may compact the context).
      const route = await planRoute(options, session, { signal: ctx.signal });
      return { route, provider: options.provider(route), opening };
    },
    context(opening, request) {
      return prepareContext(options, session, opening ? [opening] : [], {
        route: request.route,
        signal: request.signal,
        shape: request.mode.shape,
        frameId: ctx.frame.id,
        maxSteps: options.maxSteps ?? request.mode.maxSteps,
        contextTokens: request.mode.contextTokens,
      });
    },
    async commitReply(opening, reply) {
      noteUsage(options, session, { ...reply, usage: reply.turn.usage });
      const text = reply.turn.text;
      const pad = text === "" ? null : await scratchpadBody(scope, text, reply.turn.textPartial);
      const first = await firstCell(scope, reply.calls);
      commitReply(scope, opening, { ...reply, pad, first });
    },
    repair: (failure) => repairRefusedHistory(scope, failure),
    lastReplyFenced: (route) => lastReplyWasFenced(store, session, route),
    async partial(partial) {
      if (partial.reasoning) {
        const { field, text } = partial.reasoning;
        scope.record("reasoning", { frame_id: ctx.frame.id, text, field, partial: true });
      }
      if (partial.text) scope.record("scratchpad", await scratchpadBody(scope, partial.text, true));
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

/** The reply's first cell, as it starts with the reply. */
interface FirstCell {
  toolCallId: string;
  code: string;
  /** The kernel generation it runs in. */
  generation: number;
}

/**
 * The cell the reply's first call runs, when it runs one (its code parses, it was not cut), with
 * the generation it will run in: it starts in the reply's commit. A workbench that cannot start
 * now starts none here: the reply is committed alone, and the cell's own start meets the failure
 * as it always did.
 */
async function firstCell(scope: TurnScope, calls: ToolCall[]): Promise<FirstCell | undefined> {
  const call = calls[0];
  const code = call === undefined ? undefined : codeOfCall(call);
  if (typeof code !== "string") return undefined;
  try {
    const generation = await scope.options.kernel.generation();
    return { toolCallId: call.id, code, generation };
  } catch {
    return undefined;
  }
}

/**
 * The reply, its `model.reply` record, its scratchpad and the start of its first cell, in one
 * transaction, before any cell runs: a restart finds either none of them or all, and never runs
 * a cell it does not know began.
 */
function commitReply(
  scope: TurnScope,
  opening: Record<string, unknown> | null,
  reply: ReplyToCommit & { pad: RecordInput<"scratchpad"> | null; first?: FirstCell },
): void {
  const { options, ctx } = scope;
  const { session, frame } = ctx;
  const { turn, calls, pad, first } = reply;
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
    // A turn stopped meanwhile runs no cell: its calls are answered "not run".
    if (first !== undefined && !ctx.signal.aborted) {
      startCell(options.store, { session, frameId: frame.id, ...first });
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
