// `history.search` is bounded: it ranks the session's newest matches only, never every match of
// a common word, and among them returns the best k by BM25 — checked here against a brute-force
// scorer over the whole corpus on small random corpora.

import assert from "node:assert/strict";
import fc from "fast-check";
import { searchHistory } from "../../store/tables/history_index.ts";
import { admitInputs } from "../../store/tables/inputs.ts";
import { ensureSession } from "../../store/tables/sessions.ts";
import type { Store } from "../../store/store.ts";
import { withStore } from "../_helpers/store.ts";

// Words the porter stemmer leaves as they are, so the test can count them without it.
const VOCAB = ["cat", "dog", "owl", "fox", "elk", "yak", "emu", "bee"];

/** Admits each text as an input; returns their refs in admission order. */
function admitAll(store: Store, texts: string[], session = "default"): string[] {
  const outcomes = admitInputs(
    store,
    texts.map((body, n) => ({
      session,
      sourceKind: "local" as const,
      dedupeKey: `local:t:${session}-${n}`,
      conversationId: "local:main",
      author: "owner",
      body,
    })),
  );
  return outcomes.map((o) => `input:${(o as { inputId: string }).inputId}`);
}

/**
 * The brute-force scorer: every text scored, the matching ones kept, the newest `candidates`
 * of them ranked by BM25 with the query's words as one term (k1 1.2, b 0.75).
 */
function bruteForce(
  texts: string[],
  query: { words: string[]; match: "all" | "any"; limit: number; candidates: number },
): number[] {
  const scored = texts.map((text, i) => {
    const tokens = text.split(" ").filter((t) => t !== "");
    const matches = tokens.filter((t) => query.words.includes(t)).length;
    const has = (w: string) => tokens.includes(w);
    const hit = query.match === "all" ? query.words.every(has) : query.words.some(has);
    return { i, matches, length: tokens.length, hit };
  }).filter((d) => d.hit).reverse().slice(0, query.candidates);
  const mean = scored.reduce((sum, d) => sum + d.length, 0) / Math.max(1, scored.length) || 1;
  return scored.map((d) => ({
    i: d.i,
    score: (d.matches * 2.2) / (d.matches + 1.2 * (0.25 + (0.75 * d.length) / mean)),
  })).sort((a, b) => b.score - a.score || b.i - a.i).slice(0, query.limit).map((d) => d.i);
}

Deno.test("the best k by BM25 among the newest candidates, as a brute-force scorer finds them", async () => {
  const text = fc.array(fc.constantFrom(...VOCAB), { minLength: 1, maxLength: 12 })
    .map((words) => words.join(" "));
  const query = fc.record({
    words: fc.uniqueArray(fc.constantFrom(...VOCAB), { minLength: 1, maxLength: 3 }),
    match: fc.constantFrom("all" as const, "any" as const),
    limit: fc.integer({ min: 1, max: 8 }),
    candidates: fc.integer({ min: 1, max: 50 }),
  });
  let round = 0;
  await withStore((store) => {
    fc.assert(
      fc.property(fc.array(text, { minLength: 1, maxLength: 40 }), query, (texts, q) => {
        // Each round admits its own corpus into a session of its own.
        const session = `s${round++}`;
        ensureSession(store, session);
        const refs = admitAll(store, texts, session);
        const found = searchHistory(store, session, { text: q.words.join(" "), ...q });
        const expected = bruteForce(texts, q).map((i) => refs[i]);
        assert.deepEqual(found.hits.map((h) => h.ref), expected);
        assert.deepEqual(found.hits.map((h) => h.rank), expected.map((_, i) => i + 1));
      }),
      { numRuns: 60 },
    );
  });
});

Deno.test("a common word ranks only the newest matches, and the snippet is the hit's own", async () => {
  await withStore((store) => {
    // The oldest text matches best (the word twice, nothing else), but it is not a candidate.
    ensureSession(store, "long");
    const refs = admitAll(store, ["heron heron", ...Array(30).fill("heron and many other words")]);
    const bounded = searchHistory(store, "default", { text: "heron", limit: 3, candidates: 10 });
    assert.deepEqual(bounded.hits.map((h) => h.ref), refs.slice(-3).reverse());
    assert.equal(bounded.truncated, true);
    const all = searchHistory(store, "default", { text: "heron", limit: 1 });
    assert.deepEqual(all.hits.map((h) => [h.ref, h.snippet]), [[refs[0], "«heron» «heron»"]]);
    // A long text's snippet is about 16 words around the match, cut with …
    const words = Array.from({ length: 40 }, (_, i) => `w${i}`);
    words[20] = "kestrel";
    admitAll(store, [words.join(" ")], "long");
    const [long] = searchHistory(store, "long", { text: "kestrel" }).hits;
    assert.equal(
      long.snippet,
      `…${words.slice(13, 29).join(" ").replace("kestrel", "«kestrel»")}…`,
    );
  });
});
