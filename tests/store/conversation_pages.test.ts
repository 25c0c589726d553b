// `conversationRanges()` on the store a real in-process session wrote: a quiet conversation's
// newest messages, behind a busier one's, come back as its inputs and the spans of the frames
// that took them up — the turn, its cell and its send — and nothing of the busy conversation's
// own turns; `from` and `more` say how far the answer reaches.

import assert from "node:assert/strict";
import { localDedupeKey } from "../../store/tables/dedupe_keys.ts";
import { conversationRanges } from "../../store/tables/conversation_pages.ts";
import { readEvents } from "../../store/tables/events.ts";
import { admitInput } from "../../store/tables/inputs.ts";
import { requireSession } from "../../store/tables/sessions.ts";
import { SESSION, type SessionLoop, withSessionLoop } from "../_helpers/session_loop.ts";

let n = 0;
/** Admits one input to `conversation` and waits until a turn has finished it. */
async function exchange(loop: SessionLoop, conversation: string, text: string): Promise<number> {
  const { seq } = admitInput(loop.store, {
    session: SESSION,
    sourceKind: "local",
    dedupeKey: localDedupeKey("cl_test", `m${++n}`),
    conversationId: conversation,
    author: "owner",
    body: text,
  });
  loop.session.wake();
  const finished = () => loop.records("frame.finished").length;
  const before = finished();
  await loop.settle(`the turn of ${text}`, () => finished() > before);
  return seq;
}

Deno.test("`conversationRanges()` finds a quiet conversation's messages and turns behind a busy one", async () => {
  await withSessionLoop({}, async (loop) => {
    loop.fake.enqueue({ toolCall: { code: "send('hello main')\nwait()" } });
    const first = await exchange(loop, "local:main", "hi");
    for (let i = 0; i < 12; i++) await exchange(loop, "discord:busy", `chatter ${i}`);
    const second = await exchange(loop, "local:main", "again");
    for (let i = 0; i < 12; i++) await exchange(loop, "discord:busy", `more ${i}`);
    const head = requireSession(loop.store, SESSION).nextSeq - 1;

    const all = conversationRanges(loop.store, SESSION, {
      conversation: "local:main",
      before: head + 1,
      limit: 300,
    });
    assert.deepEqual([all.from, all.more], [first, false]);
    const seqs = all.ranges.flatMap(([a, b]) => Array.from({ length: b - a + 1 }, (_, i) => a + i));
    const records = readEvents(loop.store, SESSION, { since: 0, limit: 10_000 })
      .filter((e) => seqs.includes(e.seq));
    const inputs = records.filter((e) => e.kind === "input.admitted")
      .map((e) => (e.body as { conversation_id: string }).conversation_id);
    assert.deepEqual(inputs, ["local:main", "local:main"], "no busy input came along");
    assert.deepEqual(
      records.filter((e) => e.kind === "send").map((e) => (e.body as { text: string }).text),
      ["hello main"],
    );
    assert.equal(records.filter((e) => e.kind === "frame.finished").length, 2);
    assert.ok(seqs.length < head / 4, `a small part of the log (${seqs.length} of ${head})`);
    assert.ok(all.ranges.every(([a, b], i) => a <= b && (i === 0 || a > all.ranges[i - 1][1] + 1)));

    // A budget of one record: the newest input only, and older ones are still there.
    assert.deepEqual(
      conversationRanges(loop.store, SESSION, {
        conversation: "local:main",
        before: head + 1,
        limit: 1,
      }),
      { ranges: [[second, second]], from: second, more: true },
    );
    // Before the second message: the first one's input and frame, and nothing older.
    const earlier = conversationRanges(loop.store, SESSION, {
      conversation: "local:main",
      before: second,
      limit: 300,
    });
    assert.deepEqual([earlier.ranges[0][0], earlier.from, earlier.more], [first, first, false]);
    assert.ok(earlier.ranges.every(([, b]) => b < second));
    // A conversation without messages is complete from the start.
    assert.deepEqual(
      conversationRanges(loop.store, SESSION, { conversation: "nowhere", before: 9, limit: 5 }),
      { ranges: [], from: 1, more: false },
    );
  });
});
