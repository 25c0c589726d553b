/** @jsxRuntime automatic */
/** @jsxImportSource preact */
/**
 * The timeline's messages: an explicit send with its delivery state, and this page's inputs
 * that have no record yet; the badges of inputs and sends in words.
 *
 * @module
 */

import { AttachmentList } from "./attachment_list.tsx";
import type { ComponentChildren, JSX } from "preact";
import { isoTime, when } from "./format.ts";
import { CopyButton } from "./copy_button.tsx";
import type { PendingInput } from "./input_outbox.ts";
import { shortId } from "./event_titles.ts";
import { dispositionLabel, type InputItem, type SendItem } from "./lane_view.ts";
import { renderMarkdown } from "./markdown.ts";
import { conversationLabel } from "./discord_names.ts";
import { sendLabel } from "./outbox_view.ts";
import { type BadgeTone, StateBadge } from "./state_badge.tsx";

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
      return {
        tone: "error",
        label: `refused: ${item.error?.code ?? "error"}${
          item.error?.retriable === true ? " · sent again when the page reconnects" : ""
        }`,
      };
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

/** A message's meta line: who, where, and when. */
export function Meta(props: { children: ComponentChildren; at: number }): JSX.Element {
  return (
    <div class="meta">
      {props.children}
      <time dateTime={isoTime(props.at)}>{when(props.at)}</time>
    </div>
  );
}

/** The ids of an input and the frame that took it up, shown on hover only. */
export function frameTitle(item: InputItem): string {
  const d = item.disposition;
  const frame = d.state === "consumed" || d.state === "returned" ? ` · frame ${d.frameId}` : "";
  return `input ${item.inputId}${frame}`;
}

/** One send of the agent, with its delivery state (and a Discord send's steps). */
export function SendRow({ item }: { item: SendItem }): JSX.Element {
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
      <CopyButton text={item.text} what="the message" />
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

/** Props of {@linkcode PendingRow}. */
export interface PendingRowProps {
  item: PendingInput;
  onRetry: (clientMsgId: string) => void;
  onDiscard: (clientMsgId: string) => void;
}

/** One of this page's inputs that has no record yet, with Retry and Discard once refused. */
export function PendingRow({ item, ...props }: PendingRowProps): JSX.Element {
  const badge = pendingBadge(item);
  return (
    <li
      class="msg msg-input msg-unrecorded"
      data-client-msg-id={item.clientMsgId}
    >
      <Meta at={item.createdAt}>
        <span class="who">you</span>
        <span class="where">{item.conversation}</span>
      </Meta>
      {item.text !== "" && <div class="body plain">{item.text}</div>}
      <AttachmentList files={item.attachments ?? []} />
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
            onClick={() => props.onDiscard(item.clientMsgId)}
          >
            Discard
          </button>
        </div>
      )}
      {item.inputId !== undefined && <span class="sr-only">input id {shortId(item.inputId)}</span>}
    </li>
  );
}
