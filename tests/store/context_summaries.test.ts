// The summary commit against real SQLite: the row, the next context epoch and the event
// commit together or not at all. (What a summary contains is tested with compaction, in
// tests/runtime/context/compaction.test.ts.)

import assert from "node:assert/strict";
import { isKlbrError } from "../../runtime/core/mod.ts";
import {
  commitSummary,
  getSummary,
  latestSummary,
  type NewSummary,
} from "../../store/tables/context_summaries.ts";
import { readEvents } from "../../store/tables/events.ts";
import { requireSession } from "../../store/tables/sessions.ts";
import { withStore } from "../_helpers/store.ts";

const summary = (over: Partial<NewSummary> = {}): NewSummary => ({
  expectedEpoch: 0,
  coversToIdx: 9,
  text: "[summary of 9 earlier items]",
  source: "model",
  digest: { version: 1 },
  tokens: 11,
  fallbackReason: null,
  summarizedItems: 9,
  ...over,
});

Deno.test("`commitSummary()` moves the epoch with its summary, or writes nothing", async () => {
  await withStore((store) => {
    const events = () => readEvents(store, "default").length;
    assert.deepEqual(commitSummary(store, "default", summary()), {
      epoch: 1,
      coversToIdx: 9,
      summarizedItems: 9,
      source: "model",
    });
    assert.equal(requireSession(store, "default").contextEpoch, 1);
    const first = latestSummary(store, "default")!;
    assert.deepEqual(
      [first.epoch, first.coversToIdx, first.source, first.digest, first.tokens],
      [1, 9, "model", { version: 1 }, 11],
    );
    assert.deepEqual(readEvents(store, "default").at(-1)!.body, {
      epoch: 1,
      covers_to_idx: 9,
      summarized_items: 9,
      summary_chars: 28,
      summary_tokens: 11,
      source: "model",
      fallback_reason: null,
    });
    const before = events();

    // A summary written against an epoch that has moved since is refused whole.
    assert.throws(
      () => commitSummary(store, "default", summary({ coversToIdx: 12 })),
      (e) =>
        isKlbrError(e, "epoch_moved") &&
        e.message ===
          "cannot commit context summary of default: the epoch moved (expected 0, found 1)",
    );
    // So is one that would not cover more than the current one.
    assert.throws(
      () => commitSummary(store, "default", summary({ expectedEpoch: 1, coversToIdx: 9 })),
      (e) =>
        isKlbrError(e, "invalid_input") &&
        e.message ===
          "cannot commit context summary of default: it must cover more than #9 (got #9)",
    );
    // A failure inside the transaction, after every write, rolls all of it back.
    assert.throws(
      () =>
        commitSummary(
          store,
          "default",
          summary({
            expectedEpoch: 1,
            coversToIdx: 20,
            beforeCommit: () => {
              throw new Error("the process dies here");
            },
          }),
        ),
      /the process dies here/,
    );
    assert.equal(requireSession(store, "default").contextEpoch, 1);
    assert.equal(latestSummary(store, "default")!.epoch, 1);
    assert.equal(getSummary(store, "default", 2), undefined);
    assert.equal(events(), before);

    commitSummary(
      store,
      "default",
      summary({
        expectedEpoch: 1,
        coversToIdx: 20,
        source: "extractive",
        fallbackReason: "the long model failed: x",
      }),
    );
    const second = latestSummary(store, "default")!;
    assert.deepEqual([second.epoch, second.coversToIdx, second.fallbackReason], [
      2,
      20,
      "the long model failed: x",
    ]);
    // The earlier summary stays readable by its epoch.
    assert.equal(getSummary(store, "default", 1)?.coversToIdx, 9);
  });
});

Deno.test("`commitSummary()` refuses an unknown session", async () => {
  await withStore((store) => {
    assert.throws(
      () => commitSummary(store, "nobody", summary()),
      (e) => isKlbrError(e, "not_found"),
    );
  });
});
