/**
 * Every state a person must know of, in words, from `/health` (read by the daemon's schema),
 * `op.status` and the records: stopped, draining, drained, stalled, over budget, model failing,
 * sandbox off — each with what it means for a message sent now and its fix, an operator command
 * where the fix is one. The session's own state (held, stalled) is the page's session's:
 * `/health` reports only the default session's, so another session's page takes it from
 * `op.status`; from `/health` it takes only what is the daemon's (budgets, model, sandbox).
 *
 * @module
 */

import type { SessionStatus } from "../../runtime/core/mod.ts";
import type { HealthInfo } from "./lane_client.ts";
import type { TurnView } from "./turn_view.ts";

/** The session `/health` reports the loop of. */
export const HEALTH_SESSION = "default";

/** The page's own session, whose state the page says. */
export interface OwnSession {
  /** The session the page shows. */
  session: string;
  /** What `op.status` said last; undefined until the operator's page has asked. */
  status: { sessions: Record<string, Pick<SessionStatus, "state" | "stalled">> } | undefined;
}

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
 * The page's session's loop: `op.status`'s word on it, else `/health`'s on the default
 * session's page only; undefined when neither says.
 */
function ownLoop(
  health: HealthInfo | undefined,
  own: OwnSession,
): Pick<SessionStatus, "state" | "stalled"> | undefined {
  const mine = own.status?.sessions[own.session];
  if (mine !== undefined) return { state: mine.state, stalled: mine.stalled };
  const report = health?.report;
  if (own.session !== HEALTH_SESSION || report === undefined) return undefined;
  return { state: report.session_state, stalled: report.stalled };
}

/**
 * The states to say now, the most pressing first; empty while all is well.
 *
 * @example
 * ```ts
 * const own = { session: client.session, status: client.status };
 * sessionStates(client.health, turns, own).map((s) => s.label); // ["drained"]
 * ```
 */
export function sessionStates(
  health: HealthInfo | undefined,
  turns: Pick<TurnView, "stalled">,
  own: OwnSession,
): StateNotice[] {
  const report = health?.report;
  const loop = ownLoop(health, own);
  const notices: StateNotice[] = [];
  const held = loop?.state;
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
  if (loop?.stalled === true || turns.stalled) {
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
