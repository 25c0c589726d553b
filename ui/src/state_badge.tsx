/** @jsxRuntime automatic */
/** @jsxImportSource preact */
/**
 * A state label: a symbol and words, never colour alone.
 *
 * @module
 */

import type { JSX } from "preact";

/** The look of a badge; each has its own symbol as well as its colour. */
export type BadgeTone = "pending" | "progress" | "ok" | "error" | "warning" | "partial" | "info";

const ICONS: Record<BadgeTone, string> = {
  pending: "◷",
  progress: "▶",
  ok: "✓",
  error: "✕",
  warning: "!",
  partial: "◐",
  info: "•",
};

/** Shows `label` with the tone's symbol. */
export function StateBadge(props: { tone: BadgeTone; label: string; title?: string }): JSX.Element {
  return (
    <span class={`badge badge-${props.tone}`} title={props.title}>
      <span aria-hidden="true" class="badge-icon">{ICONS[props.tone]}</span> {props.label}
    </span>
  );
}
