// The lexical history index and exact source reads, against real SQLite: every source is
// indexed in its writing transaction, a search says when it was truncated, a read returns the
// source text exactly.

import assert from "node:assert/strict";
import { isKlbrError } from "../../runtime/core/mod.ts";
import { ftsExpression, indexArtifact, searchHistory } from "../../store/tables/history_index.ts";
import { readHistorySource } from "../../store/tables/history_sources.ts";
import {
  appendProviderItems,
  estimateTokens,
  itemSizesNewestFirst,
} from "../../store/tables/provider_items.ts";
import { ensureSession } from "../../store/tables/sessions.ts";
import { readCalibration, recordCalibration } from "../../store/tables/token_counts.ts";
import { writeTurn } from "../_helpers/history_fixture.ts";
import { admitDiscordMessage, providerItems, withStore } from "../_helpers/store.ts";

Deno.test("`searchHistory()` finds every kind of source by its words, best first", async () => {
  await withStore((store) => {
    const first = writeTurn(store, "default", 1, {
      question: "the vault code is ZEPHYR-7731",
      discord: true,
    });
    for (let n = 2; n <= 5; n++) writeTurn(store, "default", n);
    indexArtifact(store, {
      session: "default",
      cellId: first.cellId,
      id: "a".repeat(64),
      bytes: 40,
      text: "a long log that mentions kestrel once",
    });
    const refs = (text: string) => searchHistory(store, "default", { text }).hits.map((h) => h.ref);
    assert.deepEqual(refs("zephyr 7731"), [`input:${first.inputId}`]);
    // The send is the best hit; the Discord send and the cell that sent it contain the words too.
    assert.deepEqual(refs("answer 1")[0], first.sends[0]);
    assert.deepEqual(
      new Set(refs("answer 1")),
      new Set([first.sends[0], first.sends[1], `cell:${first.cellId}`]),
    );
    assert.deepEqual(refs("discord answer"), [first.sends[1]]);
    assert.deepEqual(refs("thinking about 1"), ["item:2"]);
    assert.deepEqual(refs("printed 1"), [`output:${first.cellId}`]);
    assert.deepEqual(refs("kestrel"), [`artifact:${"a".repeat(64)}`]);
    assert.ok(refs("local send answer").includes(`cell:${first.cellId}`));
    const hit = searchHistory(store, "default", { text: "vault" }).hits[0];
    assert.deepEqual([hit.kind, hit.rank, hit.snippet], [
      "input",
      1,
      "the «vault» code is ZEPHYR-7731",
    ]);
    // Another session's history is not searched.
    ensureSession(store, "other");
    assert.deepEqual(searchHistory(store, "other", { text: "vault" }).hits, []);
  });
});

Deno.test("`searchHistory()` says when it was truncated and refuses a query without words", async () => {
  await withStore((store) => {
    for (let n = 1; n <= 12; n++) writeTurn(store, "default", n);
    const some = searchHistory(store, "default", { text: "thinking", limit: 5 });
    assert.equal(some.hits.length, 5);
    assert.equal(some.truncated, true);
    assert.deepEqual(some.hits.map((h) => h.rank), [1, 2, 3, 4, 5]);
    const all = searchHistory(store, "default", { text: "thinking", limit: 100 });
    assert.equal(all.hits.length, 12);
    assert.equal(all.truncated, false);
    // `any` wants one word, `all` every word; punctuation only separates words.
    assert.equal(searchHistory(store, "default", { text: "thinking nowhere" }).hits.length, 0);
    assert.equal(
      searchHistory(store, "default", { text: "thinking nowhere", match: "any", limit: 100 })
        .hits.length,
      12,
    );
    assert.equal(ftsExpression('AND "x" OR zeph*', "all"), '"AND" "x" "OR" "zeph"*');
    assert.throws(
      () => searchHistory(store, "default", { text: "?!" }),
      (e) =>
        isKlbrError(e, "invalid_input") &&
        e.message === 'cannot search history: the query has no word to find (got "?!")',
    );
    assert.throws(
      () => searchHistory(store, "default", { text: "x", limit: 101 }),
      (e) => isKlbrError(e, "invalid_input"),
    );
  });
});

Deno.test("`searchHistory()` refuses a query of more than 32 words, naming the limit, rather than dropping words", async () => {
  await withStore((store) => {
    writeTurn(store, "default", 1, { question: "the vault code is ZEPHYR-7731" });
    // Before, words past the 32nd were dropped: the 33rd word "vault" was never looked for,
    // and a search that should have found nothing found every text with the first 32 words.
    const words = Array.from({ length: 32 }, () => "the");
    assert.equal(searchHistory(store, "default", { text: words.join(" ") }).hits.length, 1);
    for (const match of ["all", "any"] as const) {
      assert.throws(
        () => searchHistory(store, "default", { text: [...words, "nowhere"].join(" "), match }),
        (e) =>
          isKlbrError(e, "invalid_input") &&
          e.message === "cannot search history: at most 32 words (got 33); shorten the query",
      );
    }
  });
});

