/**
 * The model loop: one turn of the agent for one accepted frame.
 *
 * The model sees one tool, a Python cell. Each assistant message (scratchpad text and tool
 * calls with their ids) is persisted before any cell runs; each cell's outcome is written
 * before its result is given back to the model. Assistant text is scratchpad, never speech:
 * only `local.send` from a cell reaches the conversation. `wait()` ends the cell and the turn.
 *
 * @module
 */

import { appendEvent } from "../../store/events.ts";
import { finishCell, startCell } from "../../store/cells.ts";
import type { InputRecord } from "../../store/inputs.ts";
import { appendProviderItems, readProviderItems } from "../../store/provider_items.ts";
import { type ArtifactRef, spoolArtifact } from "../../store/artifacts.ts";
import { compactContext, latestSummary } from "../../store/context_summaries.ts";
import type { Store } from "../../store/store.ts";
import type { CellResult } from "../kernel/mod.ts";
import { newId } from "../core/mod.ts";
import type { HookResult } from "../behavior/mod.ts";
import type { HookName } from "../core/mod.ts";
import type { EventBus } from "../core/mod.ts";
import type { ChatMessage, Provider } from "../model/mod.ts";
import type { HookCaller, TurnContext, TurnEnd } from "./_session_runtime.ts";
import type { Logger } from "../core/mod.ts";

/** The session's kernel as the loop uses it. */
export interface TurnKernel {
  /** The running generation; cells are recorded against it. */
  generation(): Promise<number>;
  /** Runs one cell; resolves with its outcome, never rejects for what the cell did. */
  execute(
    cellId: string,
    code: string,
    options: {
      signal: AbortSignal;
      timeoutMs: number;
      onStream: (name: "stdout" | "stderr", text: string) => void;
    },
  ): Promise<CellResult>;
}

/** Options for {@linkcode createModelTurn}. */
export interface ModelTurnOptions {
  store: Store;
  bus: EventBus;
  kernel: TurnKernel;
  /** Returns the provider for a route name (`main`, `fast`, `long`). */
  provider: (route: string) => Provider;
  hooks: () => HookCaller;
  /** The contract message the model reads first. */
  system: () => string;
  /** Model requests per turn at most. @default {16} */
  maxSteps?: number;
  /**
   * How long one cell may run before it is cancelled (then killed): a cell never holds the
   * agent forever. @default {600_000}
   */
  cellTimeoutMs?: number;
  /** Provider items kept in a request at most (older ones are left out whole). @default {200} */
  maxItems?: number;
  /** Uncovered provider items above which a turn compacts the context first. @default {150} */
  compactAboveItems?: number;
  /** Items a compaction keeps whole after its cut. @default {60} */
  keepItemsAfterCompaction?: number;
  log: Logger;
}

/** An error that says whether the turn had effects before it failed. */
class TurnFailure extends Error {
  constructor(message: string, readonly effects: boolean, options?: ErrorOptions) {
    super(message, options);
  }
}

const MAX_RESULT_CHARS = 20_000;

/** What a continued turn's model reads where a new turn reads its inputs. */
const RESUMED_NOTE = {
  role: "user",
  content: "[runtime] the daemon restarted during this turn. Cells that had not finished were " +
    "interrupted and not run again; their results say so. Continue the turn: anything you " +
    "already sent was delivered.",
};

/**
 * Builds the {@linkcode TurnRunner} that drives the model for each frame.
 *
 * @example
 * ```ts
 * const turn = createModelTurn({ store, bus, kernel, provider, hooks, system, log });
 * const runtime = new SessionRuntime({ ..., turn });
 * ```
 */
export function createModelTurn(options: ModelTurnOptions): (ctx: TurnContext) => Promise<TurnEnd> {
  const maxSteps = options.maxSteps ?? 16;
  return async (ctx) => {
    const state = { effects: false };
    try {
      return await runTurn(options, ctx, state, maxSteps);
    } catch (error) {
      if (error instanceof TurnFailure) throw error;
      const message = error instanceof Error ? error.message : String(error);
      throw new TurnFailure(message, state.effects, { cause: error });
    }
  };
}

