/** @jsxRuntime automatic */
/** @jsxImportSource preact */
/**
 * The header's word on the daemon's health: nothing while all is well; while the model is not
 * answering, the session stalled or `/health` says `degraded` or `failing`, a badge saying so
 * (and the header turns amber, see {@linkcode troubleTone}).
 *
 * @module
 */

import type { JSX } from "preact";
import type { HealthInfo } from "./lane_client.ts";
import { StateBadge } from "./state_badge.tsx";
import type { TurnView } from "./turn_view.ts";

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

/** The header's health badge. */
export function HealthBadge(
  props: { health: HealthInfo | undefined; turns: Pick<TurnView, "stalled" | "current"> },
): JSX.Element | null {
  const words = healthWords(props.health, props.turns);
  if (words === undefined) return null;
  const tone = props.health?.status === "failing" ? "error" : "warning";
  return (
    <span class="health" role="status">
      <StateBadge tone={tone} label={words.label} title={words.detail} />
      {words.detail !== "" && <span class="health-detail">{words.detail}</span>}
    </span>
  );
}