Deno.test("`searchHistory()` refuses a query whose words the index drops, naming the query", async () => {
  await withStore((store) => {
    writeTurn(store, "default", 1, { question: "the vault code is ZEPHYR_7731" });
    // The index's tokenizer treats `_` as a separator: "___" has no word it can find, and
    // before, the search said nothing and found nothing.
    for (const text of ["___", "_ __*", "?_!"]) {
      assert.throws(
        () => searchHistory(store, "default", { text }),
        (e) =>
          isKlbrError(e, "invalid_input") &&
          e.message ===
            `cannot search history: the query has no word to find (got ${JSON.stringify(text)})`,
      );
    }
    // An underscore inside a word still joins it: "zephyr_7731" finds the two words in a row.
    assert.equal(searchHistory(store, "default", { text: "zephyr_7731" }).hits.length, 1);
    // A word the index drops is left out of the expression, not searched as nothing.
    assert.equal(ftsExpression("vault ___ code", "all"), '"vault" "code"');
  });
});

Deno.test("`searchHistory()` finds a Discord input by its words and attachment names, not by its body's field names", async () => {
  await withStore((store) => {
    const inputId = admitDiscordMessage(store, {
      text: "the roses need water",
      attachments: [{
        id: "a1",
        filename: "garden_plan.pdf",
        size: 10,
        content_type: null,
        artifact: null,
        skipped: "over attachment_max_bytes (1 bytes)",
      }],
    });
    const ref = `input:${inputId}`;
    const refs = (text: string) => searchHistory(store, "default", { text }).hits.map((h) => h.ref);
    assert.deepEqual(refs("roses water"), [ref]);
    assert.deepEqual(refs("garden plan"), [ref]);
    assert.equal(
      searchHistory(store, "default", { text: "roses" }).hits[0].snippet,
      "the «roses» need water garden_plan.pdf",
    );
    for (
      const word of [
        "message",
        "channel",
        "thread",
        "reply",
        "mentioned",
        "attachments",
        "false",
        "skipped",
      ]
    ) {
      assert.deepEqual(refs(word), [], `"${word}" found the input by its body's field names`);
    }
  });
});

Deno.test("`readHistorySource()` returns each source's text exactly", async () => {
  await withStore((store) => {
    const body = "line one\n  exact   spacing, ünïcode ✓\n";
    const turn = writeTurn(store, "default", 1, { question: body, discord: true });
    const read = (ref: string) => readHistorySource(store, "default", ref);
    assert.equal(read(`input:${turn.inputId}`).text, body);
    assert.deepEqual(read(`input:${turn.inputId}`).meta.author, "owner");
    assert.equal(read(turn.sends[0]).text, "answer 1");
    assert.equal(read(turn.sends[0]).meta.state, "delivered");
    assert.equal(read(turn.sends[1]).text, "discord answer 1");
    assert.equal(read(turn.sends[1]).meta.state, "pending");
    assert.equal(read("item:2").text, "thinking about 1");
    assert.equal(read(`cell:${turn.cellId}`).text, "await local.send('answer 1')");
    assert.equal(read(`output:${turn.cellId}`).text, "printed 1\n");
    assert.equal(read(`output:${turn.cellId}`).meta.outcome, "ok");
    for (
      const [ref, code] of [
        ["item:999", "not_found"],
        ["send:2", "not_found"],
        [`input:${turn.inputId}x`, "not_found"],
        ["bogus:1", "invalid_input"],
        ["item", "invalid_input"],
      ]
    ) {
      assert.throws(() => read(ref), (e) => isKlbrError(e, code as "not_found"), ref);
    }
    // Another session cannot read this one's items.
    ensureSession(store, "other");
    assert.throws(
      () => readHistorySource(store, "other", `input:${turn.inputId}`),
      (e) => isKlbrError(e, "not_found"),
    );
  });
});

Deno.test("provider items carry their token estimate and are sized newest first in pages", async () => {
  await withStore((store) => {
    const messages = Array.from({ length: 600 }, (_, i) => ({ role: "user", content: `m${i}` }));
    appendProviderItems(store, "default", null, messages);
    const items = providerItems(store, "default");
    assert.equal(items[0].tokens, estimateTokens(JSON.stringify(messages[0])));
    const sizes = [...itemSizesNewestFirst(store, "default", 100)];
    assert.deepEqual(sizes.map((s) => s.idx), Array.from({ length: 500 }, (_, i) => 600 - i));
    assert.equal(estimateTokens("ü✓"), 6); // 5 bytes → 2, plus 4 for the message
  });
});

Deno.test("`recordCalibration()` follows a larger sample at once and a smaller one slowly", async () => {
  await withStore((store) => {
    assert.equal(readCalibration(store, "default", "main"), undefined);
    const sample = (estimated: number, reported: number) =>
      recordCalibration(store, "default", { route: "main", estimated, reported }).ratio;
    assert.equal(sample(1000, 1500), 1.5);
    assert.equal(sample(1000, 2000), 2);
    assert.equal(sample(1000, 1000), 2 * 0.8 + 1 * 0.2);
    assert.equal(readCalibration(store, "default", "main")?.samples, 3);
    assert.equal(readCalibration(store, "default", "long"), undefined);
    assert.throws(
      () => sample(0, 5),
      (e) =>
        isKlbrError(e, "invalid_input") &&
        e.message === "cannot calibrate token counts: estimated must be a positive integer (got 0)",
    );
  });
});
