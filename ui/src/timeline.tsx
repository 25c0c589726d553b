/** @jsxRuntime automatic */
/** @jsxImportSource preact */
/**
 * One conversation's timeline: the owner's messages and the agent's sends, and under each
 * message the turn that took it up — one line once done ("worked 14 s · 3 cells · 2,048
 * tokens"), open while it runs with its reasoning, drafts, cells (live output and Cancel)
 * and the timers and jobs it set.
 *
 * Only a window of rows near the viewport is rendered: the newest ones at first; scrolling up
 * shows earlier rows and, past the oldest the page holds, asks the daemon for the page before
 * it. However long the session, the page renders at most {@linkcode MAX_RENDERED} rows.
 *
 * @module
 */

import { WaitReason } from "./state_line.tsx";
import type { ComponentChildren, JSX } from "preact";
import { useEffect, useState } from "preact/hooks";
import { type ArtifactTarget, ArtifactViewer } from "./artifact_viewer.tsx";
import { AttachmentList } from "./attachment_list.tsx";
import { Cell } from "./cells_lane.tsx";
import { CopyButton } from "./copy_button.tsx";
import { CollapsibleText } from "./collapsible_text.tsx";
import { frameTitle, inputBadge, Meta, PendingRow, SendRow } from "./conversation_lane.tsx";
import { conversationLabel } from "./discord_names.ts";
import { FollowScroll } from "./follow_scroll.tsx";
import { isoTime, when } from "./format.ts";
import type { PendingInput } from "./input_outbox.ts";
import type { InputItem, ScratchItem } from "./lane_view.ts";
import { StateBadge } from "./state_badge.tsx";
import { LOOSE, type TimelineRow, type TurnBlock, turnSummary } from "./timeline_view.ts";
import { DraftRow, TroubleLine, TurnLine } from "./turn_rows.tsx";
import type { TurnView } from "./turn_view.ts";
import { useNow } from "./use_now.ts";

/** Rows rendered at first, and added or dropped at a time as the person scrolls. */
export const WINDOW_STEP = 40;
/** The most rows rendered at once. */
export const MAX_RENDERED = 200;
/** Rows a conversation's timeline fetches earlier pages for on its own, up to. */
const FILL_ROWS = 12;

/** What the timeline's rows need from the page. */
export interface TimelineContext {
  turns: TurnView;
  /** Live model text per turn, lossy. */
  liveTokens: ReadonlyMap<string, string>;
  /** Live reasoning per turn, lossy. */
  liveReasoning: ReadonlyMap<string, string>;
  /** Live output per cell id, lossy. */
  liveCells: ReadonlyMap<string, { stdout: string; stderr: string }>;
  /** Cancels a running cell; absent without the operator role. */
  onCancel?: (cellId: string) => Promise<unknown>;
  onOpen: (target: ArtifactTarget) => void;
}

function DraftItem({ item }: { item: ScratchItem }): JSX.Element {
  return (
    <li class="draft" data-seq={item.seq}>
      <div class="meta">
        <span class="who">{item.reasoning ? "reasoning" : "scratchpad"}</span>
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
  );
}

/** What a turn is streaming (its text, its reasoning): lossy, replaced by its record. */
function LiveDraft(
  { who, data, children }: {
    who: string;
    data: Record<string, string>;
    children: ComponentChildren;
  },
): JSX.Element {
  return (
    <div class="draft draft-live" {...data}>
      <div class="meta">
        <span class="who">{who}</span>
        <StateBadge tone="progress" label="live · not saved yet" />
      </div>
      {children}
    </div>
  );
}

