/** @jsxRuntime automatic */
/** @jsxImportSource preact */
/**
 * The scratchpad lane: the model's drafts, which are never speech. Partial drafts are marked
 * partial; text still streaming is shown apart, as not yet saved.
 *
 * @module
 */

import type { JSX } from "preact";
import { FollowScroll } from "./follow_scroll.tsx";
import { CollapsibleText } from "./collapsible_text.tsx";
import { isoTime, when } from "./format.ts";
import type { ScratchItem } from "./lane_view.ts";
import { StateBadge } from "./state_badge.tsx";

/** Props of {@linkcode ScratchpadLane}. */
export interface ScratchpadLaneProps {
  /** Changes when the lane\'s content does, so the lane can follow it. */
  contentKey: string;
  items: ScratchItem[];
  /** Streaming text per turn, lossy. */
  live: ReadonlyMap<string, string>;
}

/** The scratchpad lane. */
export function ScratchpadLane(props: ScratchpadLaneProps): JSX.Element {
  const live = [...props.live.entries()].filter(([, text]) => text !== "");
  return (
    <section class="lane lane-scratchpad" id="lane-scratchpad" aria-labelledby="h-scratchpad">
      <h2 id="h-scratchpad">Scratchpad</h2>
      <FollowScroll contentKey={props.contentKey} what="drafts">
        {props.items.length === 0 && live.length === 0 && (
          <p class="empty">No drafts yet. The model's thinking aloud appears here, never sent.</p>
        )}
        <ol class="items" aria-label="Drafts">
          {props.items.map((item) => (
            <li key={item.seq} class="draft" data-seq={item.seq}>
              <div class="meta">
                <span class="who">{item.reasoning ? "reasoning" : "draft"}</span>
                <time dateTime={isoTime(item.at)}>{when(item.at)}</time>
                {item.partial
                  ? <StateBadge tone="partial" label="partial" />
                  : <StateBadge tone="info" label="complete" />}
              </div>
              {item.reasoning
                ? (
                  <details class="reasoning">
                    <summary>reasoning · {item.text.length} characters</summary>
                    <pre class="text">{item.text}</pre>
                  </details>
                )
                : <CollapsibleText text={item.text} label="draft" lines={16} chars={2500} />}
            </li>
          ))}
          {live.map(([turn, text]) => (
            <li key={`live-${turn}`} class="draft draft-live" data-live-turn={turn}>
              <div class="meta">
                <span class="who">streaming</span>
                <StateBadge tone="progress" label="live · not saved yet" />
              </div>
              <pre class="text">{text}</pre>
            </li>
          ))}
        </ol>
      </FollowScroll>
    </section>
  );
}
