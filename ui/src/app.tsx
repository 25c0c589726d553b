/** @jsxRuntime automatic */
/** @jsxImportSource preact */
/**
 * The page: a header, the connection banner, the conversation list, one conversation's
 * timeline with the composer under it, and the side panels (operator, jobs, runtime events);
 * on a narrow screen the list and the panels sit behind a menu.
 *
 * @module
 */

import type { JSX } from "preact";
import { useMemo, useState } from "preact/hooks";
import { Composer } from "./composer.tsx";
import { ConnectionBanner } from "./connection_banner.tsx";
import { inputBadge, pendingBadge } from "./conversation_lane.tsx";
import { conversationLabel } from "./discord_names.ts";
import { EventsLane } from "./events_lane.tsx";
import { JobsPanel } from "./jobs_panel.tsx";
import { deriveUnattended } from "./jobs_view.ts";
import type { LaneClient } from "./lane_client.ts";
import { deriveLanes } from "./lane_view.ts";
import { OperatorPanel } from "./operator_panel.tsx";
import { StateBadge } from "./state_badge.tsx";
import { SandboxBadge, TokenScreen } from "./token_screen.tsx";
import { useClient } from "./use_client.ts";
import { HealthBadge } from "./health_badge.tsx";
import { pageHealth, troubleTone } from "./health_words.ts";
import { searchLanes } from "./search.ts";
import { deriveTurns, type TurnView } from "./turn_view.ts";
import { sessionStates, waitReason } from "./session_states.ts";
import { StateHeader, StateLines, WaitReasonContext } from "./state_line.tsx";
import { ContextView } from "./context_view.tsx";
import { Timeline } from "./timeline.tsx";
import { ThemeButton } from "./theme.tsx";
import {
  cancelNewestRunningCell,
  ShortcutButton,
  ShortcutHelp,
  useShortcuts,
} from "./shortcuts.tsx";
import {
  type ConversationEntry,
  deriveTimeline,
  heldRows,
  LOCAL_CONVERSATION,
} from "./timeline_view.ts";

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
  const own = { session: client.session, status: client.status };
  // The header's word is the daemon's and this session's, never another session's hold.
  const health = pageHealth(client.health, own);
  const tone = troubleTone(health, turns);
  const notices = sessionStates(client.health, turns, own);
  const head = client.log.lastSeq;
  const [menuOpen, setMenuOpen] = useState(false);
  const [helpOpen, setHelpOpen] = useState(false);
  useShortcuts({
    search: focusSearch,
    cancel: cancelNewestRunningCell,
    help: () => setHelpOpen(true),
    close: () => setMenuOpen(false),
  });
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
        <HealthBadge health={health} turns={turns} />
        <StateHeader client={client} notices={notices} />
        <SandboxBadge sandbox={client.sandbox} />
        <span class="seq-line" title={`the newest record is number ${head} of the session's log`}>
          {head} {head === 1 ? "record" : "records"}
        </span>
        <ThemeButton />
        <ShortcutButton onOpen={() => setHelpOpen(true)} />
        <button
          type="button"
          class="menu-button"
          aria-expanded={menuOpen ? "true" : "false"}
          aria-controls="side-left side-right"
          onClick={() => setMenuOpen(!menuOpen)}
        >
          {menuOpen ? "Close the menu" : "Menu"}
        </button>
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
            <Workspace
              client={client}
              onToken={onToken}
              turns={turns}
              menuOpen={menuOpen}
              onPicked={() => setMenuOpen(false)}
            />
          </WaitReasonContext.Provider>
        )}
      <ShortcutHelp open={helpOpen} onClose={() => setHelpOpen(false)} />
    </div>
  );
}

/** Moves the keyboard to the search box (the `/` shortcut). */
function focusSearch(): void {
  document.getElementById("lane-search")?.focus();
}

