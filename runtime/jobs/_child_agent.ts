/**
 * A child agent (`await agent(task)`): a model loop of its own — its own provider sequence and
 * the one python tool, run as cells in the job's own workbench — that ends with a result. It
 * never speaks to a conversation: sends are refused in a job's workbench, and its result goes
 * to whoever awaits it and into the job's completion input.
 *
 * It runs on the root turn's engine: the agent loop (`runAgentLoop`) and its request step and
 * tool-call step, so code parsing (tool calls, fenced cells on a text-mode
 * route), the route's mode and shaping, result rendering with the effects a cell committed,
 * and output spooling are the same code. What differs is its sink, {@linkcode ChildSink}: its
 * sequence lives in memory, each request is a child model call under the job's budget (and its
 * parents'), each cell is a `job.cell` record; and what it may call, which is its workbench's
 * (a job's role); and how the loop ends, {@linkcode ChildEnds}: when the model answers without
 * calling the tool (that text is the result), when a cell calls `wait(result)`, or when a budget
 * ends the job.
 *
 * @module
 */

import { appendEvent } from "../../store/tables/events.ts";
import { type EffectRecord, effectsOfCell } from "../../store/tables/effects.ts";
import type { JobRecord } from "../../store/tables/jobs.ts";
import type { Store } from "../../store/store.ts";
import {
  budgetOf,
  fitMessages,
  heldBy,
  messagesTokens,
  rawLimits,
  shapeMessages,
} from "../context/mod.ts";
import {
  type EventBus,
  isKlbrError,
  newId,
  type RecordInput,
  type RecordType,
} from "../core/mod.ts";
import type { KernelSupervisor } from "../kernel/mod.ts";
import {
  assistantMessage,
  type ChatMessage,
  type Provider,
  type ProviderTurn,
} from "../model/mod.ts";
import {
  type AgentEnds,
  type CellAnswer,
  type FinishedCell,
  NO_TURN_HEALTH,
  type PreparedRequest,
  type ReplyToCommit,
  type RequestSink,
  type RouteChoice,
  type RouteMode,
  runAgentLoop,
  type StepScope,
  TEXT_MODE_RULES,
  type ToolCall,
  type TurnHealth,
  type TurnKernel,
  type TurnResult,
} from "../session/mod.ts";
import type { JobEnding, JobRun } from "./_job_workbench.ts";
import type { ChildReply, ChildRequest } from "./_model_calls.ts";

/** The contract a child agent reads first. */
export const CHILD_CONTRACT = [
  "You are a child agent of klbr, working on one task in a workbench of your own.",
  "You act only through the `python` tool: each call runs one cell (top-level await works; the",
  "heap lasts for this task). open_file, ls, search, delete and run act on the workspace;",
  "`await llm(prompt)` asks a model one question. Nobody reads your text while you work, and you",
  "cannot speak to any conversation. When you are done, answer with the result as plain text",
  "without calling the tool (or call `wait(result)` in a cell): that text goes to your parent.",
].join("\n");

/** Steps a child agent may take at most, whatever its budget. */
const MAX_STEPS = 64;

/** What the loop needs. */
export interface ChildAgentDeps {
  store: Store;
  bus: EventBus;
  /** Makes one child model request under the budgets, recorded with its causation. */
  call: (request: ChildRequest) => Promise<ChildReply>;
  /** The configured route of a route name (its `tool_calls`, `role_order`, `reasoning`). */
  routeOf: (route: string) => Provider["route"];
  cellTimeoutMs: number;
  artifactBytes: number;
  /** Where each artifact write is reported for `/health` (`null` for one that succeeded). */
  artifactWrite?: (error: string | null) => void;
}

/**
 * Runs the child agent of an `agent` job to its end. Budget and cancellation ends are decided by
 * the runner (which aborts `signal`); this says `done` with the result, or `failed`.
 */
export async function runChildAgent(deps: ChildAgentDeps, run: JobRun): Promise<JobEnding> {
  const { job, kernel, signal } = run;
  const sink = new ChildSink(deps, job, signal);
  // The job's artifact writes reach /health; its model calls are its own (never the route's).
  const health: TurnHealth = {
    modelCall: NO_TURN_HEALTH.modelCall,
    artifactWrite: deps.artifactWrite ?? NO_TURN_HEALTH.artifactWrite,
  };
  const scope: StepScope = {
    options: { store: deps.store, bus: deps.bus, artifactBytes: deps.artifactBytes, health },
    // A child has no frame of its own: it works for the frame that started its job (or its
    // parent job's), and its records name the job.
    ctx: {
      session: job.session,
      frame: { id: job.frameId ?? job.id, number: 0, policyRevision: job.releaseId, routing: null },
      inputs: [],
      resumed: false,
      signal,
    },
    record: sink.record.bind(sink),
    state: { effects: false },
    sink,
  };
  const cells = {
    store: deps.store,
    bus: deps.bus,
    kernel: jobTurnKernel(kernel),
    cellTimeoutMs: deps.cellTimeoutMs,
    artifactBytes: deps.artifactBytes,
    health,
    cells: sink,
  };
  return await runAgentLoop(scope, { cells, ends: new ChildEnds(sink), opening: null });
}

