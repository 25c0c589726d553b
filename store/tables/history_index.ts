/**
 * The lexical history index (`history_fts`, SQLite FTS5), its cursor (`history_cursors`) and
 * the `history_artifacts` table. This module is the only writer of the three; the schema's
 * triggers add the rows of sends, Discord sends, scratchpad notes, cell code and cell output in
 * the transaction that writes them, and {@linkcode indexArtifact} adds a spooled artifact's text.
 *
 * Inputs are indexed after admission, not in its transaction: the cursor holds
 * the last `inputs.rowid` indexed, and {@linkcode indexAdmittedInputs} adds the inputs after it
 * and moves it in one transaction, so a crash loses neither alone. The daemon indexes the
 * backlog when admission goes idle; {@linkcode searchHistory} catches the index up first, so a
 * search sees every input committed before it was called.
 *
 * Every row is named by a history ref — `input:<id>`, `send:<seq>`, `outbox:<id>`,
 * `item:<idx>`, `cell:<id>`, `output:<cell id>`, `artifact:<sha256>` — which
 * `history.read` reads back exactly from its source.
 *
 * @module
 */

import { KlbrError } from "../../runtime/core/mod.ts";
import type { Store } from "../store.ts";
import { checkLimit, fromRow } from "./_rows.ts";

/** The kinds of indexed text, as search results name them. */
export const HISTORY_KINDS = [
  "input",
  "send",
  "discord",
  "scratchpad",
  "cell",
  "output",
  "artifact",
] as const;

/** One search hit. */
export interface HistoryHit {
  /** The history ref, e.g. `input:in_01…`; `history.read` takes it. */
  ref: string;
  kind: (typeof HISTORY_KINDS)[number];
  /** The matching passage, matches in «», cuts marked …. */
  snippet: string;
  /** 1 for the best hit. */
  rank: number;
  /** BM25 relevance, higher is better. */
  score: number;
  at: number;
}

/** What {@linkcode searchHistory} returns. */
export interface HistorySearch {
  hits: HistoryHit[];
  /** True when more hits matched than `limit`. */
  truncated: boolean;
  /** The FTS5 expression the words became. */
  query: string;
}

/** What {@linkcode searchHistory} takes. */
export interface HistoryQuery {
  /**
   * Words to find, at most 32; other characters separate them, a trailing `*` makes a
   * prefix.
   */
  text: string;
  /** Hits at most, 1–100. @default {10} */
  limit?: number;
  /** `all`: every word must occur (the default); `any`: at least one. */
  match?: "all" | "any";
}

/** Characters of an artifact indexed at most; the rest is still read by `history.read`. */
export const MAX_INDEXED_ARTIFACT_CHARS = 2_000_000;

/** The words a query holds at most; a longer query is refused, never cut. */
const MAX_WORDS = 32;

/**
 * Turns words into an FTS5 expression: each word quoted (so no word is an operator), joined
 * by AND (`all`) or OR (`any`). A run of `_` joins letters into one word (`foo_bar` finds
 * "foo bar" in a row), but the index's tokenizer drops `_`, so a word without a letter or digit
 * is no word.
 *
 * @throws {KlbrError} `invalid_input` when `text` has no word, or more than 32.
 * @example
 * ```ts
 * ftsExpression("vault code?", "all"); // '"vault" "code"'
 * ```
 */
export function ftsExpression(text: string, match: "all" | "any"): string {
  const words = (typeof text === "string" ? text.match(/[\p{L}\p{N}_]+\*?/gu) ?? [] : [])
    .filter((word) => /[\p{L}\p{N}]/u.test(word));
  if (words.length === 0) {
    throw new KlbrError(
      "invalid_input",
      `cannot search history: the query has no word to find (got ${JSON.stringify(text)})`,
    );
  }
  if (words.length > MAX_WORDS) {
    throw new KlbrError(
      "invalid_input",
      `cannot search history: at most ${MAX_WORDS} words (got ${words.length}); ` +
        "shorten the query",
    );
  }
  const terms = words.map((word) => word.endsWith("*") ? `"${word.slice(0, -1)}"*` : `"${word}"`);
  return terms.join(match === "any" ? " OR " : " ");
}

/** The matches a search ranks at most: the session's newest this many. */
export const SEARCH_CANDIDATES = 1_000;

/** The characters of text a search reads at most (an artifact holds up to 2M): memory stays bounded. */
export const SEARCH_CANDIDATE_CHARS = 8_000_000;

/**
 * Finds the session's indexed texts that match `query`: the best `limit` by BM25 among its
 * newest {@linkcode SEARCH_CANDIDATES} matches (fewer when their texts pass
 * {@linkcode SEARCH_CANDIDATE_CHARS}), best first, and says whether more matched.
 *
 * A common word costs the same at 1M records as at 1k: the matches are read newest first and
 * stop at the bound, and FTS5's `bm25()` is not used, since it counts every match of every
 * word for its document frequencies. The words count together as one term (k1 1.2, b 0.75,
 * lengths relative to the candidates). Proven by "the best k by BM25 among the newest
 * candidates, as a brute-force scorer finds them" in `tests/store/history_search.test.ts`.
 *
 * @throws {KlbrError} `invalid_input` for a query without words or of more than 32 words,
 *   or a limit outside 1–100.
 * @example
 * ```ts
 * const { hits, truncated } = searchHistory(store, "default", { text: "vault code", limit: 5 });
 * ```
 */