/** A turn's work: folded to one line once done, open while it runs. */
export function TurnWork(
  { turn, context }: { turn: TurnBlock; context: TimelineContext },
): JSX.Element {
  const running = turn.state === "running";
  const now = useNow(1000, running);
  const live = context.liveTokens.get(turn.frameId) ?? "";
  const thinking = context.liveReasoning.get(turn.frameId) ?? "";
  const title = turn.frameId.startsWith(LOOSE)
    ? "work outside a turn"
    : `turn ${turn.number ?? "?"} · frame ${turn.frameId}`;
  return (
    <details class={`turn turn-${turn.state}`} open={running} data-frame-id={turn.frameId}>
      <summary title={title}>
        <StateBadge
          tone={running
            ? "progress"
            : turn.state === "done"
            ? "ok"
            : turn.state === "failed"
            ? "error"
            : "warning"}
          label={turnSummary(turn, now)}
        />
      </summary>
      <div class="turn-body">
        {turn.info !== undefined && <TurnLine turn={turn.info} />}
        {turn.drafts.length > 0 && (
          <ol class="items drafts" aria-label="Reasoning and drafts">
            {turn.drafts.map((item) => <DraftItem key={item.seq} item={item} />)}
          </ol>
        )}
        {thinking !== "" && (
          <LiveDraft who="reasoning" data={{ "data-live-reasoning": turn.frameId }}>
            <details class="reasoning">
              <summary>reasoning · {thinking.length} characters so far</summary>
              <pre class="text">{thinking}</pre>
            </details>
          </LiveDraft>
        )}
        {live !== "" && (
          <LiveDraft who="streaming" data={{ "data-live-turn": turn.frameId }}>
            <pre class="text">{live}</pre>
          </LiveDraft>
        )}
        {turn.cells.length > 0 && (
          <ol class="items cells" aria-label="Cells">
            {turn.cells.map((cell) => (
              <Cell
                key={cell.seq}
                cell={cell}
                live={context.liveCells.get(cell.cellId)}
                now={now}
                onOpen={context.onOpen}
                onCancel={context.onCancel}
              />
            ))}
          </ol>
        )}
        {turn.set.length > 0 && (
          <ul class="turn-set" aria-label="Timers and jobs it set">
            {turn.set.map((item) => <li key={item.id} title={item.id}>{item.label}</li>)}
          </ul>
        )}
      </div>
    </details>
  );
}

function InputRow(
  { item, turns, context }: { item: InputItem; turns: TurnBlock[]; context: TimelineContext },
): JSX.Element {
  const badge = inputBadge(item);
  const discord = item.sourceKind === "discord";
  const trouble = context.turns.trouble.get(item.inputId);
  return (
    <li
      class={`msg msg-input${discord ? " msg-discord" : ""}`}
      data-seq={item.seq}
      data-input-id={item.inputId}
      data-author={item.author}
    >
      <Meta at={item.at}>
        <span class="who" title={item.author}>{item.authorName}</span>
        <span class="where" title={item.conversation}>
          {discord ? "on Discord" : item.sourceKind} · {conversationLabel(item.conversation)}
        </span>
      </Meta>
      {item.text !== "" && <div class="body plain">{item.text}</div>}
      <AttachmentList files={item.attachments} onOpen={context.onOpen} />
      <StateBadge tone={badge.tone} label={badge.label} title={frameTitle(item)} />
      <CopyButton text={item.text} what="the message" />
      {item.disposition.state === "pending" && <WaitReason />}
      {trouble !== undefined && <TroubleLine trouble={trouble} />}
      {turns.map((turn) => <TurnWork key={turn.frameId} turn={turn} context={context} />)}
    </li>
  );
}

function Row({ row, context }: { row: TimelineRow; context: TimelineContext }): JSX.Element {
  switch (row.kind) {
    case "input":
      return <InputRow item={row.item} turns={row.turns} context={context} />;
    case "send":
      return <SendRow item={row.item} />;
    case "draft":
      return <DraftRow draft={row.draft} />;
    case "turn":
      return (
        <li class="msg msg-turn" data-frame-id={row.turn.frameId}>
          <div class="meta">
            <span class="who">agent</span>
            <span class="where">woke without a message</span>
          </div>
          <TurnWork turn={row.turn} context={context} />
        </li>
      );
  }
}

function rowKey(row: TimelineRow): string {
  return row.kind === "turn" ? `turn-${row.turn.frameId}` : `${row.kind}-${row.seq}`;
}

/** Props of {@linkcode Timeline}. */
export interface TimelineProps {
  conversation: string;
  rows: readonly TimelineRow[];
  context: Omit<TimelineContext, "onOpen">;
  pending: readonly PendingInput[];
  onRetry: (clientMsgId: string) => void;
  onDiscard: (clientMsgId: string) => void;
  /** Changes when the content does, so the timeline can follow it. */
  contentKey: string;
  /**
   * Whether older records exist than the page holds, whether they are on their way, and why
   * the daemon refused the last ask for them (then only the person asks again).
   */
  earlier: { has: boolean; loading: boolean; capped: boolean; refused?: string };
  onLoadEarlier: () => void;
  /** Set while a search hides part of the timeline. */
  filtered?: boolean;
  /** A place above the rows for state lines and banners of the conversation. */
  lines?: ComponentChildren;
  children?: ComponentChildren;
}

