/** @jsxRuntime automatic */
/** @jsxImportSource preact */
/**
 * The header's word on the daemon's health: nothing while all is well; while the model is not
 * answering, the session stalled or `/health` says `degraded` or `failing`, a badge saying so
 * (and the header turns amber, see `troubleTone` in `health_words.ts`).
 *
 * @module
 */

import type { JSX } from "preact";
import type { HealthInfo } from "./lane_client.ts";
import { healthWords } from "./health_words.ts";
import { StateBadge } from "./state_badge.tsx";
import type { TurnView } from "./turn_view.ts";

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