/** The search box over the timeline and the panels, with how much it shows. */
function SearchBar(
  props: { query: string; onQuery: (query: string) => void; matched: number; total: number },
): JSX.Element {
  return (
    <form class="search-bar" role="search" onSubmit={(event) => event.preventDefault()}>
      <label for="lane-search">Search messages, drafts, cells and events</label>
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

/** The conversations the page holds, local first, each with its count of messages. */
function ConversationList(
  props: {
    conversations: ConversationEntry[];
    selected: string;
    onSelect: (id: string) => void;
  },
): JSX.Element {
  return (
    <nav class="conversation-list panel" aria-labelledby="h-conversations">
      <h2 id="h-conversations">Conversations</h2>
      <ul>
        {props.conversations.map((entry) => (
          <li key={entry.id}>
            <button
              type="button"
              class="conversation-pick"
              aria-current={entry.id === props.selected ? "true" : undefined}
              title={entry.id}
              onClick={() => props.onSelect(entry.id)}
            >
              <span class="conversation-name">{conversationLabel(entry.id)}</span>
              <span class="conversation-count">
                {entry.messages} {entry.messages === 1 ? "message" : "messages"}
              </span>
            </button>
          </li>
        ))}
      </ul>
    </nav>
  );
}

/**
 * The conversation list, one conversation's timeline with the composer, and the side panels
 * (operator, jobs, runtime events). On a narrow screen the list and the panels sit behind
 * the menu.
 */
function Workspace(
  { client, onToken, turns, menuOpen, onPicked }: AppProps & {
    turns: TurnView;
    menuOpen: boolean;
    /** Called once a conversation is picked (the menu closes on a phone). */
    onPicked: () => void;
  },
): JSX.Element {
  const revision = client.log.revision;
  const records = client.log.records();
  const view = useMemo(() => deriveLanes(records), [revision]);
  const [query, setQuery] = useState("");
  const [selected, setSelected] = useState(LOCAL_CONVERSATION);
  const found = useMemo(() => searchLanes(view, query), [view, query]);
  const timeline = useMemo(
    () =>
      deriveTimeline(records, {
        ...view,
        conversation: found.conversation,
        scratchpad: found.scratchpad,
        cells: found.cells,
      }, turns),
    [found, turns],
  );
  const key = `${revision}:${client.outbox.list().length}:${query}:${selected}`;
  const liveCells = [...client.live.cells.values()].reduce(
    (n, out) => n + out.stdout.length + out.stderr.length,
    0,
  );
  const liveTokens = [...client.live.tokens.values(), ...client.live.reasoning.values()]
    .reduce((n, text) => n + text.length, 0);
  const unattended = useMemo(() => deriveUnattended(records), [revision]);
  const statusOf = (clientMsgId: string): string => {
    const pending = client.outbox.list().find((item) => item.clientMsgId === clientMsgId);
    if (pending !== undefined) return pendingBadge(pending).label;
    const inputId = client.outbox.inputIdOf(clientMsgId);
    const item = view.inputsByMessage.get(clientMsgId) ??
      (inputId === undefined ? undefined : view.inputs.get(inputId));
    if (item === undefined) return "acknowledged";
    return `acknowledged as ${item.inputId} · ${inputBadge(item).label}`;
  };
  const operator = client.connection.role === "operator";
  return (
    <div class={`workspace${menuOpen ? " menu-open" : ""}`}>
      <div class="side side-left" id="side-left">
        <ConversationList
          conversations={timeline.conversations}
          selected={selected}
          onSelect={(id) => {
            setSelected(id);
            onPicked();
          }}
        />
      </div>
      <main class="main-column">
        <SearchBar query={query} onQuery={setQuery} matched={found.matched} total={found.total} />
        <Timeline
          key={selected}
          conversation={selected}
          rows={heldRows(timeline.rows.get(selected), {
            conversation: client.log.completeFrom(selected),
            session: client.log.completeFrom(),
          })}
          context={{
            turns,
            liveTokens: client.live.tokens,
            liveReasoning: client.live.reasoning,
            liveCells: client.live.cells,
            onCancel: operator
              ? (cell) => client.operate({ kind: "op.cancel_cell", session: client.session, cell })
              : undefined,
          }}
          pending={client.outbox.list()}
          onRetry={(id) => client.retryInput(id)}
          onDiscard={(id) => client.discardInput(id)}
          contentKey={`${key}:${liveTokens}:${liveCells}`}
          earlier={{
            has: client.log.hasEarlierIn(selected),
            loading: client.loadingEarlier,
            capped: client.earlierCapped,
            refused: client.earlierRefusal?.message,
          }}
          onLoadEarlier={() => client.loadEarlier(selected)}
          filtered={query.trim() !== ""}
          // State lines of the conversation (stopped, drained, …) go here.
          lines={
            <div class="timeline-lines" id="timeline-lines">
              <StateLines
                client={client}
                notices={sessionStates(client.health, turns, {
                  session: client.session,
                  status: client.status,
                })}
              />
            </div>
          }
        >
          {selected !== LOCAL_CONVERSATION && (
            <p class="note composer-note">
              Messages typed here go to {LOCAL_CONVERSATION}; the agent answers{" "}
              {conversationLabel(selected)} from its own turns.
            </p>
          )}
          <Composer
            onSend={(text, attachments) =>
              client.sendInput(text, "local:default", { attachments }).clientMsgId}
            statusOf={statusOf}
            online={client.connection.phase === "open" && operator}
          />
        </Timeline>
      </main>
      <aside class="side side-right" id="side-right" aria-label="Side panels">
        <OperatorPanel
          client={client}
          onToken={onToken}
          fromRecords={{ skillsRevision: view.skillsRevision, activation: view.activation }}
        />
        <JobsPanel client={client} view={unattended} />
        <ContextView client={client} />
        <EventsLane events={found.events} notices={client.notices} contentKey={key} />
      </aside>
    </div>
  );
}
