/** @jsxRuntime automatic */
/** @jsxImportSource preact */
/**
 * The runtime-events lane: frames, kernel resets, activations, hook failures, operator
 * commands, turns, and any record type the page does not know, shown generically.
 *
 * @module
 */

import type { JSX } from "preact";
import { useState } from "preact/hooks";
import { FollowScroll } from "./follow_scroll.tsx";
import { isoTime, when } from "./format.ts";
import type { EventItem } from "./lane_view.ts";
import type { Notice } from "./lane_client.ts";
import { StateBadge } from "./state_badge.tsx";

/** Props of {@linkcode EventsLane}. */
export interface EventsLaneProps {
  /** Changes when the lane\'s content does, so the lane can follow it. */
  contentKey: string;
  events: EventItem[];
  /** Refusals the daemon sent that no request waited for. */
  notices: readonly Notice[];
}

/** The runtime-events lane. */
export function EventsLane(props: EventsLaneProps): JSX.Element {
  // One button shows every record's data: the toggles themselves stay out of the tab order.
  const [data, setData] = useState(false);
  return (
    <section class="lane lane-events" id="lane-events" aria-labelledby="h-events">
      <h2 id="h-events">Runtime events</h2>
      <button
        type="button"
        class="link-button events-data"
        aria-pressed={data ? "true" : "false"}
        onClick={() => setData(!data)}
      >
        {data ? "Hide each record's data" : "Show each record's data"}
      </button>
      <FollowScroll contentKey={props.contentKey} what="events">
        {props.notices.length > 0 && (
          <ul class="notices" aria-label="Refusals from the daemon">
            {props.notices.map((notice) => (
              <li key={notice.at + notice.code} class="notice">
                <StateBadge tone="error" label={notice.code} /> {notice.message}
              </li>
            ))}
          </ul>
        )}
        {props.events.length === 0 && <p class="empty">No runtime events yet.</p>}
        <ol class="items" aria-label="Events">
          {props.events.map((event) => (
            <li
              key={event.seq}
              class={`event event-${event.severity}`}
              data-seq={event.seq}
              data-type={event.type}
            >
              <div class="meta">
                <span class="seq">#{event.seq}</span>
                <time dateTime={isoTime(event.at)}>{when(event.at)}</time>
                {event.severity !== "info" && (
                  <StateBadge
                    tone={event.severity}
                    label={event.severity === "error" ? "error" : "warning"}
                  />
                )}
              </div>
              <p class="event-title">{event.title}</p>
              {event.detail !== "" && <p class="event-detail">{event.detail}</p>}
              <details class="event-data" open={data}>
                <summary tabIndex={-1}>
                  data<span class="sr-only">of {event.type} #{event.seq}</span>
                </summary>
                <pre class="text">{JSON.stringify(event.data, null, 2)}</pre>
              </details>
            </li>
          ))}
        </ol>
      </FollowScroll>
    </section>
  );
}
