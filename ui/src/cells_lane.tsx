/** @jsxRuntime automatic */
/** @jsxImportSource preact */
/**
 * The cells lane: each Python cell with its code, stdout, stderr, value or error, outcome and
 * duration; a running cell says so and for how long.
 *
 * @module
 */

import type { JSX } from "preact";
import { CollapsibleText } from "./collapsible_text.tsx";
import { clockTime, duration, isoTime, spooledLabel, toMillis } from "./format.ts";
import { shortId } from "./event_titles.ts";
import type { CellItem, SpooledOutput } from "./cell_view.ts";
import { type BadgeTone, StateBadge } from "./state_badge.tsx";
import { useNow } from "./use_now.ts";

/** Props of {@linkcode CellsLane}. */
export interface CellsLaneProps {
  cells: CellItem[];
  /** Live output per cell id, lossy. */
  live: ReadonlyMap<string, { stdout: string; stderr: string }>;
}

function outcomeTone(outcome: string | undefined): BadgeTone {
  if (outcome === "ok") return "ok";
  if (outcome === "cancelled") return "warning";
  return "error";
}

function Output(
  props: { name: string; text: string; spooled?: SpooledOutput },
): JSX.Element | null {
  if (props.text === "" && props.spooled === undefined) return null;
  return (
    <div class={`output output-${props.name}`}>
      <h3 class="output-name">{props.name}</h3>
      {props.spooled !== undefined && (
        <p class="note spooled" title={props.spooled.id}>
          {spooledLabel(props.name, props.spooled)}
        </p>
      )}
      <CollapsibleText text={props.text} label={props.name} />
    </div>
  );
}

function Cell(
  { cell, live, now }: { cell: CellItem; live?: { stdout: string; stderr: string }; now: number },
): JSX.Element {
  let badge: JSX.Element;
  if (cell.state === "running") {
    badge = <StateBadge tone="progress" label={`running · ${duration(now - toMillis(cell.at))}`} />;
  } else if (cell.state === "interrupted") {
    badge = <StateBadge tone="warning" label="interrupted by a kernel reset" />;
  } else {
    badge = <StateBadge tone={outcomeTone(cell.outcome)} label={cell.outcome ?? "finished"} />;
  }
  return (
    <li class={`cell cell-${cell.state}`} data-seq={cell.seq} data-cell-id={cell.cellId}>
      <div class="meta">
        <span class="who" title={cell.cellId}>{shortId(cell.cellId)}</span>
        <time dateTime={isoTime(cell.at)}>{clockTime(cell.at)}</time>
        {badge}
        {cell.durationMs !== undefined && <span class="duration">{duration(cell.durationMs)}</span>}
      </div>
      <CollapsibleText text={cell.code} label="code" class="code" />
      {cell.state === "running" && live !== undefined && (
        <div class="live-output" aria-label="live output">
          <Output name="stdout (live)" text={live.stdout} />
          <Output name="stderr (live)" text={live.stderr} />
        </div>
      )}
      {cell.finishedAt !== undefined && (
        <div class="cell-result" data-seq={cell.finishedSeq}>
          <Output name="stdout" text={cell.stdout} spooled={cell.stdoutArtifact} />
          <Output name="stderr" text={cell.stderr} spooled={cell.stderrArtifact} />
          {cell.value !== undefined && <Output name="value" text={cell.value} />}
          {cell.error !== undefined && (
            <div class="output output-error">
              <h3 class="output-name">error</h3>
              <p class="error-text">{cell.error.type}: {cell.error.message}</p>
              {cell.error.traceback !== "" && (
                <CollapsibleText text={cell.error.traceback} label="traceback" lines={4} />
              )}
            </div>
          )}
          {cell.wait !== undefined && (
            <p class="note">called wait(){cell.wait === "" ? "" : `: ${cell.wait}`}</p>
          )}
        </div>
      )}
    </li>
  );
}

/** The cells lane. */
export function CellsLane(props: CellsLaneProps): JSX.Element {
  const running = props.cells.some((cell) => cell.state === "running");
  const now = useNow(1000, running);
  return (
    <section class="lane lane-cells" id="lane-cells" aria-labelledby="h-cells">
      <h2 id="h-cells">Cells</h2>
      <div class="lane-scroll">
        {props.cells.length === 0 && (
          <p class="empty">No cells yet. Python the agent runs appears here.</p>
        )}
        <ol class="items" aria-label="Cells">
          {props.cells.map((cell) => (
            <Cell key={cell.seq} cell={cell} live={props.live.get(cell.cellId)} now={now} />
          ))}
        </ol>
      </div>
    </section>
  );
}
