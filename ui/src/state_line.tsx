/** @jsxRuntime automatic */
/** @jsxImportSource preact */
/**
 * Every held or troubled state said where the person looks: a badge in the header and a line in
 * the conversation, each with its fix, a button where the fix is an operator command (Resume
 * after stop or drain, Reset after a stall, lifting a spent hour). A pending message names why
 * it waits through {@linkcode WaitReasonContext}.
 *
 * @module
 */

import type { JSX } from "preact";
import { createContext } from "preact";
import { useContext, useState } from "preact/hooks";
import { askHealth } from "./health_watch.ts";
import type { LaneClient } from "./lane_client.ts";
import { refusal } from "./operator_requests.ts";
import { type StateNotice } from "./session_states.ts";
import { StateBadge } from "./state_badge.tsx";

/** Why a message sent now waits (`waitReason`), for the pending items of the conversation. */
export const WaitReasonContext = createContext<string | undefined>(undefined);

/** Why a pending message waits, under its badge; nothing while nothing holds it. */
export function WaitReason(): JSX.Element | null {
  const reason = useContext(WaitReasonContext);
  return reason === undefined ? null : <span class="wait-reason">{reason}</span>;
}

/** The button that runs a state's fix, and what came of it. */
function FixButton(
  { client, notice, where }: { client: LaneClient; notice: StateNotice; where: string },
): JSX.Element | null {
  const [busy, setBusy] = useState(false);
  const [said, setSaid] = useState<string | undefined>(undefined);
  const action = notice.action;
  if (action === undefined) return null;
  const operator = client.connection.role === "operator" && client.connection.phase === "open";
  const run = async () => {
    setBusy(true);
    try {
      const result = await client.operate({ ...action.command, session: client.session });
      setSaid(typeof result.message === "string" ? result.message : "done");
    } catch (error) {
      setSaid(refusal(error));
    } finally {
      setBusy(false);
      askHealth(client);
    }
  };
  return (
    <>
      <button
        type="button"
        class="fix-button"
        data-fix={notice.key}
        data-where={where}
        disabled={!operator || busy}
        title={operator ? notice.fix : "needs the operator token"}
        onClick={run}
      >
        {busy ? `${action.label}…` : action.label}
      </button>
      {said !== undefined && <span class="fix-result" role="status">{said}</span>}
    </>
  );
}

/** The header's badges, one per state, each with its fix button. */
export function StateHeader(
  { client, notices }: { client: LaneClient; notices: StateNotice[] },
): JSX.Element | null {
  if (notices.length === 0) return null;
  return (
    <span class="state-header" data-states={notices.map((n) => n.key).join(" ")}>
      {notices.map((notice) => (
        <span class="state-header-item" key={notice.key} data-state={notice.key}>
          <StateBadge tone={notice.tone} label={notice.label} title={notice.detail} />
          <FixButton client={client} notice={notice} where="header" />
        </span>
      ))}
    </span>
  );
}

/** The conversation's lines, one per state: what it means, its fix, and the button. */
export function StateLines(
  { client, notices }: { client: LaneClient; notices: StateNotice[] },
): JSX.Element | null {
  if (notices.length === 0) return null;
  return (
    <ul class="state-lines" aria-label="What holds the agent">
      {notices.map((notice) => (
        <li class={`state-line state-line-${notice.tone}`} key={notice.key} data-state={notice.key}>
          <StateBadge tone={notice.tone} label={notice.label} />{" "}
          <span class="state-detail">{notice.detail}</span>{" "}
          <span class="state-fix">{notice.fix}</span>{" "}
          <FixButton client={client} notice={notice} where="conversation" />
        </li>
      ))}
    </ul>
  );
}