/** The timeline of one conversation, windowed, with the composer as its child. */
export function Timeline(props: TimelineProps): JSX.Element {
  const [viewing, setViewing] = useState<ArtifactTarget | undefined>(undefined);
  // The window: `size` rows ending with the row of `endSeq`, or with the newest row while
  // `endSeq` is unset (following). Scrolled away from the bottom, the window is pinned by seq,
  // so rows that arrive (or earlier rows paged in above) never move what the person reads.
  const [window, setWindow] = useState<{ endSeq: number | undefined; size: number }>({
    endSeq: undefined,
    size: WINDOW_STEP,
  });
  const rows = props.rows;
  const total = rows.length;
  const endOf = (endSeq: number | undefined) => {
    if (endSeq === undefined) return total;
    const after = rows.findIndex((row) => row.seq > endSeq);
    return after === -1 ? total : after;
  };
  const end = endOf(window.endSeq);
  const start = Math.max(0, end - window.size);
  const shown = rows.slice(start, end);
  const context: TimelineContext = { ...props.context, onOpen: setViewing };
  const earlierHere = start > 0;
  // A conversation whose newest messages lie behind a busier one's: its own pages are asked
  // for until a screenful is held (each brings at least one message, so this ends).
  const { has, loading, capped, refused } = props.earlier;
  useEffect(() => {
    if (total < FILL_ROWS && has && !loading && !capped && !props.filtered && !refused) {
      props.onLoadEarlier();
    }
  }, [total, has, loading, capped, props.filtered, refused]);
  const showEarlier = () => {
    if (!earlierHere) {
      if (!has || capped || loading) return;
      // The rows it brings show at once: the window grows to take them.
      setWindow((w) => ({
        endSeq: w.endSeq ?? rows.at(-1)?.seq,
        size: Math.min(MAX_RENDERED, w.size + WINDOW_STEP),
      }));
      props.onLoadEarlier();
      return;
    }
    setWindow((w) => {
      const e = endOf(w.endSeq);
      if (w.size < MAX_RENDERED) {
        return { endSeq: w.endSeq ?? rows.at(-1)?.seq, size: w.size + WINDOW_STEP };
      }
      // At most MAX_RENDERED rows: the window slides up, dropping rows below.
      const slid = Math.max(w.size, e - WINDOW_STEP);
      return { endSeq: rows[slid - 1]?.seq, size: w.size };
    });
  };
  const showLater = (atBottom: boolean) => {
    if (window.endSeq === undefined) return;
    setWindow((w) => {
      const e = endOf(w.endSeq) + WINDOW_STEP;
      if (e < total) return { endSeq: rows[e - 1].seq, size: w.size };
      // Every row is shown: follow the newest again once the person is at the bottom.
      return { endSeq: atBottom ? undefined : rows.at(-1)?.seq, size: w.size };
    });
  };
  const pin = () => {
    if (window.endSeq === undefined && total > 0) {
      setWindow((w) => ({ endSeq: rows.at(-1)?.seq, size: w.size }));
    }
  };
  const newest = () => setWindow({ endSeq: undefined, size: WINDOW_STEP });
  const later = end < total;
  const pending = props.pending.filter((item) => item.conversation === props.conversation);
  return (
    <section class="timeline" id="timeline" aria-labelledby="h-timeline">
      <h2 id="h-timeline">{conversationLabel(props.conversation)}</h2>
      {props.lines}
      <FollowScroll
        contentKey={props.contentKey}
        what="messages"
        onNearTop={showEarlier}
        onNearBottom={showLater}
        onAway={pin}
        onJump={newest}
      >
        <div class="earlier">
          {refused !== undefined && !loading && (
            <p class="error-text" role="alert">Cannot load earlier messages: {refused}</p>
          )}
          {earlierHere || (has && !capped)
            ? (
              <button
                type="button"
                class="link-button load-earlier"
                disabled={loading}
                onClick={showEarlier}
              >
                {loading ? "Loading earlier messages…" : "Load earlier messages"}
              </button>
            )
            : capped
            ? <p class="note">Older records are not kept on this page.</p>
            : total > 0
            ? <p class="note">The start of the conversation.</p>
            : null}
        </div>
        {total === 0 && pending.length === 0 && (
          <p class="empty">
            {props.filtered
              ? "No message matches the search."
              : "No messages yet. Your messages, the agent's sends and its work appear here."}
          </p>
        )}
        <ol class="items" aria-label="Messages">
          {shown.map((row) => <Row key={rowKey(row)} row={row} context={context} />)}
          {!later && pending.map((item) => (
            <PendingRow
              key={item.clientMsgId}
              item={item}
              onRetry={props.onRetry}
              onDiscard={props.onDiscard}
            />
          ))}
        </ol>
        {later && (
          <button
            type="button"
            class="link-button show-later"
            onClick={() => showLater(false)}
          >
            Show later messages
          </button>
        )}
      </FollowScroll>
      {props.children}
      {viewing !== undefined && (
        <ArtifactViewer
          target={viewing}
          onClose={() => setViewing(undefined)}
        />
      )}
    </section>
  );
}
