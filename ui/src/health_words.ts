/**
 * What the header says of the daemon's health, from `/health` and the records: whether it is
 * troubled (amber while degraded or the model fails, red while failing) and in which words.
 *
 * @module
 */

import type { HealthInfo } from "./lane_client.ts";
import { HEALTH_SESSION, type OwnSession } from "./session_states.ts";
import type { TurnView } from "./turn_view.ts";

/**
 * The reasons `/health` gives for the default session's own trouble (`degradedReasons` in
 * `runtime/daemon/_health.ts`): held by the operator, stalled, its inputs waiting. Matched by
 * their words, since `/health` may come without a report that parses.
 */
const DEFAULT_SESSION_REASONS = [
  /^the session is (stopped|draining|drained)\b.* until klbr resume default$/,
  /^the session stalled after its retries$/,
  /^\d+ input\(s\) waiting over \d+ ms$/,
];

/**
 * `/health` as the page's session sees it. On the default session's page, `/health` itself. On
 * another session's page, without the default session's own trouble (held, stalled, its inputs
 * waiting), which `/health` counts in `degraded`, and with the page's own hold or stall from
 * `op.status` instead; `failing` (admission, the store) is the daemon's and stays.
 *
 * @example
 * ```ts
 * const health = pageHealth(client.health, { session: client.session, status: client.status });
 * troubleTone(health, turns); // "none" on b's page while only the default session is stopped
 * ```
 */
export function pageHealth(
  health: HealthInfo | undefined,
  own: OwnSession,
): HealthInfo | undefined {
  if (health === undefined || own.session === HEALTH_SESSION) return health;
  const mine = own.status?.sessions[own.session];
  const reasons = [
    ...health.reasons.filter((reason) => !DEFAULT_SESSION_REASONS.some((r) => r.test(reason))),
    ...(mine === undefined ? [] : ownReasons(own.session, mine)),
  ];
  const status = health.status === "degraded" || health.status === "ok"
    ? (reasons.length > 0 ? "degraded" : "ok")
    : health.status;
  return { ...health, status, reasons };
}

/** Why the page's own session is degraded, in `/health`'s words for the default session. */
function ownReasons(session: string, loop: { state: string; stalled: boolean }): string[] {
  const held = loop.state === "stopped"
    ? `the session is stopped by the operator: new messages wait until klbr resume ${session}`
    : loop.state === "draining"
    ? `the session is draining: its turn finishes, then new messages wait until klbr resume ${session}`
    : loop.state === "drained"
    ? `the session is drained by the operator: new messages wait until klbr resume ${session}`
    : undefined;
  return [
    ...(held === undefined ? [] : [held]),
    ...(loop.stalled ? ["the session stalled after its retries"] : []),
  ];
}

/** How troubled the page's header looks: `none`, `amber` (degraded) or `red` (failing). */
export function troubleTone(
  health: HealthInfo | undefined,
  turns: Pick<TurnView, "stalled" | "current">,
): "none" | "amber" | "red" {
  if (health?.status === "failing") return "red";
  if (health?.status === "degraded" || turns.stalled || turns.current !== undefined) {
    return "amber";
  }
  return "none";
}

/** The words of the header's health badge, or undefined when there is nothing to say. */
export function healthWords(
  health: HealthInfo | undefined,
  turns: Pick<TurnView, "stalled" | "current">,
): { label: string; detail: string } | undefined {
  const model = health?.model;
  if (health?.status === "failing") {
    return { label: "daemon failing", detail: health.reasons.join("; ") };
  }
  if (model !== undefined && model.state !== "ok") {
    return {
      label: model.state === "stalled" ? "model stalled" : "model not answering",
      // `/health`'s error already starts with the route when it names one.
      detail: model.error ?? model.route ?? "",
    };
  }
  if (turns.stalled) {
    return { label: "session stalled", detail: "retries stopped after failed attempts" };
  }
  if (turns.current !== undefined) {
    return { label: "model not answering", detail: turns.current.reason };
  }
  if (health?.status === "degraded") {
    return { label: "degraded", detail: health.reasons.join("; ") };
  }
  return undefined;
}
