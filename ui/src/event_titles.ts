/**
 * The words the runtime-events lane shows for a record: a title, a detail line and a
 * severity. Each record is read through the shared schemas (`readRecord`); a known type gets
 * specific wording, and a record of an unknown type or with a body that does not match its
 * type is shown as `unknown record <type>`.
 *
 * @module
 */

import type { KnownRecord, RecordData, RecordReading } from "../../runtime/core/mod.ts";
import type { OutboxStepRecord } from "./outbox_view.ts";
import { unattendedTitle } from "./jobs_view.ts";
import { tokenCount } from "./format.ts";

/** How an event is shown; `error` and `warning` also carry a badge with that word. */
export type Severity = "info" | "warning" | "error";

/** What the events lane shows for one record. */
export interface EventTitle {
  title: string;
  detail: string;
  severity: Severity;
}

/** Short form of a long id or hash for titles; the full value stays in the data. */
export function shortId(value: string | null | undefined): string {
  if (value === undefined || value === null) return "?";
  return value.length > 16 ? `${value.slice(0, 12)}…` : value;
}

/** Token counts in words; a count the provider did not report says so, never 0. */
export function usageLine(u: {
  prompt_tokens?: number;
  completion_tokens?: number;
  cache_read_tokens?: number;
  cache_write_tokens?: number;
}): string {
  return `${tokenCount(u.prompt_tokens)} in · ${tokenCount(u.completion_tokens)} out · cache read ${
    tokenCount(u.cache_read_tokens)
  } · cache write ${tokenCount(u.cache_write_tokens)}`;
}

