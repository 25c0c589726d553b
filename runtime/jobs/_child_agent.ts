/**
 * A child agent (`await agent(task)`): a model loop of its own — its own provider sequence and
 * the one python tool, run as cells in the job's own workbench — that ends with a result. It
 * never speaks to a conversation: sends are refused in a job's workbench, and its result goes
 * to whoever awaits it and into the job's completion input.
 *
 * Each request is a child model call under the job's budget (and its parents'); each cell is
 * recorded as a `job.cell` event. The loop ends when the model answers without calling the tool
 * (that text is the result), when a cell calls `wait(result)`, or when a budget ends the job.
 *
 * @module
 */

import { appendEvent } from "../../store/events.ts";
import type { JobRecord } from "../../store/jobs.ts";
import type { Store } from "../../store/store.ts";
import { type EventBus, isKlbrError, newId } from "../core/mod.ts";
import type { CellResult, KernelSupervisor } from "../kernel/mod.ts";
import { assistantMessage, type ChatMessage } from "../model/mod.ts";
import { jobCellResult, type JobEnding } from "./_job_workbench.ts";
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
/** Characters of one cell's result the child model reads at most. */
const MAX_TOOL_RESULT = 20_000;

/** What the loop needs. */
export interface ChildAgentDeps {
  store: Store;
  bus: EventBus;
  call: (request: ChildRequest) => Promise<ChildReply>;
  cellTimeoutMs: number;
  artifactBytes: number;
}

function toolResult(result: Record<string, unknown>): string {
  const parts = [`outcome: ${result.outcome}`];
  if (result.stdout) parts.push(`stdout:\n${result.stdout}`);
  if (result.stderr) parts.push(`stderr:\n${result.stderr}`);
  if (result.value !== null && result.value !== undefined) parts.push(`value: ${result.value}`);
  const error = result.error as { traceback?: string; message?: string } | null;
  if (error) parts.push(`error:\n${error.traceback || error.message}`);
  return parts.join("\n").slice(0, MAX_TOOL_RESULT);
}

function codeOf(name: string, args: string): string | undefined {
  if (name !== "python") return undefined;
  try {
    const parsed = JSON.parse(args);
    return typeof parsed?.code === "string" ? parsed.code : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Runs the child agent of an `agent` job to its end. Budget and cancellation ends are decided by
 * the runner (which aborts `signal`); this says `done` with the result, or `failed`.
 */
export async function runChildAgent(
  deps: ChildAgentDeps,
  job: JobRecord,
  kernel: KernelSupervisor,
  signal: AbortSignal,
): Promise<JobEnding> {
  const messages: ChatMessage[] = [
    { role: "system", content: CHILD_CONTRACT },
    { role: "user", content: job.code },
  ];
  const causation = { session: job.session, frameId: job.frameId, cellId: null, jobId: job.id };
  for (let step = 1; step <= MAX_STEPS; step++) {
    if (signal.aborted) return { state: "failed", cause: "stopped", result: {} };
    const asked = await askModel(deps, job, { causation, messages, step, signal });
    if ("ending" in asked) return asked.ending;
    const { turn } = asked.reply;
    const calls = turn.toolCalls.map((call) => ({ ...call, id: newId("call") as string }));
    messages.push(assistantMessage(turn.text, calls) as ChatMessage);
    if (calls.length === 0) {
      return {
        state: "done",
        cause: `it answered after ${step} steps`,
        result: { value: turn.text },
      };
    }
    for (const call of calls) {
      const ran = await runStep(deps, job, kernel, signal, {
        step,
        code: codeOf(call.name, call.arguments),
      });
      messages.push({ role: "tool", tool_call_id: call.id, content: ran.text });
      if (ran.wait !== undefined) {
        return {
          state: "done",
          cause: `it called wait() after ${step} steps`,
          result: { value: ran.wait },
        };
      }
    }
  }
  return { state: "failed", cause: `it took ${MAX_STEPS} steps without an answer`, result: {} };
}

/** One child model call of the job; a spent budget or a failed call ends the job `failed`. */
async function askModel(
  deps: ChildAgentDeps,
  job: JobRecord,
  at: {
    causation: ChildRequest["causation"];
    messages: ChatMessage[];
    step: number;
    signal: AbortSignal;
  },
): Promise<{ reply: ChildReply } | { ending: JobEnding }> {
  const { causation, messages, step, signal } = at;
  try {
    const reply = await deps.call({
      causation,
      kind: "agent",
      route: job.route ?? "main",
      messages,
      summary: { step, messages: messages.length },
      signal,
    });
    return { reply };
  } catch (error) {
    const why = isKlbrError(error, "over_budget") ? "its budget is spent" : "its model call failed";
    return {
      ending: {
        state: "failed",
        cause: `${why}: ${error instanceof Error ? error.message : error}`,
        result: {},
      },
    };
  }
}

/** Runs one tool call's cell, records it as a `job.cell` event and says what the model reads. */
async function runStep(
  deps: ChildAgentDeps,
  job: JobRecord,
  kernel: KernelSupervisor,
  signal: AbortSignal,
  step: { step: number; code: string | undefined },
): Promise<{ text: string; wait?: string }> {
  if (step.code === undefined) {
    return { text: `[not run: there is one tool, python, with arguments {"code": "..."}]` };
  }
  const cell: CellResult = await kernel.execute(newId("cell"), step.code, {
    signal,
    timeoutMs: deps.cellTimeoutMs,
  });
  const result = await jobCellResult(deps.store.stateDir, cell, deps.artifactBytes);
  appendEvent(deps.store, job.session, "job.cell", {
    job_id: job.id,
    step: step.step,
    code: step.code.slice(0, 4_000),
    outcome: cell.outcome,
    stdout: String(result.stdout).slice(0, 2_000),
    error: cell.error?.message ?? null,
  });
  return { text: toolResult(result), wait: cell.wait?.reason };
}