async function runTurn(
  options: ModelTurnOptions,
  ctx: TurnContext,
  state: { effects: boolean },
  maxSteps: number,
): Promise<TurnEnd> {
  const { store, bus, kernel } = options;
  const { session, frame } = ctx;
  const record = (kind: string, body: Record<string, unknown>) => {
    appendEvent(store, session, kind, body);
    bus.wake(session);
  };
  // What the turn opens with is sent with each request but written only together with the
  // first reply: a turn that fails before the model answers leaves nothing in the sequence, so
  // its retry does not repeat the inputs.
  let opening: Record<string, unknown> | null = ctx.resumed
    ? RESUMED_NOTE
    : renderInputs(ctx.inputs);
  record("turn.started", { frame_id: frame.id, frame: frame.number, resumed: ctx.resumed });
  // A long sequence is compacted before it is sent: no model, and nothing is deleted.
  const uncovered = readProviderItems(
    store,
    session,
    latestSummary(store, session)?.coversToIdx ?? 0,
  );
  if (uncovered.length > (options.compactAboveItems ?? 150)) {
    if (compactContext(store, session, { keepItems: options.keepItemsAfterCompaction ?? 60 })) {
      bus.wake(session);
    }
  }
  for (let step = 0; step < maxSteps; step++) {
    const messages = await prepareContext(options, session, opening ? [opening] : []);
    const route = await planRoute(options, session);
    let turn;
    try {
      turn = await options.provider(route).streamChat({ messages }, {
        signal: ctx.signal,
        onDelta: (delta) =>
          bus.emit(session, { kind: "token", session, turn: frame.id, text: delta.text }),
      });
    } catch (error) {
      const partial = (error as { cause?: { partial?: { text: string } } }).cause?.partial;
      if (partial?.text) {
        record("scratchpad", { frame_id: frame.id, text: partial.text, partial: true });
      }
      const message = error instanceof Error ? error.message : String(error);
      record("turn.ended", { frame_id: frame.id, reason: `model failed: ${message}` });
      throw new TurnFailure(`model failed: ${message}`, state.effects, { cause: error });
    }
    // Tool-call ids are minted here: some providers repeat ids across responses, and a
    // session's sequence needs each id once.
    const calls = turn.toolCalls.map((call) => ({ ...call, id: newId("call") as string }));
    const toolCalls = calls.map((call) => ({
      id: call.id,
      type: "function" as const,
      function: { name: call.name, arguments: call.arguments },
    }));
    // The complete assistant block, with its tool-call ids, is durable before any cell runs.
    appendProviderItems(store, session, frame.id, [...(opening ? [opening] : []), {
      role: "assistant",
      content: turn.text === "" ? null : turn.text,
      ...(toolCalls.length ? { tool_calls: toolCalls } : {}),
    }]);
    opening = null;
    if (turn.text !== "") {
      record("scratchpad", {
        frame_id: frame.id,
        text: turn.text,
        partial: turn.textPartial,
        usage: turn.usage,
      });
    }
    if (toolCalls.length === 0) {
      const next = await decideNext(options, session);
      if (next !== "continue") {
        record("turn.ended", { frame_id: frame.id, reason: `turn.next: ${next}` });
        return { reason: `turn.next: ${next}`, effects: state.effects };
      }
      appendProviderItems(store, session, frame.id, [{
        role: "user",
        content: "[runtime] continue: call the python tool, or wait() when you are done.",
      }]);
      continue;
    }
    let waited: string | undefined;
    for (const call of calls) {
      if (waited !== undefined || ctx.signal.aborted) {
        appendProviderItems(store, session, frame.id, [{
          role: "tool",
          tool_call_id: call.id,
          content: waited !== undefined
            ? "[not run: the turn ended with wait()]"
            : "[not run: the operator stopped the turn]",
        }]);
        continue;
      }
      const code = parseCode(call.name, call.arguments);
      if (typeof code !== "string") {
        appendProviderItems(store, session, frame.id, [{
          role: "tool",
          tool_call_id: call.id,
          content: code.error,
        }]);
        continue;
      }
      const generation = await kernel.generation();
      const { cellId } = startCell(store, {
        session,
        generation,
        frameId: frame.id,
        toolCallId: call.id,
        code,
      });
      bus.wake(session);
      state.effects = true;
      const result = await kernel.execute(cellId, code, {
        signal: ctx.signal,
        timeoutMs: options.cellTimeoutMs ?? 600_000,
        onStream: (name, text) =>
          bus.emit(session, { kind: "cell.output", session, cell: cellId, name, text }),
      });
      // Long output is spooled whole to an artifact; records and the model get an excerpt
      // that names it, so nothing printed is discarded and no record is huge.
      const stdout = await spoolLongText(store.stateDir, result.stdout);
      const stderr = await spoolLongText(store.stateDir, result.stderr);
      const shown = { ...result, stdout: stdout.text, stderr: stderr.text };
      // The outcome is durable before the model (or anyone) is told about it.
      finishCell(store, cellId, {
        outcome: result.outcome,
        result: {
          value: result.value,
          stdout: stdout.text,
          stderr: stderr.text,
          ...(stdout.artifact ? { stdout_artifact: stdout.artifact } : {}),
          ...(stderr.artifact ? { stderr_artifact: stderr.artifact } : {}),
          error: result.error,
          wait: result.wait,
          duration_ms: Math.round(result.duration_ms),
        },
      });
      appendProviderItems(store, session, frame.id, [{
        role: "tool",
        tool_call_id: call.id,
        content: renderCellResult(shown),
      }]);
      bus.wake(session);
      if (result.wait !== null) waited = result.wait.reason;
    }
    if (ctx.signal.aborted) {
      record("turn.ended", { frame_id: frame.id, reason: "stopped by the operator" });
      throw new TurnFailure("stopped by the operator", state.effects);
    }
    if (waited !== undefined) {
      record("turn.ended", { frame_id: frame.id, reason: "wait", wait_reason: waited });
      return { reason: "wait", effects: state.effects };
    }
  }
  record("turn.ended", { frame_id: frame.id, reason: `step limit ${maxSteps}` });
  return { reason: `step limit ${maxSteps}`, effects: state.effects };
}

