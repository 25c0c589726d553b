/** @jsxRuntime automatic */
/** @jsxImportSource preact */
/**
 * What the agent remembers: the request its next turn would send (`op.context`, built by the
 * daemon's own request builder) — the budget bar, the active summary rendered, each item with
 * its token estimate, what is left out and why — and `history.search` over everything else.
 *
 * @module
 */

import type { JSX } from "preact";
import { useState } from "preact/hooks";
import {
  type ContextResult,
  parseOperatorResult,
  type SearchResult,
} from "../../runtime/core/mod.ts";
import type { LaneClient } from "./lane_client.ts";
import { renderMarkdown } from "./markdown.ts";
import { refusal } from "./operator_requests.ts";

/** The budget bar: the next request's estimate against the route's budget. */
function BudgetBar({ view }: { view: ContextResult }): JSX.Element {
  const b = view.budget;
  const percent = b.context_tokens === 0 ? 0 : Math.round((b.used_tokens / b.context_tokens) * 100);
  return (
    <p class="budget-line">
      <meter
        id="context-meter"
        aria-label="share of the context budget the next request uses"
        min={0}
        max={b.context_tokens}
        high={b.compact_at_tokens}
        value={b.used_tokens}
      />{" "}
      <span data-field="context-used">
        {b.used_tokens.toLocaleString("en")} of {b.context_tokens.toLocaleString("en")}{" "}
        tokens ({percent}%)
      </span>; compaction at {b.compact_at_tokens.toLocaleString("en")}
      {view.over_compact ? "; the next request compacts first" : ""}.
    </p>
  );
}

/** The context view's body. */
function ContextBody({ view }: { view: ContextResult }): JSX.Element {
  return (
    <div class="context-body">
      <BudgetBar view={view} />
      <p class="hint">
        The contract message: {view.system_tokens} tokens; route {view.route}.
      </p>
      <h3>Summary</h3>
      {view.summary === null
        ? <p data-field="summary">None yet: nothing was compacted.</p>
        : (
          <div data-field="summary">
            <p class="hint">
              Context epoch {view.summary.epoch}, {view.summary.source}, {view.summary.tokens}{" "}
              tokens, covers items #1–#{view.summary.covers_to_idx}.
            </p>
            <div
              class="markdown summary-text"
              // Sanitised by DOMPurify in renderMarkdown.
              dangerouslySetInnerHTML={{ __html: renderMarkdown(view.summary.text) }}
            />
          </div>
        )}
      <h3>Items the next request carries ({view.items.length})</h3>
      {view.items.length === 0
        ? <p>None.</p>
        : (
          <div class="table-scroll" tabIndex={0} role="region" aria-label="Items carried">
            <table class="op-table" data-table="context-items">
              <thead>
                <tr>
                  <th scope="col">Item</th>
                  <th scope="col">Role</th>
                  <th scope="col">Tokens</th>
                  <th scope="col">Starts with</th>
                </tr>
              </thead>
              <tbody>
                {view.items.map((item) => (
                  <tr key={item.idx}>
                    <td>#{item.idx}</td>
                    <td>{item.role}</td>
                    <td class="num">{item.tokens}</td>
                    <td class="wrap">{item.preview}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      <h3>Left out</h3>
      {view.left_out.length === 0
        ? <p data-field="left-out">Nothing.</p>
        : (
          <ul data-field="left-out">
            {view.left_out.map((l) => (
              <li key={l.from_idx}>
                Items #{l.from_idx}–#{l.to_idx} ({l.count}): {l.reason}
              </li>
            ))}
          </ul>
        )}
    </div>
  );
}

/** `history.search` from the page. */
function HistorySearch({ client }: { client: LaneClient }): JSX.Element {
  const [query, setQuery] = useState("");
  const [found, setFound] = useState<SearchResult | string | undefined>(undefined);
  const search = async (event: Event) => {
    event.preventDefault();
    if (query.trim() === "") return;
    try {
      const result = await client.operate({
        kind: "op.history_search",
        session: client.session,
        query: query.trim(),
      });
      setFound(parseOperatorResult("op.history_search", result));
    } catch (error) {
      setFound(refusal(error));
    }
  };
  return (
    <form class="history-search" role="search" onSubmit={search}>
      <label for="history-query">Search the whole history (as history.search)</label>
      <input
        id="history-query"
        type="search"
        value={query}
        onInput={(event) => setQuery((event.currentTarget as HTMLInputElement).value)}
      />
      <button type="submit">Search history</button>
      {typeof found === "string" && <p role="status">{found}</p>}
      {typeof found === "object" && (
        found.results.length === 0
          ? <p role="status">Nothing found.</p>
          : (
            <table class="op-table" data-table="history-hits">
              <thead>
                <tr>
                  <th scope="col">Ref</th>
                  <th scope="col">Kind</th>
                  <th scope="col">Snippet</th>
                </tr>
              </thead>
              <tbody>
                {found.results.map((hit) => (
                  <tr key={hit.id}>
                    <td>{hit.id}</td>
                    <td>{hit.kind}</td>
                    <td class="wrap">{hit.snippet}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )
      )}
    </form>
  );
}

/** The panel "What the agent remembers". */
export function ContextView({ client }: { client: LaneClient }): JSX.Element {
  const [view, setView] = useState<ContextResult | string | undefined>(undefined);
  const [busy, setBusy] = useState(false);
  const operator = client.connection.role === "operator" && client.connection.phase === "open";
  const load = async () => {
    setBusy(true);
    try {
      const result = await client.operate({ kind: "op.context", session: client.session });
      setView(parseOperatorResult("op.context", result));
    } catch (error) {
      setView(refusal(error));
    } finally {
      setBusy(false);
    }
  };
  return (
    <section class="panel context" id="context" aria-labelledby="h-context">
      <h2 id="h-context">What the agent remembers</h2>
      {!operator
        ? <p class="hint">The operator token shows what the next request would carry.</p>
        : (
          <>
            <button type="button" disabled={busy} onClick={load}>
              {view === undefined ? "Show the next request" : "Refresh"}
            </button>
            {typeof view === "string" && <p role="status">{view}</p>}
            {typeof view === "object" && <ContextBody view={view} />}
            <HistorySearch client={client} />
          </>
        )}
    </section>
  );
}
