/** @jsxRuntime automatic */
/** @jsxImportSource preact */
/**
 * The conversation lane: admitted inputs and explicit sends in `seq` order, each with its
 * state (a failing model inline under the message waiting on it, the model and tokens of the
 * turn that answered it), drafts a turn ended with and never sent, then this page's inputs
 * that have no record yet.
 *
 * @module
 */

import type { ComponentChildren, JSX } from "preact";
import { isoTime, when } from "./format.ts";
import type { PendingInput } from "./input_outbox.ts";
import { shortId } from "./event_titles.ts";
import {
  type ConversationItem,
  dispositionLabel,
  type InputItem,
  type SendItem,
} from "./lane_view.ts";
import { renderMarkdown } from "./markdown.ts";
import { conversationLabel } from "./discord_names.ts";
import { sendLabel } from "./outbox_view.ts";
import { type BadgeTone, StateBadge } from "./state_badge.tsx";
import { FollowScroll } from "./follow_scroll.tsx";
import { DraftRow, TroubleLine, TurnLine } from "./turn_rows.tsx";
import type { TurnView, UnsentDraft } from "./turn_view.ts";
import { WaitReason } from "./state_line.tsx";

/** The badge of an admitted input. */
export function inputBadge(item: InputItem): { tone: BadgeTone; label: string } {
  const d = item.disposition;
  const label = dispositionLabel(d);
  if (d.state === "pending") return { tone: "pending", label };
  if (d.state === "returned" || d.state === "dismissed") return { tone: "warning", label };
  if (d.end === "failed") return { tone: "error", label };
  return { tone: d.end === "done" ? "ok" : "progress", label };
}

/** The badge of an input that has no record yet. */
export function pendingBadge(item: PendingInput): { tone: BadgeTone; label: string } {
  switch (item.status) {
    case "queued":
      return { tone: "pending", label: "not sent yet" };
    case "sent":
      return { tone: "pending", label: "sent · awaiting acknowledgement" };
    case "acked":
      return {
        tone: "ok",
        label: `acknowledged${item.duplicate ? " (already admitted)" : ""} · pending`,
      };
    case "failed":
      return { tone: "error", label: `refused: ${item.error?.code ?? "error"}` };
  }
}

function sendTone(state: string): BadgeTone {
  if (state === "delivered" || state === "confirmed") return "ok";
  if (state === "failed") return "error";
  if (state === "unknown") return "warning";
  if (state === "attempting") return "progress";
  return "pending";
}

function sendBadge(item: SendItem): { tone: BadgeTone; label: string } {
  return { tone: sendTone(item.state), label: sendLabel(item.state, item.delivery) };
}

function Meta(props: { children: ComponentChildren; at: number }): JSX.Element {
  return (
    <div class="meta">
      {props.children}
      <time dateTime={isoTime(props.at)}>{when(props.at)}</time>
    </div>
  );
}

function frameTitle(item: InputItem): string {
  const d = item.disposition;
  const frame = d.state === "consumed" || d.state === "returned" ? ` · frame ${d.frameId}` : "";
  return `input ${item.inputId}${frame}`;
}

function InputRow({ item, turns }: { item: InputItem; turns: TurnView }): JSX.Element {
  const badge = inputBadge(item);
  const discord = item.sourceKind === "discord";
  const trouble = turns.trouble.get(item.inputId);
  const frameId = turns.turnOfInput.get(item.inputId);
  const turn = frameId === undefined ? undefined : turns.turns.get(frameId);
  // A turn's line goes under the last message it took up.
  const showTurn = turn !== undefined && turn.replies > 0 &&
    turn.inputIds.at(-1) === item.inputId;
  return (
    <li
      class={`msg msg-input${discord ? " msg-discord" : ""}`}
      data-seq={item.seq}
      data-input-id={item.inputId}
    >
      <Meta at={item.at}>
        <span class="who" title={item.author}>{item.authorName}</span>
        <span class="where" title={item.conversation}>
          {discord ? "on Discord" : item.sourceKind} · {conversationLabel(item.conversation)}
        </span>
      </Meta>
      <div class="body plain">{item.text}</div>
      <StateBadge tone={badge.tone} label={badge.label} title={frameTitle(item)} />
      {item.disposition.state === "pending" && <WaitReason />}
      {trouble !== undefined && <TroubleLine trouble={trouble} />}
      {showTurn && <TurnLine turn={turn} />}
    </li>
  );
}

