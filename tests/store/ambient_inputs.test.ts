/**
 * Ambient talk: a later turn in a conversation reads what the plan had read without answering
 * there, and nothing before the conversation's last answered input.
 *
 * @module
 */

import assert from "node:assert/strict";
import { ambientBefore } from "../../store/tables/ambient_inputs.ts";
import { acceptFrame } from "../../store/tables/frames.ts";
import { admitInput } from "../../store/tables/inputs.ts";
import { type Store } from "../../store/store.ts";
import { withStore } from "../_helpers/store.ts";

let n = 0;
function say(store: Store, conversation: string, body: string) {
  return admitInput(store, {
    session: "default",
    sourceKind: "discord",
    dedupeKey: `discord:${conversation}:${++n}`,
    conversationId: conversation,
    author: "discord:9:ann",
    body,
  });
}

/** A frame that answers `answered` and ignores `ignored`, as a plan's frame does. */
function frame(store: Store, answered: string[], ignored: string[]) {
  acceptFrame(store, {
    session: "default",
    inputIds: [...answered, ...ignored],
    routing: { ignored: ignored.map((id) => ({ input_id: id, reason: "ambient" })) },
    contextEpoch: 0,
    policyRevision: "test",
  });
}

Deno.test("`ambientBefore()` returns the talk ignored since the conversation's last answer, oldest first", async () => {
  await withStore((store) => {
    const old = say(store, "discord:1", "before the first answer");
    frame(store, [], [old.inputId]);
    const first = say(store, "discord:1", "@bot first");
    frame(store, [first.inputId], []);
    const a = say(store, "discord:1", "lunch anyone?");
    const elsewhere = say(store, "discord:2", "other channel");
    const b = say(store, "discord:1", "pizza");
    frame(store, [], [a.inputId, elsewhere.inputId, b.inputId]);
    const pending = say(store, "discord:1", "not planned yet");
    const second = say(store, "discord:1", "@bot second");
    const ambient = ambientBefore(store, {
      session: "default",
      conversation: "discord:1",
      beforeSeq: second.seq,
    });
    // Only what came after the last answered input, in this conversation, already planned.
    assert.deepEqual(ambient.map((i) => i.body), ["lunch anyone?", "pizza"]);
    assert.ok(!ambient.some((i) => i.id === pending.inputId));
    assert.deepEqual(
      ambientBefore(store, { session: "default", conversation: "discord:2", beforeSeq: second.seq })
        .map((i) => i.body),
      ["other channel"],
    );
    // Bounded: the newest `limit` of them.
    assert.deepEqual(
      ambientBefore(store, {
        session: "default",
        conversation: "discord:1",
        beforeSeq: second.seq,
        limit: 1,
      }).map((i) => i.body),
      ["pizza"],
    );
    // Right after an answer there is nothing ambient to show.
    assert.deepEqual(
      ambientBefore(store, { session: "default", conversation: "discord:1", beforeSeq: a.seq }),
      [],
    );
  });
});