export function searchHistory(
  store: Store,
  session: string,
  query: HistoryQuery & { candidates?: number },
): HistorySearch {
  const limit = query.limit ?? 10;
  checkLimit(limit, { action: "search history", max: 100 });
  const expression = ftsExpression(query.text, query.match ?? "all");
  indexAdmittedInputs(store);
  // The newest matches' sizes first, so the texts read stay within the character bound.
  const newest = store.statement(
    `SELECT rowid, length(text) AS chars FROM history_fts
     WHERE history_fts MATCH ? AND session = ? ORDER BY rowid DESC LIMIT ?`,
  ).all(expression, session, query.candidates ?? SEARCH_CANDIDATES) as Sized[];
  let chars = 0;
  const kept = newest.findIndex((c) => (chars += c.chars) > SEARCH_CANDIDATE_CHARS) + 1;
  // The same newest rows again, with their matches marked (`rowid >= ?` would scan them all).
  const candidates = store.statement(
    `SELECT rowid, ref, kind, at, highlight(history_fts, 4, char(2), char(3)) AS marked
     FROM history_fts WHERE history_fts MATCH ? AND session = ? ORDER BY rowid DESC LIMIT ?`,
  ).all(expression, session, kept > 0 ? kept : newest.length) as Candidate[];
  // Snippets from the marked texts: FTS5's snippet() would walk the word's whole doclist again.
  const hits = rankCandidates(candidates).slice(0, limit).map(({ c, score }, i) => ({
    ref: c.ref,
    kind: c.kind,
    at: c.at,
    snippet: snippetOf(c.marked),
    rank: i + 1,
    score,
  }));
  return { hits, truncated: newest.length > limit, query: expression };
}

/** A match: its rowid and its text's length. */
type Sized = { rowid: number; chars: number };

/** A match: its rowid, ref, kind, time and its text with each match between \x02 and \x03. */
type Candidate = {
  rowid: number;
  ref: string;
  kind: HistoryHit["kind"];
  at: number;
  marked: string;
};

const K1 = 1.2;
const B = 0.75;

/** Scores candidates by BM25 (matches as the term frequency), best first, newest on a tie. */
function rankCandidates(candidates: Candidate[]): { c: Candidate; score: number }[] {
  const sized = candidates.map((c) => ({
    c,
    matches: c.marked.split("\x02").length - 1,
    length: c.marked.match(/[\p{L}\p{N}]+/gu)?.length ?? 0,
  }));
  const mean = sized.reduce((sum, c) => sum + c.length, 0) / Math.max(1, sized.length) || 1;
  return sized.map(({ c, matches, length }) => ({
    c,
    score: (matches * (K1 + 1)) / (matches + K1 * (1 - B + (B * length) / mean)),
  })).sort((a, b) => b.score - a.score || b.c.rowid - a.c.rowid);
}

const SNIPPET_WORDS = 16;

/** About 16 words around the first match, matches in «», cuts marked … (as FTS5's snippet). */
function snippetOf(marked: string): string {
  const words = [...marked.matchAll(/[\p{L}\p{N}]+/gu)];
  let from = 0;
  let to = marked.length;
  if (words.length > SNIPPET_WORDS) {
    const mark = marked.indexOf("\x02");
    const first = Math.max(0, words.findIndex((w) => w.index > mark));
    const start = Math.max(0, Math.min(first - 7, words.length - SNIPPET_WORDS));
    const last = words[start + SNIPPET_WORDS - 1];
    if (start > 0) from = words[start].index - (marked[words[start].index - 1] === "\x02" ? 1 : 0);
    if (start + SNIPPET_WORDS < words.length) to = last.index + last[0].length;
  }
  let text = marked.slice(from, to);
  // A cut inside a match keeps its marks whole.
  const close = text.indexOf("\x03");
  if (close >= 0 && !text.slice(0, close).includes("\x02")) text = "\x02" + text;
  if (text.lastIndexOf("\x02") > text.lastIndexOf("\x03")) text += "\x03";
  text = text.replaceAll("\x02", "«").replaceAll("\x03", "»");
  return (from > 0 ? "…" : "") + text + (to < marked.length ? "…" : "");
}

/**
 * An input's indexed text: a string body; a Discord message's text and the names of its
 * attachments, not the field names and ids of its body (every Discord input would match
 * "message", "channel" or "thread"); any other body as JSON.
 */