function plural(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? "" : "s"}`;
}

type FrameRecord = Extract<KnownRecord, { type: `frame.${string}` }>;

function frameEvent(record: FrameRecord): EventTitle {
  const name = `Turn ${record.data.number}`;
  switch (record.type) {
    case "frame.resumed":
      return {
        title: `${name} continued after a restart`,
        detail: typeof record.data.previous_owner === "string"
          ? `previous owner ${shortId(record.data.previous_owner)}`
          : "",
        severity: "info",
      };
    case "frame.accepted": {
      const d = record.data;
      const detail = [
        `consumes ${plural(d.input_ids.length, "input")}`,
        `context version ${d.context_epoch}`,
        `behaviour ${shortId(d.policy_revision)}`,
      ];
      return { title: `${name} accepted`, detail: detail.join(" · "), severity: "info" };
    }
    case "frame.abandoned":
      return {
        title: `${name} abandoned`,
        detail: [record.data.reason, "its inputs are pending again"].filter(Boolean).join(" · "),
        severity: "warning",
      };
    case "frame.finished": {
      const done = record.data.state === "done";
      return {
        title: `${name} ${done ? "finished" : record.data.state}`,
        detail: record.data.reason,
        severity: done ? "info" : "error",
      };
    }
  }
}

function kernelEvent(d: RecordData<"kernel.reset">): EventTitle {
  const parts = [d.reason, `skills ${shortId(d.skills_revision)}`];
  if (d.behavior_revision !== null) parts.push(`behaviour ${shortId(d.behavior_revision)}`);
  if (!d.heap_restored) parts.push("Python heap not restored");
  // The first kernel of a daemon is routine; any later replacement is worth a look.
  const routine = /^(start|startup)$/.test(d.reason);
  return {
    title: `Kernel reset (generation ${d.generation})`,
    detail: parts.filter(Boolean).join(" · "),
    severity: routine ? "info" : "warning",
  };
}

function activationEvent(d: RecordData<"activation">): EventTitle {
  const parts = [`behaviour version ${d.epoch}`];
  if (d.previous_release !== null) parts.push(`previous ${shortId(d.previous_release)}`);
  parts.push(d.reason);
  return {
    title: `Activated release ${shortId(d.release_id)}`,
    detail: parts.filter(Boolean).join(" · "),
    severity: "info",
  };
}

function recoveryEvent(d: RecordData<"recovery">): EventTitle {
  return {
    title: "Recovered after a restart",
    detail: [
      `${plural(d.abandoned_frames.length, "frame")} abandoned`,
      `${plural(d.resumed_frames.length, "frame")} resumed`,
      `${plural(d.interrupted_cells.length, "cell")} interrupted`,
      `${plural(d.closed_tool_calls.length, "tool call")} closed`,
    ].join(" · "),
    severity: "warning",
  };
}

function outboxEvent(record: OutboxStepRecord): EventTitle {
  // Only a step whose `outbox.pending` the page never saw lands here.
  const { state, outbox_id, error } = record.data;
  return {
    title: `Discord send ${shortId(outbox_id)}: ${state}`,
    detail: error ?? "",
    severity: state === "failed" || state === "unknown" ? "error" : "info",
  };
}

function unknownEvent(read: Extract<RecordReading, { ok: false }>): EventTitle {
  return {
    title: `unknown record ${read.type}`,
    detail: read.reason === "unknown_type"
      ? "a type this page does not know; its data is shown as it is"
      : `its data does not match the type: ${read.problem}`,
    severity: read.reason === "unknown_type" ? "info" : "warning",
  };
}

/** Titles the event lane shows for a record already read (`readRecord` in `runtime/core/`). */
export function describeReading(read: RecordReading): EventTitle {
  if (!read.ok) return unknownEvent(read);
  const record = read.record;
  switch (record.type) {
    case "frame.accepted":
    case "frame.finished":
    case "frame.abandoned":
    case "frame.resumed":
      return frameEvent(record);
    case "outbox.attempting":
    case "outbox.confirmed":
    case "outbox.failed":
    case "outbox.unknown":
      return outboxEvent(record);
    case "kernel.reset":
      return kernelEvent(record.data);
    case "activation":
      return activationEvent(record.data);
    case "recovery":
      return recoveryEvent(record.data);
    case "role.loaded":
    case "candidate.failed":
      return behaviorEvent(record);
    default:
      return unattendedTitle(record) ?? otherEvent(record);
  }
}

type BehaviorRecord = Extract<KnownRecord, { type: "role.loaded" | "candidate.failed" }>;

function behaviorEvent(record: BehaviorRecord): EventTitle {
  if (record.type === "role.loaded") {
    const d = record.data;
    const name = d.role === "hooks" ? "Hook worker" : d.role === "workbench" ? "Workbench" : d.role;
    return {
      title: `${name} started (generation ${d.generation})`,
      detail: [
        d.reason,
        `python ${d.python.version}`,
        `package ${shortId(d.package)}`,
        `release ${shortId(d.release_id)}`,
      ].join(" · "),
      severity: "info",
    };
  }
  const d = record.data;
  return {
    title: `Behaviour candidate failed its ${d.action}: ${
      d.failing.map((f) => f.hook).join(", ") || "?"
    }`,
    detail: d.failing.map((f) => `${f.hook}: ${f.message}`).join("; "),
    severity: "warning",
  };
}

function otherEvent(record: KnownRecord): EventTitle {
  switch (record.type) {
    case "hook.failed":
      return {
        title: `Hook ${record.data.hook} failed`,
        detail: record.data.error,
        severity: "error",
      };
    case "operator":
      return {
        title: `Operator: ${record.data.op}`,
        detail: record.data.message ?? "",
        severity: "info",
      };
    case "turn.started":
      return { title: `Turn ${record.data.frame} started`, detail: "", severity: "info" };
    case "turn.ended": {
      const reason = record.data.reason;
      return {
        title: "Turn ended",
        detail: reason,
        severity: /error|fail/i.test(reason) ? "error" : "info",
      };
    }
    case "model.reply": {
      const d = record.data;
      return {
        title: `Model replied via ${d.route}${d.model === undefined ? "" : ` (${d.model})`}`,
        detail: [
          usageLine(d.usage),
          plural(d.tool_calls, "tool call"),
          plural(d.text_chars, "character") + " of text",
        ].join(" · "),
        severity: "info",
      };
    }
    case "model.failing": {
      const d = record.data;
      return {
        title: `Model at ${d.url} not answering (attempt ${d.attempt} of ${d.of})`,
        detail: d.next_retry_ms === null
          ? `${d.error} · no further retry by itself`
          : `${d.error} · next in ${Math.ceil(d.next_retry_ms / 1000)} s`,
        severity: "warning",
      };
    }
    case "model.recovered":
      return {
        title: `Model at ${record.data.url} answers again`,
        detail: `after ${plural(record.data.failed_attempts, "failed attempt")}`,
        severity: "info",
      };
    case "turn.reminded":
      return {
        title: "Reminded the model to send",
        detail: record.data.reminder,
        severity: "info",
      };
    case "route.adapted": {
      const d = record.data;
      const moved = d.setting === "context_tokens"
        ? `requests within ${d.to} tokens`
        : `${d.setting.replace("_", " ")} ${d.to}`;
      return { title: `Route ${d.route} adapted: ${moved}`, detail: d.reason, severity: "warning" };
    }
    case "session.stalled":
      return {
        title: `Session stalled after ${plural(record.data.failures, "failed attempt")}`,
        detail: record.data.message,
        severity: "warning",
      };
    case "release.last_good":
      return {
        title: `Release ${shortId(record.data.release_id)} marked last good`,
        detail: "",
        severity: "info",
      };
    case "release.recovered":
      return {
        title: `Release ${shortId(record.data.broken)} does not verify; restored ${
          shortId(record.data.restored)
        }`,
        detail: "",
        severity: "warning",
      };
    case "context.compacted":
      return {
        title: `Context compacted (context version ${record.data.epoch})`,
        detail: `${plural(record.data.summarized_items, "item")} summarised in ${
          plural(record.data.summary_chars, "character")
        }`,
        severity: "info",
      };
    case "code.patch": {
      const files = record.data.files;
      return {
        title: `Patched ${files.map((f) => f.path).join(", ") || plural(0, "file")}`,
        detail: `${plural(files.reduce((n, f) => n + f.edits.length, 0), "edit")} · cell ${
          shortId(record.data.cell_id)
        } · patch ${shortId(record.data.patch_id)}`,
        severity: "info",
      };
    }
    default:
      // The lanes show these elsewhere; here they are named by their type.
      return { title: record.type, detail: "", severity: "info" };
  }
}