/**
 * How a child agent ends: with the text of a reply that calls no tool, or the reason of a
 * `wait(result)`, as its result (`done`); `failed` when a request fails, when it is stopped
 * (its budget or a cancellation, decided by the runner), or after {@linkcode MAX_STEPS} steps.
 */
class ChildEnds implements AgentEnds<JobEnding> {
  readonly #sink: ChildSink;

  constructor(sink: ChildSink) {
    this.#sink = sink;
  }

  maxSteps(): number {
    return MAX_STEPS;
  }

  /** None: a child's sequence ends with it, so nobody would read it. */
  lastStepNote(): null {
    return null;
  }

  failed(failure: TurnResult): JobEnding {
    return this.#sink.failedRequest(failure.reason);
  }

  answered(text: string, step: number): Promise<JobEnding> {
    const cause = `it answered after ${step} steps`;
    return Promise.resolve({ state: "done", cause, result: { value: text } });
  }

  waited(reason: string, step: number): JobEnding {
    return {
      state: "done",
      cause: `it called wait() after ${step} steps`,
      result: { value: reason },
    };
  }

  stopped(): JobEnding {
    return { state: "failed", cause: "stopped", result: {} };
  }

  exhausted(maxSteps: number): JobEnding {
    return { state: "failed", cause: `it took ${maxSteps} steps without an answer`, result: {} };
  }
}

/** The job's kernel as the tool-call step runs cells in it; its generation is the job's own. */
function jobTurnKernel(kernel: KernelSupervisor): TurnKernel {
  return {
    generation: () => Promise.resolve(kernel.generation),
    execute: (cellId, code, options) => kernel.execute(cellId, code, options),
  };
}

/**
 * A child agent's sink: its provider sequence in memory (the contract, the task, its replies
 * and tool results), each request a child model call of the job, each cell a `job.cell` record.
 * Of the records the engine writes, only `route.adapted` reaches the session's log (what the
 * server refuses holds for the root's requests too); the rest are the root turn's.
 */
class ChildSink implements RequestSink {
  /** The step the loop is at (each request begins one); requests and cells are recorded with it. */
  step = 0;
  readonly #d: ChildAgentDeps;
  readonly #job: JobRecord;
  readonly #signal: AbortSignal;
  /** The sequence after the contract, as provider items are kept: shaped per request. */
  readonly #messages: Record<string, unknown>[];
  readonly #code = new Map<string, string>();
  #failure: unknown;
  #lastReply: { route: string; fenced: boolean } | undefined;

  constructor(deps: ChildAgentDeps, job: JobRecord, signal: AbortSignal) {
    this.#d = deps;
    this.#job = job;
    this.#signal = signal;
    this.#messages = [{ role: "user", content: job.code }];
  }

  /**
   * Writes `route.adapted` to the session's log. The step's other records (`turn.ended`, a
   * failed request's partial scratchpad) describe the agent's turn and are not written for a
   * child: 0 stands for "no seq".
   */
  record<T extends RecordType>(type: T, body: RecordInput<T>): number {
    if (type !== "route.adapted") return 0;
    return appendEvent(this.#d.store, this.#job.session, type, body);
  }

