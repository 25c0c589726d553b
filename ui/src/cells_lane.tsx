/** @jsxRuntime automatic */
/** @jsxImportSource preact */
/**
 * A cell's card, as a turn's work shows it: its code, stdout, stderr, value or error, outcome
 * and duration, the code highlighted; a running cell says so and for how long, and the
 * operator can cancel it; a spooled output opens in the viewer.
 *
 * @module
 */

import { CellDisplays } from "./cell_displays.tsx";
import type { JSX } from "preact";
import { useState } from "preact/hooks";
import type { ArtifactTarget } from "./artifact_viewer.tsx";
import { CollapsibleText } from "./collapsible_text.tsx";
import { duration, isoTime, spooledLabel, toMillis, when } from "./format.ts";
import { shortId } from "./event_titles.ts";
import type { CellItem, SpooledOutput } from "./cell_view.ts";
import { type BadgeTone, StateBadge } from "./state_badge.tsx";

function outcomeTone(outcome: string | undefined): BadgeTone {
  if (outcome === "ok") return "ok";
  if (outcome === "cancelled") return "warning";
  return "error";
}

function Output(
  props: {
    name: string;
    text: string;
    spooled?: SpooledOutput;
    onOpen?: (spooled: SpooledOutput) => void;
  },
): JSX.Element | null {
  if (props.text === "" && props.spooled === undefined) return null;
  const spooled = props.spooled;
  return (
    <div class={`output output-${props.name}`}>
      <h3 class="output-name">{props.name}</h3>
      {spooled !== undefined && (
        <div class="spooled-line">
          <p class="note spooled" title={spooled.id}>{spooledLabel(props.name, spooled)}</p>
          {props.onOpen !== undefined && (
            <button
              type="button"
              class="link-button open-artifact"
              onClick={() => props.onOpen?.(spooled)}
            >
              Open the whole {props.name}
            </button>
          )}
        </div>
      )}
      <CollapsibleText text={props.text} label={props.name} />
    </div>
  );
}

/** What one cell card needs besides the cell. */
export interface CellProps {
  cell: CellItem;
  live?: { stdout: string; stderr: string };
  now: number;
  onOpen: (target: ArtifactTarget) => void;
  onCancel?: (cellId: string) => Promise<unknown>;
}

/** The operator's button that cancels a running cell, with the daemon's answer. */
function CancelButton(
  { cellId, onCancel }: { cellId: string; onCancel: (cellId: string) => Promise<unknown> },
): JSX.Element {
  const [state, setState] = useState<{ busy: boolean; error?: string }>({ busy: false });
  return (
    <span class="cell-cancel">
      <button
        type="button"
        class="danger"
        disabled={state.busy}
        aria-label={`Cancel cell ${shortId(cellId)}`}
        onClick={() => {
          setState({ busy: true });
          onCancel(cellId).then(
            () => setState({ busy: true }),
            (error) => setState({ busy: false, error: String(error?.message ?? error) }),
          );
        }}
      >
        {state.busy ? "Cancelling…" : "Cancel"}
      </button>
      {state.error !== undefined && <span class="error-text" role="alert">{state.error}</span>}
    </span>
  );
}

/** One cell's card: code, live output, outcome and result, and Cancel while it runs. */
export function Cell({ cell, live, now, onOpen, onCancel }: CellProps): JSX.Element {
  const open = (name: string) => (spooled: SpooledOutput) =>
    onOpen({ id: spooled.id, bytes: spooled.bytes, label: `${name} of ${shortId(cell.cellId)}` });
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
        <span class="who" title={cell.cellId}>cell</span>
        <time dateTime={isoTime(cell.at)}>{when(cell.at)}</time>
        {badge}
        {cell.durationMs !== undefined && <span class="duration">{duration(cell.durationMs)}</span>}
        {cell.state === "running" && onCancel !== undefined && (
          <CancelButton cellId={cell.cellId} onCancel={onCancel} />
        )}
      </div>
      <CollapsibleText text={cell.code} label="code" class="code" language="python" copy />
      {cell.state === "running" && live !== undefined && (
        <div class="live-output" aria-label="live output">
          <Output name="stdout (live)" text={live.stdout} />
          <Output name="stderr (live)" text={live.stderr} />
        </div>
      )}
      {cell.finishedAt !== undefined && (
        <div class="cell-result" data-seq={cell.finishedSeq}>
          <Output
            name="stdout"
            text={cell.stdout}
            spooled={cell.stdoutArtifact}
            onOpen={open("stdout")}
          />
          <Output
            name="stderr"
            text={cell.stderr}
            spooled={cell.stderrArtifact}
            onOpen={open("stderr")}
          />
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
          {cell.displays.length > 0 && <CellDisplays displays={cell.displays} />}
          {cell.wait !== undefined && (
            <p class="note">called wait(){cell.wait === "" ? "" : `: ${cell.wait}`}</p>
          )}
        </div>
      )}
    </li>
  );
}
