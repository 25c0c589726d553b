/** @jsxRuntime automatic */
/** @jsxImportSource preact */
/**
 * The page: a header, the connection banner, and the four lanes side by side (stacked on a
 * narrow screen), with the composer under the conversation and the operator panel beside the
 * runtime events.
 *
 * @module
 */

import type { JSX } from "preact";
import { useMemo } from "preact/hooks";
import { CellsLane } from "./cells_lane.tsx";
import { Composer } from "./composer.tsx";
import { ConnectionBanner } from "./connection_banner.tsx";
import { ConversationLane, inputBadge, pendingBadge } from "./conversation_lane.tsx";
import { EventsLane } from "./events_lane.tsx";
import { JobsPanel } from "./jobs_panel.tsx";
import { deriveUnattended } from "./jobs_view.ts";
import type { LaneClient } from "./lane_client.ts";
import { deriveLanes } from "./lane_view.ts";
import { OperatorPanel } from "./operator_panel.tsx";
import { ScratchpadLane } from "./scratchpad_lane.tsx";
import { StateBadge } from "./state_badge.tsx";
import { SandboxBadge, TokenScreen } from "./token_screen.tsx";
import { useClient } from "./use_client.ts";

/** Props of {@linkcode App}. */
export interface AppProps {
  client: LaneClient;
  onToken: (token: string | undefined) => void;
}

function ConnectionPill({ client }: { client: LaneClient }): JSX.Element {
  const c = client.connection;
  if (c.phase === "open") {
    return (
      <StateBadge
        tone={c.role === "viewer" ? "warning" : "ok"}
        label={`${c.role === "viewer" ? "read-only view" : "connected as operator"}${
          c.replayed ? "" : " · catching up"
        }`}
      />
    );
  }
  if (c.phase === "connecting") return <StateBadge tone="pending" label="connecting" />;
  if (c.phase === "unauthorised") return <StateBadge tone="warning" label="needs the token" />;
  return <StateBadge tone="error" label="offline" />;
}

/** The whole page. */
export function App({ client, onToken }: AppProps): JSX.Element {
  useClient(client);
  return (
    <div class="app">
      <a
        class="skip-link"
        href="#composer-input"
        onClick={(event) => {
          // Following a fragment does not move keyboard focus everywhere; do it explicitly.
          event.preventDefault();
          document.getElementById("composer-input")?.focus();
        }}
      >
        Skip to the message box
      </a>
      <header class="topbar">
        <h1>klbr</h1>
        <span class="session">
          session <strong>{client.session}</strong>
        </span>
        <ConnectionPill client={client} />
        <SandboxBadge sandbox={client.sandbox} />
        <span class="seq-line">record #{client.log.lastSeq}</span>
        <nav class="lane-nav" aria-label="Lanes">
          <a href="#lane-conversation">Conversation</a>
          <a href="#lane-scratchpad">Scratchpad</a>
          <a href="#lane-cells">Cells</a>
          <a href="#lane-events">Events</a>
          <a href="#operator">Operator</a>
          <a href="#jobs">Jobs</a>
        </nav>
      </header>
      <ConnectionBanner
        connection={client.connection}
        lastSeq={client.log.lastSeq}
        onRetry={() => client.retryNow()}
      />
      {client.connection.phase === "unauthorised"
        ? (
          <TokenScreen
            reason={client.authError?.message}
            refused={client.tokenError}
            onToken={(token) => onToken(token)}
          />
        )
        : <Lanes client={client} onToken={onToken} />}
    </div>
  );
}

/** The four lanes, the composer, the operator panel and the jobs panel. */
function Lanes({ client, onToken }: AppProps): JSX.Element {
  const revision = client.log.revision;
  const view = useMemo(() => deriveLanes(client.log.records()), [revision]);
  const unattended = useMemo(() => deriveUnattended(client.log.records()), [revision]);
  const statusOf = (clientMsgId: string): string => {
    const pending = client.outbox.list().find((item) => item.clientMsgId === clientMsgId);
    if (pending !== undefined) return pendingBadge(pending).label;
    const inputId = client.inputIdOf(clientMsgId);
    const item = view.inputsByMessage.get(clientMsgId) ??
      (inputId === undefined ? undefined : view.inputs.get(inputId));
    if (item === undefined) return "acknowledged";
    return `acknowledged as ${item.inputId} · ${inputBadge(item).label}`;
  };
  return (
    <>
      <main class="lanes">
        <ConversationLane
          items={view.conversation}
          pending={client.outbox.list()}
          onRetry={(id) => client.retryInput(id)}
          onDiscard={(id) => client.discardInput(id)}
        >
          <Composer
            onSend={(text) => client.sendInput(text).clientMsgId}
            statusOf={statusOf}
            online={client.connection.phase === "open" && client.connection.role === "operator"}
          />
        </ConversationLane>
        <div class="column column-work">
          <ScratchpadLane items={view.scratchpad} live={client.live.tokens} />
          <CellsLane cells={view.cells} live={client.live.cells} />
        </div>
        <div class="column column-side">
          <OperatorPanel
            client={client}
            onToken={onToken}
            fromRecords={{ skillsRevision: view.skillsRevision, activation: view.activation }}
          />
          <JobsPanel client={client} view={unattended} />
          <EventsLane events={view.events} notices={client.notices} />
        </div>
      </main>
    </>
  );
}
