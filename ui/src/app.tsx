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
import { useMemo, useState } from "preact/hooks";
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
import { HealthBadge } from "./health_badge.tsx";
import { troubleTone } from "./health_words.ts";
import { searchLanes } from "./search.ts";
import { deriveTurns, type TurnView } from "./turn_view.ts";
import { sessionStates, waitReason } from "./session_states.ts";
import { StateHeader, StateLines, WaitReasonContext } from "./state_line.tsx";
import { ContextView } from "./context_view.tsx";

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
  const revision = client.log.revision;
  const turns = useMemo(() => deriveTurns(client.log.records()), [revision]);
  const tone = troubleTone(client.health, turns);
  const notices = sessionStates(client.health, turns);
  const head = client.log.lastSeq;
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
      <header class={`topbar${tone === "none" ? "" : ` topbar-${tone}`}`} data-trouble={tone}>
        <h1>klbr</h1>
        <span class="session">
          session <strong>{client.session}</strong>
        </span>
        <ConnectionPill client={client} />
        <HealthBadge health={client.health} turns={turns} />
        <StateHeader client={client} notices={notices} />
        <SandboxBadge sandbox={client.sandbox} />
        <span class="seq-line" title={`the newest record is number ${head} of the session's log`}>
          {head} {head === 1 ? "record" : "records"}
        </span>
        <nav class="lane-nav" aria-label="Lanes">
          <a href="#lane-conversation">Conversation</a>
          <a href="#lane-scratchpad">Scratchpad</a>
          <a href="#lane-cells">Cells</a>
          <a href="#lane-events">Events</a>
          <a href="#operator">Operator</a>
          <a href="#jobs">Jobs</a>
          <a href="#context">Memory</a>
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
        : (
          <WaitReasonContext.Provider value={waitReason(notices)}>
            <Lanes client={client} onToken={onToken} turns={turns} />
          </WaitReasonContext.Provider>
        )}
    </div>
  );
}

/** The search box over the lanes, with how much it shows. */
function SearchBar(
  props: { query: string; onQuery: (query: string) => void; matched: number; total: number },
): JSX.Element {
  return (
    <form class="search-bar" role="search" onSubmit={(event) => event.preventDefault()}>
      <label for="lane-search">Search the conversation, drafts, cells and events</label>
      <input
        id="lane-search"
        type="search"
        value={props.query}
        placeholder="words to find"
        onInput={(event) => props.onQuery((event.currentTarget as HTMLInputElement).value)}
      />
      <span class="search-count" aria-live="polite">
        {props.query.trim() === "" ? "" : `${props.matched} of ${props.total} items match`}
      </span>
      {props.query !== "" && (
        <button
          type="button"
          class="link-button"
          onClick={() => props.onQuery("")}
        >
          Clear the search
        </button>
      )}
    </form>
  );
}

/** The four lanes, the composer, the operator panel and the jobs panel. */
function Lanes({ client, onToken, turns }: AppProps & { turns: TurnView }): JSX.Element {
  const revision = client.log.revision;
  const view = useMemo(() => deriveLanes(client.log.records()), [revision]);
  const [query, setQuery] = useState("");
  const found = useMemo(() => searchLanes(view, query), [view, query]);
  const key = `${revision}:${client.outbox.list().length}:${query}`;
  const liveCells = [...client.live.cells.values()].reduce(
    (n, out) => n + out.stdout.length + out.stderr.length,
    0,
  );
  const liveTokens = [...client.live.tokens.values()].reduce((n, text) => n + text.length, 0);
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
      <SearchBar query={query} onQuery={setQuery} matched={found.matched} total={found.total} />
      <main class="lanes">
        <ConversationLane
          items={found.conversation}
          turns={turns}
          contentKey={key}
          filtered={query.trim() !== ""}
          pending={client.outbox.list()}
          onRetry={(id) => client.retryInput(id)}
          onDiscard={(id) => client.discardInput(id)}
        >
          <StateLines client={client} notices={sessionStates(client.health, turns)} />
          <Composer
            onSend={(text) => client.sendInput(text).clientMsgId}
            statusOf={statusOf}
            online={client.connection.phase === "open" && client.connection.role === "operator"}
          />
        </ConversationLane>
        <div class="column column-work">
          <ScratchpadLane
            items={found.scratchpad}
            live={client.live.tokens}
            contentKey={`${key}:${liveTokens}`}
          />
          <CellsLane
            cells={found.cells}
            live={client.live.cells}
            contentKey={`${key}:${liveCells}`}
            onCancel={client.connection.role === "operator"
              ? (cell) => client.operate({ kind: "op.cancel_cell", session: client.session, cell })
              : undefined}
          />
        </div>
        <div class="column column-side">
          <OperatorPanel
            client={client}
            onToken={onToken}
            fromRecords={{ skillsRevision: view.skillsRevision, activation: view.activation }}
          />
          <JobsPanel client={client} view={unattended} />
          <ContextView client={client} />
          <EventsLane events={found.events} notices={client.notices} contentKey={key} />
        </div>
      </main>
    </>
  );
}