const INPUT_TEXT = `CASE WHEN json_type(body, '$.text') = 'text'
    THEN json_extract(body, '$.text') || COALESCE((SELECT ' ' || group_concat(
      json_extract(a.value, '$.filename'), ' ') FROM json_each(body, '$.attachments') a), '')
    ELSE json_extract(body, '$') END`;

/**
 * Indexes the admitted inputs `history_fts` does not hold yet, oldest first, at most `limit`
 * (every one when omitted), and moves the cursor past them, in one transaction (a savepoint of
 * the caller's, when one is open). Returns how many it indexed; with nothing behind the cursor
 * it reads two index entries and writes nothing.
 *
 * Proven by "a search finds an input the moment it is admitted, and the index and its cursor
 * move together" in `tests/store/history_index.test.ts`.
 *
 * @throws {KlbrError} `invalid_input` for a `limit` that is not a positive integer;
 *   `store_unavailable` or `store_corrupt` when the store cannot write (nothing moves).
 * @example
 * ```ts
 * while (indexAdmittedInputs(store, { limit: 256 }) > 0) await nextMacrotask();
 * ```
 */
export function indexAdmittedInputs(store: Store, options: { limit?: number } = {}): number {
  const { limit } = options;
  if (limit !== undefined && (!Number.isSafeInteger(limit) || limit < 1)) {
    throw new KlbrError(
      "invalid_input",
      `cannot index inputs: limit must be a positive integer (got ${limit})`,
    );
  }
  if (inputsBehind(store) === null) return 0;
  return store.transaction(() => {
    const from = inputsBehind(store);
    if (from === null) return 0;
    const { last, n } = store.statement(
      `SELECT max(rowid) AS last, count(*) AS n FROM
         (SELECT rowid FROM inputs WHERE rowid > ? ORDER BY rowid LIMIT ?)`,
    ).get(from, limit ?? -1) as { last: number; n: number };
    store.statement(
      `INSERT INTO history_fts (ref, session, kind, at, text)
       SELECT 'input:' || id, session_id, 'input', admitted_at, ${INPUT_TEXT}
       FROM inputs WHERE rowid > ? AND rowid <= ? ORDER BY rowid`,
    ).run(from, last);
    store.statement("UPDATE history_cursors SET last_rowid = ? WHERE source = 'inputs'").run(last);
    return n;
  });
}

/**
 * How many admitted inputs `history_fts` does not hold yet (behind the cursor): two index
 * probes. Inputs are never deleted, so their rowids have no gaps.
 */
export function inputsNotIndexed(store: Store): number {
  const cursor = inputsBehind(store);
  if (cursor === null) return 0;
  const { last } = store.statement("SELECT max(rowid) AS last FROM inputs").get() as {
    last: number;
  };
  return last - cursor;
}

/** The cursor's rowid when an input after it is not indexed yet; `null` when none is. */
function inputsBehind(store: Store): number | null {
  const row = store.statement(
    `SELECT c.last_rowid AS cursor, (SELECT max(rowid) FROM inputs) AS last
     FROM history_cursors c WHERE c.source = 'inputs'`,
  ).get() as { cursor: number; last: number | null };
  return row.last !== null && row.last > row.cursor ? row.cursor : null;
}

/**
 * Indexes a spooled artifact's text once (its first {@linkcode MAX_INDEXED_ARTIFACT_CHARS}
 * characters); returns false when it was already indexed.
 *
 * When it returns the artifact is searchable as `artifact:<id>`.
 *
 * @throws {KlbrError} `invalid_input` for an id that is not 64 hex characters.
 */
export function indexArtifact(
  store: Store,
  artifact: { session: string; cellId: string | null; id: string; bytes: number; text: string },
): boolean {
  if (!/^[0-9a-f]{64}$/.test(artifact.id)) {
    throw new KlbrError(
      "invalid_input",
      `cannot index artifact: id must be 64 hex characters (got ${artifact.id})`,
    );
  }
  return store.transaction(() => {
    const text = artifact.text.slice(0, MAX_INDEXED_ARTIFACT_CHARS);
    const now = store.clock();
    const inserted = store.statement(
      `INSERT OR IGNORE INTO history_artifacts (id, session_id, cell_id, bytes, indexed_chars, at)
       VALUES (?, ?, ?, ?, ?, ?)`,
    ).run(artifact.id, artifact.session, artifact.cellId, artifact.bytes, text.length, now);
    if (inserted.changes === 0) return false;
    store.statement(
      "INSERT INTO history_fts (ref, session, kind, at, text) VALUES (?, ?, 'artifact', ?, ?)",
    ).run(`artifact:${artifact.id}`, artifact.session, now, text);
    return true;
  });
}

/** Returns what is known of an indexed artifact, or `undefined`. */
export function getIndexedArtifact(
  store: Store,
  id: string,
): { session: string; cellId: string | null; bytes: number; at: number } | undefined {
  const row = store.statement(
    "SELECT session_id, cell_id, bytes, at FROM history_artifacts WHERE id = ?",
  ).get(id);
  return row && fromRow(row);
}
