// Compaction of the provider sequence against real SQLite: what it covers, what the summary
// keeps apart, and the epoch it moves.

import assert from "node:assert/strict";
import { isKlbrError } from "../../runtime/core/mod.ts";
import { compactContext, latestSummary } from "../../store/context_summaries.ts";
import { appendEvent, readEvents } from "../../store/events.ts";
import { acceptFrame } from "../../store/frames.ts";
import { admitInput } from "../../store/inputs.ts";
import { appendProviderItems, readProviderItems } from "../../store/provider_items.ts";
import { ensureSession, requireSession } from "../../store/sessions.ts";
import { openStore, type Store } from "../../store/store.ts";

async function withStore(fn: (store: Store) => void) {
  const store = openStore(await Deno.makeTempDir());
  try {
    ensureSession(store, "default");
    fn(store);
  } finally {
    store.close();
  }
}

/** One turn: an input, a frame, a scratchpad note, one cell and its result, one send. */
function turn(store: Store, n: number) {
  const { inputId } = admitInput(store, {
    session: "default",
    sourceKind: "local",
    dedupeKey: `local:t:${n}`,
    conversationId: "local:default",
    author: "owner",
    body: `question ${n}`,
  });
  const { frameId } = acceptFrame(store, {
    session: "default",
    inputIds: [inputId],
    contextEpoch: requireSession(store, "default").contextEpoch,
    policyRevision: "test",
  });
  const call = `call_${n}`;
  appendProviderItems(store, "default", frameId, [
    { role: "user", content: `question ${n}` },
    {
      role: "assistant",
      content: `thinking about ${n}`,
      tool_calls: [{
        id: call,
        type: "function",
        function: {
          name: "python",
          arguments: JSON.stringify({ code: `await local.send('answer ${n}')` }),
        },
      }],
    },
    { role: "tool", tool_call_id: call, content: "outcome: ok" },
  ]);
  appendEvent(store, "default", "send", {
    send_id: `snd_${n}`,
    text: `answer ${n}`,
    conversation: "local:default",
    frame_id: frameId,
    cell_id: null,
    state: "delivered",
  });
}

Deno.test("`compactContext()` covers old items, keeps the difference between sent and scratchpad, and moves the epoch", async () => {
  await withStore((store) => {
    for (let n = 1; n <= 4; n++) turn(store, n);
    assert.equal(
      compactContext(store, "default", { keepItems: 20 }),
      undefined,
      "too short to cut",
    );

    // 12 items; keeping 3 puts the cut just before turn 4's user message (#10).
    const done = compactContext(store, "default", { keepItems: 3 })!;
    assert.deepEqual(done, { epoch: 1, coversToIdx: 9, summarizedItems: 9 });
    assert.equal(requireSession(store, "default").contextEpoch, 1);
    const summary = latestSummary(store, "default")!;
    assert.equal(summary.coversToIdx, 9);
    assert.equal(
      summary.text,
      [
        "[summary of 9 earlier items, #1–#9]",
        "Inputs you received:",
        "- question 1",
        "- question 2",
        "- question 3",
        "Messages you sent (these reached the conversation):",
        "- to local:default: answer 1 (delivered)",
        "- to local:default: answer 2 (delivered)",
        "- to local:default: answer 3 (delivered)",
        "Your scratchpad notes (never delivered to anyone):",
        "- thinking about 1",
        "- thinking about 2",
        "- thinking about 3",
        "Cells you ran:",
        "- await local.send('answer 1') → outcome: ok",
        "- await local.send('answer 2') → outcome: ok",
        "- await local.send('answer 3') → outcome: ok",
      ].join("\n"),
    );
    // Nothing is deleted: every item is still there.
    assert.equal(readProviderItems(store, "default").length, 12);
    const event = readEvents(store, "default").at(-1)!;
    assert.deepEqual([event.kind, event.body], ["context.compacted", {
      epoch: 1,
      covers_to_idx: 9,
      summarized_items: 9,
      summary_chars: summary.text.length,
    }]);

    // A later compaction continues after the last cut and keeps the earlier summary.
    for (let n = 5; n <= 6; n++) turn(store, n);
    const next = compactContext(store, "default", { keepItems: 3 })!;
    assert.deepEqual(next, { epoch: 2, coversToIdx: 15, summarizedItems: 6 });
    const text = latestSummary(store, "default")!.text;
    assert.ok(text.startsWith("[summary of 9 earlier items, #1–#9]"));
    assert.match(text, /\[summary of 6 earlier items, #10–#15\]/);
  });
});

Deno.test("`compactContext()` refuses a bad keepItems and an unknown session", async () => {
  await withStore((store) => {
    for (const keepItems of [0, 1.5, 100_001]) {
      assert.throws(
        () => compactContext(store, "default", { keepItems }),
        (e) =>
          isKlbrError(e, "invalid_input") &&
          e.message ===
            `cannot compact context: keepItems must be an integer in 1-100000 (got ${keepItems})`,
      );
    }
    assert.throws(
      () => compactContext(store, "nobody", { keepItems: 5 }),
      (e) => isKlbrError(e, "not_found"),
    );
  });
});

Deno.test("`compactContext()` cuts only before a user message, keeping at least keepItems", async () => {
  await withStore((store) => {
    for (let n = 1; n <= 4; n++) turn(store, n);
    // Keeping 4 of 12 cannot cut before #10 (that keeps 3), so it cuts before #7: a turn is
    // never split.
    assert.equal(compactContext(store, "default", { keepItems: 4 })?.coversToIdx, 6);
  });
});
