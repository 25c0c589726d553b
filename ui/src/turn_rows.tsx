/** @jsxRuntime automatic */
/** @jsxImportSource preact */
/**
 * What the conversation shows of a turn beside the message it answers: the model failing
 * (inline, until it answers), the model, route and token counts of the turn, and a draft the
 * turn ended with and never sent.
 *
 * @module
 */

import type { JSX } from "preact";
import { isoTime, tokenCount, when } from "./format.ts";
import { renderMarkdown } from "./markdown.ts";
import { StateBadge } from "./state_badge.tsx";
import { type ModelTrouble, troubleText, type TurnInfo, type UnsentDraft } from "./turn_view.ts";
import { useNow } from "./use_now.ts";

/** The model failing for a message: the reason, the attempt and when it is tried again. */
export function TroubleLine({ trouble }: { trouble: ModelTrouble }): JSX.Element {
  const counting = !trouble.stalled && trouble.nextAt !== undefined;
  const now = useNow(1000, counting);
  return (
    <div class="trouble" role="status" data-trouble-attempt={trouble.attempt}>
      <StateBadge
        tone="warning"
        label={trouble.stalled ? "model not answering · stalled" : "model not answering"}
      />
      <p class="trouble-text">{troubleText(trouble, now)}</p>
      {trouble.reason !== "" && <p class="trouble-reason">reason: {trouble.reason}</p>}
    </div>
  );
}

function names(values: string[]): string {
  return values.length === 0 ? "?" : values.join(", ");
}

/** The turn that answered a message: its model and route and what it used. */
export function TurnLine({ turn }: { turn: TurnInfo }): JSX.Element {
  const u = turn.usage;
  return (
    <dl class="turn-line" data-frame-id={turn.frameId} aria-label={`turn ${turn.number}`}>
      <div>
        <dt>turn</dt>
        <dd title={`frame ${turn.frameId}`}>{turn.number}</dd>
      </div>
      <div>
        <dt>model</dt>
        <dd data-field="model">
          {turn.models.length === 0 ? "not named" : names(turn.models)} via {names(turn.routes)}
        </dd>
      </div>
      <div>
        <dt>tokens</dt>
        <dd data-field="tokens">
          {tokenCount(u.promptTokens)} in · {tokenCount(u.completionTokens)} out
        </dd>
      </div>
      <div>
        <dt>cache</dt>
        <dd data-field="cache">
          read {tokenCount(u.cacheReadTokens)} · write {tokenCount(u.cacheWriteTokens)}
        </dd>
      </div>
      {turn.replies > 1 && (
        <div>
          <dt>replies</dt>
          <dd>{turn.replies}</dd>
        </div>
      )}
      {turn.stepLimit !== undefined && (
        <div class="turn-cut" role="status">
          <dt>stopped</dt>
          <dd data-field="step-limit">the agent stopped after {turn.stepLimit} steps</dd>
        </div>
      )}
    </dl>
  );
}

/** A draft a turn ended with and did not send: shown, clearly marked as not delivered. */
export function DraftRow({ draft }: { draft: UnsentDraft }): JSX.Element {
  return (
    <li class="msg msg-draft" data-draft-of={draft.seq} data-frame-id={draft.frameId}>
      <div class="meta">
        <span class="who">agent</span>
        <span class="where">draft of turn {draft.turn}</span>
        <time dateTime={isoTime(draft.at)}>{when(draft.at)}</time>
      </div>
      <StateBadge
        tone="warning"
        label="unsent draft · not delivered"
        title="the turn ended with this text and no send; nobody received it"
      />
      <div
        class="body markdown"
        // Sanitised by DOMPurify in renderMarkdown: no script, no handlers, no fetches.
        dangerouslySetInnerHTML={{ __html: renderMarkdown(draft.text) }}
      />
    </li>
  );
}
