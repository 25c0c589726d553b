/**
 * Every state a person must know of, in words, from `/health` (read by the daemon's schema) and
 * the records: stopped, draining, drained, stalled, over budget, model failing, sandbox off —
 * each with what it means for a message sent now and its fix, an operator command where the
 * fix is one.
 *
 * @module
 */

import type { HealthInfo } from "./lane_client.ts";
import type { TurnView } from "./turn_view.ts";

/** An operator command a state's fix button sends. */
export type FixCommand =
  | { kind: "op.resume" }
  | { kind: "op.reset" }
  | { kind: "op.budget"; reset: true };

/** One state the page says, where the person looks. */
export interface StateNotice {
  key:
    | "stopped"
    | "draining"
    | "drained"
    | "stalled"
    | "over_budget"
    | "model_failing"
    | "sandbox_off";
  /** A few words for the header badge. */
  label: string;
  /** What it means, one sentence. */
  detail: string;
  /** What fixes it, in words. */
  fix: string;
  /** The button that fixes it, when the fix is an operator command. */
  action?: { label: string; command: FixCommand };
  /** `error` for what stops the agent or its confinement, `warning` else. */
  tone: "warning" | "error";
}

/**
 * The states to say now, the most pressing first; empty while all is well.
 *
 * @example
 * ```ts
 * sessionStates(client.health, turns).map((s) => s.label); // ["drained"]
 * ```
 */
export function sessionStates(
  health: HealthInfo | undefined,
  turns: Pick<TurnView, "stalled">,
): StateNotice[] {
  const report = health?.report;
  const notices: StateNotice[] = [];
  const held = report?.session_state;
  if (held === "stopped" || held === "drained") {
    notices.push({
      key: held,
      label: held === "stopped" ? "stopped" : "drained",
      detail: `The operator ${held} the session: new messages are kept and wait.`,
      fix: "Resume takes them up (no restart needed).",
      action: { label: "Resume", command: { kind: "op.resume" } },
      tone: "error",
    });
  } else if (held === "draining") {
    notices.push({
      key: "draining",
      label: "draining",
      detail: "The running turn finishes, then the session holds; new messages wait.",
      fix: "Resume once it is drained.",
      tone: "warning",
    });
  }
  if (report?.stalled === true || turns.stalled) {
    notices.push({
      key: "stalled",
      label: "stalled",
      detail: "The session stopped retrying after failed attempts; new messages wait.",
      fix: "Reset starts a new kernel and takes work again.",
      action: { label: "Reset", command: { kind: "op.reset" } },
      tone: "error",
    });
  }
  for (const spent of report?.over_budget ?? []) {
    notices.push({
      key: "over_budget",
      label: "over budget",
      detail: `The hourly budget ${spent.what} is spent (${spent.used} of ${spent.limit}): ` +
        `${spent.effect}${spent.until === null ? "" : ` until ${spent.until}`}.`,
      fix: "Lifting the hour lets the paused turns go on now.",
      action: { label: "Lift the hourly limit", command: { kind: "op.budget", reset: true } },
      tone: "warning",
    });
  }
  const model = report?.model ?? health?.model;
  if (model !== undefined && model.state !== "ok") {
    notices.push({
      key: "model_failing",
      label: model.state === "stalled" ? "model stalled" : "model failing",
      detail: `The model ${model.state === "stalled" ? "sends nothing" : "fails"}: ${
        model.error ?? "no reason given"
      }.`,
      fix: "Check the route's server and key in the configuration; the turn retries by itself.",
      tone: "warning",
    });
  }
  const sandbox = health?.sandbox;
  if (sandbox !== undefined && sandbox.mode !== "bwrap") {
    notices.push({
      key: "sandbox_off",
      label: "sandbox off",
      detail: `Cells run unconfined: ${sandbox.reason ?? "bubblewrap cannot run here"}.`,
      fix: "Install bubblewrap (apt-get install bubblewrap) and restart the daemon.",
      tone: "error",
    });
  }
  return notices;
}

/** Why a message sent now waits, or undefined when nothing holds it. */
export function waitReason(notices: StateNotice[]): string | undefined {
  const holding = notices.find((n) =>
    n.key === "stopped" || n.key === "drained" || n.key === "draining" || n.key === "stalled" ||
    n.key === "over_budget"
  );
  return holding === undefined ? undefined : `waits: ${holding.label} — ${holding.fix}`;
}
