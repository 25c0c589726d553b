/**
 * The inputs unattended work admits: a fired timer (source `timer`, dedupe key `timer:<id>`) and
 * a finished job (source `job`, dedupe key `job:<id>`). Each goes to the conversation of the frame
 * that set the timer or started the job, so the woken turn answers where the work was asked for.
 *
 * @module
 */

import type { AdmitInput } from "../../store/tables/inputs.ts";
import type { JobRecord } from "../../store/tables/jobs.ts";
import type { TimerRecord } from "../../store/tables/timers.ts";

/** An input without its session, as the coordinator's admission takes it. */
export type UnattendedInput = Omit<AdmitInput, "session">;

/** The input a fired timer admits; its body says which timer fired and its note. */
export function timerInput(timer: TimerRecord): UnattendedInput {
  const by = timer.cellId ?? timer.jobId ?? "the runtime";
  const what = timer.wait ? "the wait() that ended your turn is over" : "fired";
  return {
    sourceKind: "timer",
    dedupeKey: `timer:${timer.id}`,
    conversationId: timer.conversation,
    author: "timer",
    body: `timer ${timer.id} (set by ${by}, due ${new Date(timer.dueAt).toISOString()}): ${what}` +
      (timer.note ? `\nnote: ${timer.note}` : ""),
    receivedAt: timer.dueAt,
  };
}

/** Characters of a job's output an input carries at most; `jobs.result()` has all of it. */
const EXCERPT = 4_000;

function excerpt(name: string, text: unknown): string[] {
  if (typeof text !== "string" || text === "") return [];
  const cut = text.length > EXCERPT
    ? `${text.slice(0, EXCERPT)}\n[… ${text.length - EXCERPT} more]`
    : text;
  return [`${name}:\n${cut}`];
}

/** The input a finished job admits: its state, cause, value, output and error, and its usage. */
export function jobInput(job: JobRecord): UnattendedInput {
  const result = job.result ?? {};
  const error = result.error as { type?: string; message?: string } | null | undefined;
  const lines = [
    `job ${job.id} "${job.name}" ended ${job.state}: ${job.cause}`,
    ...(result.value === undefined || result.value === null ? [] : [`value: ${result.value}`]),
    ...excerpt("stdout", result.stdout),
    ...excerpt("stderr", result.stderr),
    ...(error ? [`error: ${error.type ?? "Error"}: ${error.message ?? ""}`] : []),
    `used ${job.requestsUsed} model requests and ${job.tokensUsed} tokens; ` +
    `await jobs.result("${job.id}") has the whole result`,
  ];
  return {
    sourceKind: "job",
    dedupeKey: `job:${job.id}`,
    conversationId: job.conversation,
    author: "job",
    body: lines.join("\n"),
    receivedAt: job.endedAt ?? undefined,
  };
}
