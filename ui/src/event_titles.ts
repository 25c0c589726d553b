/**
 * The words the runtime-events lane shows for a record: a title, a detail line and a
 * severity. Known types get specific wording; any other type is described generically.
 *
 * @module
 */

import type { LaneRecord } from "../../runtime/core/mod.ts";
import { type Data, flag, num, strings, text } from "./_fields.ts";

/** How an event is shown; `error` and `warning` also carry a badge with that word. */
export type Severity = "info" | "warning" | "error";

/** What the events lane shows for one record. */
export interface EventTitle {
  title: string;
  detail: string;
  severity: Severity;
}

/** Short form of a long id or hash for titles; the full value stays in the data. */
export function shortId(value: string | undefined): string {
  if (value === undefined) return "?";
  return value.length > 16 ? `${value.slice(0, 12)}…` : value;
}

/** Whether a record updates the state of an earlier send (an outbox record). */
export function isSendUpdate(type: string, data: Data): boolean {
  return (type.startsWith("send.") || type.startsWith("outbox.")) &&
    text(data, "send_id") !== undefined;
}

function frameEvent(type: string, d: Data): EventTitle {
  const n = num(d, "number", "frame_number", "frame");
  const name = n === undefined ? `Frame ${shortId(text(d, "frame_id"))}` : `Frame ${n}`;
  const reason = text(d, "reason") ?? "";
  if (type === "frame.resumed") {
    const owner = text(d, "previous_owner");
    return {
      title: `Turn of f${name.slice(1)} continued after a restart`,
      detail: owner === undefined ? "" : `previous owner ${shortId(owner)}`,
      severity: "info",
    };
  }
  if (type === "frame.accepted") {
    const ids = strings(d, "input_ids", "inputs");
    const epoch = num(d, "context_epoch", "epoch");
    const parts = [`consumes ${ids.length} input${ids.length === 1 ? "" : "s"}`];
    if (epoch !== undefined) parts.push(`context epoch ${epoch}`);
    const policy = text(d, "policy_revision");
    if (policy !== undefined) parts.push(`policy ${shortId(policy)}`);
    return { title: `${name} accepted`, detail: parts.join(" · "), severity: "info" };
  }
  if (type === "frame.abandoned") {
    return {
      title: `${name} abandoned`,
      detail: [reason, "its inputs are pending again"].filter(Boolean).join(" · "),
      severity: "warning",
    };
  }
  const state = text(d, "state") ?? "done";
  return {
    title: `${name} ${state === "done" ? "finished" : state}`,
    detail: reason,
    severity: state === "done" ? "info" : "error",
  };
}

function plural(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? "" : "s"}`;
}

/** Lists may hold ids or be counts; either way the event shows how many. */
function count(d: Data, key: string): number {
  return num(d, key) ?? strings(d, key).length;
}

function recoveryEvent(d: Data): EventTitle {
  return {
    title: "Recovered after a restart",
    detail: [
      `${plural(count(d, "abandoned_frames"), "frame")} abandoned`,
      `${plural(count(d, "resumed_frames"), "frame")} resumed`,
      `${plural(count(d, "interrupted_cells"), "cell")} interrupted`,
      `${plural(count(d, "closed_tool_calls"), "tool call")} closed`,
    ].join(" · "),
    severity: "warning",
  };
}

/** Titles the event lane shows for one record; unknown types are described generically. */
export function describeEvent(
  record: LaneRecord,
): EventTitle {
  const d = record.data;
  const type = record.type;
  if (type.startsWith("frame.")) return frameEvent(type, d);
  switch (type) {
    case "kernel.reset": {
      const generation = num(d, "generation");
      const parts = [text(d, "reason") ?? ""];
      const skills = text(d, "skills_revision", "skills.revision");
      if (skills !== undefined) parts.push(`skills ${shortId(skills)}`);
      const behavior = text(d, "behavior_revision");
      if (behavior !== undefined) parts.push(`behaviour ${shortId(behavior)}`);
      if (flag(d, "heap_restored") === false) parts.push("Python heap not restored");
      // The first kernel of a daemon is routine; any later replacement is worth a look.
      const routine = /^(start|startup)$/.test(text(d, "reason") ?? "");
      return {
        title: `Kernel reset${generation === undefined ? "" : ` (generation ${generation})`}`,
        detail: parts.filter(Boolean).join(" · "),
        severity: routine ? "info" : "warning",
      };
    }
    case "activation": {
      const release = text(d, "release_id", "release");
      const epoch = num(d, "epoch");
      const parts = [epoch === undefined ? "" : `epoch ${epoch}`];
      const previous = text(d, "previous_release");
      if (previous !== undefined) parts.push(`previous ${shortId(previous)}`);
      parts.push(text(d, "reason") ?? "");
      return {
        title: `Activated release ${shortId(release)}`,
        detail: parts.filter(Boolean).join(" · "),
        severity: "info",
      };
    }
    case "hook.failed":
      return {
        title: `Hook ${text(d, "hook", "name") ?? "?"} failed`,
        detail: text(d, "error", "message", "error.message") ?? "",
        severity: "error",
      };
    case "operator":
      return {
        title: `Operator: ${text(d, "op", "command", "kind") ?? "command"}`,
        detail: text(d, "message", "reason", "result", "detail") ?? "",
        severity: "info",
      };
    case "turn.started": {
      const frame = num(d, "frame", "frame_number");
      return {
        title: "Turn started",
        detail: frame === undefined ? text(d, "reason", "turn_id") ?? "" : `frame ${frame}`,
        severity: "info",
      };
    }
    case "recovery":
      return recoveryEvent(d);
    case "session.stalled": {
      const failures = num(d, "failures");
      return {
        title: `Session stalled${
          failures === undefined ? "" : ` after ${plural(failures, "failed attempt")}`
        }`,
        detail: text(d, "message", "reason") ?? "",
        severity: "warning",
      };
    }
    case "release.last_good":
      return {
        title: `Release ${shortId(text(d, "release_id", "release"))} marked last good`,
        detail: "",
        severity: "info",
      };
    case "release.recovered":
      return {
        title: `Release ${shortId(text(d, "broken"))} does not verify; restored ${
          shortId(text(d, "restored"))
        }`,
        detail: text(d, "reason") ?? "",
        severity: "warning",
      };
    case "turn.ended": {
      const reason = text(d, "reason", "end") ?? "";
      const failed = /error|fail/i.test(reason);
      return { title: "Turn ended", detail: reason, severity: failed ? "error" : "info" };
    }
  }
  if (type.startsWith("outbox.")) {
    // Only a step whose `outbox.pending` the page never saw lands here.
    const state = text(d, "state") ?? type.slice("outbox.".length);
    return {
      title: `Discord send ${shortId(text(d, "outbox_id"))}: ${state}`,
      detail: text(d, "error") ?? "",
      severity: state === "failed" || state === "unknown" ? "error" : "info",
    };
  }
  if (isSendUpdate(type, d)) {
    const state = text(d, "state") ?? type.split(".").pop() ?? "updated";
    return {
      title: `Send ${shortId(text(d, "send_id"))}: ${state}`,
      detail: text(d, "error", "reason") ?? "",
      severity: state === "failed" || state === "unknown" ? "error" : "info",
    };
  }
  const error = text(d, "error", "error.message");
  return {
    title: type,
    detail: error ?? "",
    severity: error !== undefined || /fail|error/.test(type) ? "error" : "info",
  };
}