function SendRow({ item }: { item: SendItem }): JSX.Element {
  const badge = sendBadge(item);
  const delivery = item.delivery;
  return (
    <li
      class={`msg msg-send${delivery === undefined ? "" : " msg-discord"}`}
      data-seq={item.seq}
      data-send-id={item.sendId}
    >
      <Meta at={item.at}>
        <span class="who">agent</span>
        <span class="where" title={item.conversation}>
          {delivery === undefined ? "to" : "to Discord ·"} {conversationLabel(item.conversation)}
        </span>
      </Meta>
      <div
        class="body markdown"
        // Sanitised by DOMPurify in renderMarkdown: no script, no handlers, no fetches.
        dangerouslySetInnerHTML={{ __html: renderMarkdown(item.text) }}
      />
      <StateBadge tone={badge.tone} label={badge.label} title={item.sendId} />
      {delivery !== undefined && (
        <>
          {item.state === "unknown" && delivery.error !== undefined && (
            <p class="note">reason: {delivery.error}</p>
          )}
          <ol class="delivery-steps" aria-label={`delivery of ${item.sendId}`}>
            <li data-step="pending">
              pending <time dateTime={isoTime(item.at)}>{when(item.at)}</time>
            </li>
            {delivery.steps.map((step) => (
              <li key={step.seq} data-seq={step.seq} data-step={step.state}>
                {step.state} <time dateTime={isoTime(step.at)}>{when(step.at)}</time>
              </li>
            ))}
          </ol>
        </>
      )}
    </li>
  );
}

/** Props of {@linkcode ConversationLane}. */
export interface ConversationLaneProps {
  items: ConversationItem[];
  pending: readonly PendingInput[];
  onRetry: (clientMsgId: string) => void;
  onDiscard: (clientMsgId: string) => void;
  /** What the turns did: model trouble, usage and unsent drafts. */
  turns: TurnView;
  /** Changes when the lane's content does, so the lane can follow it. */
  contentKey: string;
  /** Set while a search hides part of the lane. */
  filtered?: boolean;
  children?: ComponentChildren;
}

type Row = { kind: "item"; item: ConversationItem } | { kind: "draft"; draft: UnsentDraft };

/** The lane's rows in `seq` order: messages, sends and the drafts turns did not send. */
function rows(items: ConversationItem[], turns: TurnView): Row[] {
  const shown = new Set(items.map((item) => item.lane === "input" ? item.inputId : ""));
  const all: Row[] = items.map((item) => ({ kind: "item", item }));
  for (const [inputId, draft] of turns.drafts) {
    if (shown.has(inputId)) all.push({ kind: "draft", draft });
  }
  const seqOf = (row: Row) => row.kind === "item" ? row.item.seq : row.draft.seq;
  return all.sort((a, b) => seqOf(a) - seqOf(b));
}

/** The conversation lane, with the composer as its child. */
export function ConversationLane(props: ConversationLaneProps): JSX.Element {
  return (
    <section class="lane lane-conversation" id="lane-conversation" aria-labelledby="h-conversation">
      <h2 id="h-conversation">Conversation</h2>
      <FollowScroll contentKey={props.contentKey} what="messages">
        {props.items.length === 0 && props.pending.length === 0 && (
          <p class="empty">
            {props.filtered
              ? "No message matches the search."
              : "No messages yet. Inputs and the agent's sends appear here."}
          </p>
        )}
        <ol class="items" aria-label="Messages">
          {rows(props.items, props.turns).map((row) =>
            row.kind === "draft"
              ? <DraftRow key={`draft-${row.draft.seq}`} draft={row.draft} />
              : row.item.lane === "input"
              ? <InputRow key={row.item.seq} item={row.item} turns={props.turns} />
              : <SendRow key={row.item.seq} item={row.item} />
          )}
          {props.pending.map((item) => {
            const badge = pendingBadge(item);
            return (
              <li
                key={item.clientMsgId}
                class="msg msg-input msg-unrecorded"
                data-client-msg-id={item.clientMsgId}
              >
                <Meta at={item.createdAt}>
                  <span class="who">you</span>
                  <span class="where">{item.conversation}</span>
                </Meta>
                <div class="body plain">{item.text}</div>
                <StateBadge
                  tone={badge.tone}
                  label={badge.label}
                  title={item.inputId ?? item.clientMsgId}
                />
                {item.status === "failed" && (
                  <div class="row-actions">
                    <span class="error-text">{item.error?.message}</span>
                    <button
                      type="button"
                      onClick={() => props.onRetry(item.clientMsgId)}
                    >
                      Retry
                    </button>
                    <button
                      type="button"
                      onClick={() =>
                        props.onDiscard(item.clientMsgId)}
                    >
                      Discard
                    </button>
                  </div>
                )}
                {item.inputId !== undefined && (
                  <span class="sr-only">input id {shortId(item.inputId)}</span>
                )}
              </li>
            );
          })}
        </ol>
      </FollowScroll>
      {props.children}
    </section>
  );
}