function renderInputs(inputs: InputRecord[]): Record<string, unknown> {
  const lines = inputs.map((input) => {
    const body = typeof input.body === "string" ? input.body : JSON.stringify(input.body);
    return `[input ${input.id} from ${input.author} in ${input.conversationId}]\n${body}`;
  });
  return { role: "user", content: lines.join("\n\n") };
}

function parseCode(name: string, args: string): string | { error: string } {
  if (name !== "python") {
    return { error: `[not run: there is one tool, python (got ${JSON.stringify(name)})]` };
  }
  try {
    const parsed = JSON.parse(args);
    if (typeof parsed?.code === "string") return parsed.code;
  } catch { /* reported below */ }
  return { error: `[not run: arguments must be JSON {"code": "..."} (got ${args.slice(0, 200)})]` };
}

/** Output longer than this many characters is spooled to an artifact. */
const SPOOL_ABOVE_CHARS = 8_192;

/** Keeps `text` when short; otherwise spools it whole and returns its head, tail and id. */
async function spoolLongText(
  stateDir: string,
  text: string,
): Promise<{ text: string; artifact?: ArtifactRef }> {
  if (text.length <= SPOOL_ABOVE_CHARS) return { text };
  const artifact = await spoolArtifact(stateDir, new TextEncoder().encode(text));
  const head = text.slice(0, 4_000);
  const tail = text.slice(-2_000);
  return {
    text: `${head}\n[… ${text.length - 6_000} characters not shown; the whole output is ` +
      `${artifact.bytes} bytes in artifact ${artifact.id} …]\n${tail}`,
    artifact,
  };
}

function renderCellResult(result: CellResult): string {
  const parts = [`outcome: ${result.outcome}`];
  if (result.stdout) parts.push(`stdout:\n${result.stdout}`);
  if (result.stderr) parts.push(`stderr:\n${result.stderr}`);
  if (result.value !== null) parts.push(`value: ${result.value}`);
  if (result.error) parts.push(`error:\n${result.error.traceback || result.error.message}`);
  if (result.wait) parts.push(`waiting: ${result.wait.reason || "(no reason)"}`);
  const text = parts.join("\n");
  return text.length > MAX_RESULT_CHARS
    ? `${text.slice(0, MAX_RESULT_CHARS)}\n[truncated ${text.length - MAX_RESULT_CHARS} characters]`
    : text;
}

/** The request's messages: the contract, then the provider sequence, via `context.prepare`. */
async function prepareContext(
  options: ModelTurnOptions,
  session: string,
  opening: Record<string, unknown>[],
): Promise<ChatMessage[]> {
  // The summary stands in for the items it covers; the items after it follow whole.
  const summary = latestSummary(options.store, session);
  const items = readProviderItems(options.store, session, summary?.coversToIdx ?? 0)
    .map((item) => item.message);
  // Every stored provider item has a role: appendProviderItems refuses any other.
  const base = [
    { role: "system", content: options.system() },
    ...(summary ? [{ role: "user", content: `[runtime] ${summary.text}` }] : []),
    ...trimItems(items, options.maxItems ?? 200),
    ...opening,
  ] as HookResult<"context.prepare">;
  const messages = await hookOr(options, session, "context.prepare", { messages: base }, base);
  return messages as unknown as ChatMessage[];
}

/** Keeps the last `max` items, starting at a user message so no tool group is split. */
function trimItems(items: Record<string, unknown>[], max: number): Record<string, unknown>[] {
  if (items.length <= max) return items;
  let start = items.length - max;
  while (start < items.length && items[start].role !== "user") start++;
  return items.slice(start);
}

/**
 * Runs a hook of the turn; on any failure records `hook.failed` and returns `fallback`, the
 * hook's documented safe default.
 */
async function hookOr<N extends HookName>(
  options: ModelTurnOptions,
  session: string,
  name: N,
  args: Record<string, unknown>,
  fallback: HookResult<N>,
): Promise<HookResult<N>> {
  try {
    return await options.hooks().call(name, args, { timeoutMs: 10_000 });
  } catch (error) {
    recordHookFailure(options, session, name, error);
    return fallback;
  }
}

const planRoute = async (options: ModelTurnOptions, session: string) =>
  (await hookOr(options, session, "model.plan", { session: { id: session } }, { route: "main" }))
    .route;

const decideNext = async (options: ModelTurnOptions, session: string) =>
  (await hookOr(options, session, "turn.next", { session: { id: session } }, { action: "wait" }))
    .action;

function recordHookFailure(
  options: ModelTurnOptions,
  session: string,
  hook: string,
  error: unknown,
) {
  const message = error instanceof Error ? error.message : String(error);
  options.log.warn("hook.fallback", `hook ${hook} failed, using the safe default: ${message}`, {
    hook,
  });
  appendEvent(options.store, session, "hook.failed", {
    hook,
    revision: options.hooks().revision,
    error: message.slice(0, 2000),
    fallback: true,
  });
  options.bus.wake(session);
}
