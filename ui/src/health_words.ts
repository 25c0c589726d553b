/**
 * What the header says of the daemon's health, from `/health` and the records: whether it is
 * troubled (amber while degraded or the model fails, red while failing) and in which words.
 *
 * @module
 */

import type { HealthInfo } from "./lane_client.ts";
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