  begin(): Promise<RouteChoice & { opening: null }> {
    this.step++;
    const route = this.#job.route ?? "main";
    return Promise.resolve({ route, provider: this.#provider(route), opening: null });
  }

  /**
   * The contract and the child's sequence, within the route's context (what its server holds,
   * when it said less than the configuration): the longest contents are cut, no message is
   * dropped, so the task and every call's result stay.
   */
  context(
    _opening: Record<string, unknown> | null,
    request: { mode: RouteMode },
  ): Promise<PreparedRequest> {
    const { shape, contextTokens } = request.mode;
    const system = CHILD_CONTRACT + (shape.toolMode === "text" ? TEXT_MODE_RULES : "");
    const whole = [{ role: "system", content: system }, ...this.#messages];
    const name = this.#job.route ?? "main";
    const route = this.#d.routeOf(name) as Provider["route"] | undefined;
    let messages = whole;
    // A test's route may declare no context: nothing to fit to.
    if (route?.context_tokens !== undefined) {
      const budget = heldBy(budgetOf(route), contextTokens);
      const limit = rawLimits(this.#d.store, this.#job.session, name, budget).request;
      messages = fitMessages(whole, limit) ?? whole;
    }
    return Promise.resolve({
      messages: shapeMessages(messages, shape) as unknown as ChatMessage[],
      rawTokens: messagesTokens(messages),
    });
  }

  commitReply(_opening: Record<string, unknown> | null, reply: ReplyToCommit): Promise<void> {
    const { turn, calls } = reply;
    this.#lastReply = { route: reply.route, fenced: calls.some((call) => call.textCell === true) };
    const message = assistantMessage(turn.text, calls, { reasoning: turn.reasoning });
    this.#messages.push(message);
    return Promise.resolve();
  }

  /** Whether this child's own previous reply on `route` was a fenced cell. */
  lastReplyFenced(route: string): boolean {
    return this.#lastReply?.route === route && this.#lastReply.fenced;
  }

  /** A child's history is its own, in memory: there is nothing to rewrite it from. */
  repair(): Promise<boolean> {
    return Promise.resolve(false);
  }

  /** A failed request's partial text is not kept: the job's `model_calls` row says it failed. */
  partial(): Promise<void> {
    return Promise.resolve();
  }

  answer(call: ToolCall, content: string): void {
    this.#messages.push({ role: "tool", tool_call_id: call.id, content });
  }

  startCell(cell: { toolCallId: string; code: string }): Promise<string> {
    const cellId = newId("cell");
    this.#code.set(cellId, cell.code);
    return Promise.resolve(cellId);
  }

  /** What the cell committed: its timers and child jobs name it as their child cell. */
  effects(cellId: string): readonly EffectRecord[] {
    return effectsOfCell(this.#d.store, cellId);
  }

  /** A child's running output is not animated anywhere; its `job.cell` record has it. */
  stream(): void {}

  finishCell(cellId: string, finished: FinishedCell, answer: CellAnswer): void {
    const { result, stdout, stderr } = finished;
    this.answer(answer.call, answer.content);
    appendEvent(this.#d.store, this.#job.session, "job.cell", {
      job_id: this.#job.id,
      step: this.step,
      cell_id: cellId,
      code: (this.#code.get(cellId) ?? "").slice(0, 4_000),
      outcome: result.outcome,
      stdout: stdout.text.slice(0, 2_000),
      error: result.error?.message ?? null,
      ...(stdout.artifact ? { stdout_artifact: stdout.artifact } : {}),
      ...(stderr.artifact ? { stderr_artifact: stderr.artifact } : {}),
      ...(stdout.artifactError ? { stdout_artifact_error: stdout.artifactError } : {}),
      ...(stderr.artifactError ? { stderr_artifact_error: stderr.artifactError } : {}),
    });
    this.#code.delete(cellId);
  }

  /** How a failed request ends the job: `failed`, saying whether its budget was spent. */
  failedRequest(reason: string): JobEnding {
    if (this.#signal.aborted) return { state: "failed", cause: "stopped", result: {} };
    const spent = isKlbrError(this.#failure, "over_budget");
    const why = spent ? "its budget is spent" : "its model call failed";
    const message = this.#failure instanceof Error ? this.#failure.message : reason;
    return { state: "failed", cause: `${why}: ${message}`, result: {} };
  }

  /** The route's provider for this child: each request a child call of the job, under its budget. */
  #provider(route: string): Provider {
    return {
      route: this.#d.routeOf(route),
      streamChat: (request, options = {}) => this.#ask(route, { ...request, ...options }),
    };
  }

  async #ask(
    route: string,
    request: { messages: ChatMessage[]; tools?: boolean; signal?: AbortSignal },
  ): Promise<ProviderTurn> {
    const job = this.#job;
    try {
      const reply = await this.#d.call({
        causation: { session: job.session, frameId: job.frameId, cellId: null, jobId: job.id },
        kind: "agent",
        route,
        messages: request.messages,
        tools: request.tools,
        summary: { step: this.step, messages: request.messages.length },
        signal: request.signal,
      });
      return reply.turn;
    } catch (error) {
      // Kept to say why the job ended: a spent budget, or the request itself.
      this.#failure = error;
      throw error;
    }
  }
}
