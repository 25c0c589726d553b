/**
 * Discord in the conversation lane: inputs shown as Discord messages under their channel, and
 * each outbox row shown as one message whose state follows its `outbox.<state>` records.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { LaneRecord } from "../../runtime/core/mod.ts";
import { authorName, conversationLabel } from "../../ui/src/discord_names.ts";
import { deriveLanes, type SendItem } from "../../ui/src/lane_view.ts";
import { sendLabel } from "../../ui/src/outbox_view.ts";
import { rec } from "./_record_data.ts";

let clock = 1_736_933_400_000;

function records(...items: [string, Record<string, unknown>][]): LaneRecord[] {
  return items.map(([type, data], i) => ({
    kind: "record",
    session: "default",
    seq: i + 1,
    at: clock += 1000,
    type,
    data,
  }));
}

const PENDING = (id: string, body = "Build is green.") =>
  [
    "outbox.pending",
    {
      outbox_id: id,
      state: "pending",
      conversation: "discord:555",
      destination: { channel_id: "555" },
      body,
      frame_id: "fr_1",
      cell_id: "cell_1",
    },
  ] as [string, Record<string, unknown>];

/** An `outbox.<state>` step as the sender writes it: every field, `extra` over them. */
const STEP = (id: string, state: string, extra: Record<string, unknown> = {}) =>
  [`outbox.${state}`, {
    outbox_id: id,
    state,
    attempts: 1,
    remote_id: null,
    error: null,
    ...extra,
  }] as [string, Record<string, unknown>];

/** The badge words of a send, as the conversation lane shows them. */
function badge(send: SendItem): string {
  return sendLabel(send.state, send.delivery);
}

function sends(list: LaneRecord[]): SendItem[] {
  return deriveLanes(list).conversation.filter((item): item is SendItem => item.lane === "send");
}

Deno.test("`deriveLanes()` shows a Discord input by its username and channel, not as the owner's", () => {
  const view = deriveLanes(records(["input.admitted", {
    input_id: "in_d",
    source_kind: "discord",
    dedupe_key: "discord:555:9001",
    conversation_id: "discord:555",
    author: "discord:4417:alice",
    received_at: 1_736_933_400_000,
    body: "is the build green?",
  }]));
  const [item] = view.conversation;
  assert.equal(item.lane, "input");
  if (item.lane !== "input") return;
  assert.deepEqual(
    [item.sourceKind, item.authorName, item.author, item.conversation, item.clientMsgId],
    ["discord", "alice", "discord:4417:alice", "discord:555", undefined],
  );
  assert.equal(conversationLabel(item.conversation), "Discord channel 555");
});

Deno.test("`authorName()` keeps authors that are not Discord ids as they are", () => {
  assert.equal(authorName("discord:4417:al:ice"), "al:ice");
  assert.equal(authorName("owner"), "owner");
  // Without a username part it is not a Discord author id: shown whole, never blank.
  assert.equal(authorName("discord:4417"), "discord:4417");
  assert.equal(authorName("discord::"), "discord::");
  assert.equal(authorName(""), "");
});

Deno.test("`conversationLabel()` names local and unknown conversations plainly", () => {
  assert.equal(conversationLabel("local:default"), "local:default");
  assert.equal(conversationLabel("local:other"), "local:other");
  assert.equal(conversationLabel("discord:"), "discord:");
  assert.equal(conversationLabel("matrix:!room"), "matrix:!room");
});

Deno.test("`deriveLanes()` shows an outbox send as one message moving pending → attempting → confirmed", () => {
  const list = records(
    PENDING("ob_1"),
    STEP("ob_1", "attempting", { attempts: 1 }),
    STEP("ob_1", "confirmed", { attempts: 1, remote_id: "1234567" }),
  );
  const view = deriveLanes(list);
  assert.equal(view.conversation.length, 1);
  assert.equal(view.events.length, 0, "outbox steps are shown in their message, not as events");
  const [send] = sends(list);
  assert.deepEqual(
    [send.seq, send.sendId, send.conversation, send.text, send.state],
    [1, "ob_1", "discord:555", "Build is green.", "confirmed"],
  );
  assert.deepEqual(send.delivery?.steps.map((s) => [s.seq, s.state]), [
    [2, "attempting"],
    [3, "confirmed"],
  ]);
  assert.equal(badge(send), "confirmed · posted as message 1234567");
  // Each intermediate state, in words.
  assert.equal(badge(sends(list.slice(0, 1))[0]), "pending · not posted yet");
  assert.equal(badge(sends(list.slice(0, 2))[0]), "posting to Discord · attempt 1");
});

Deno.test("`deriveLanes()` explains an unknown send: it may have been posted and is not retried", () => {
  const [send] = sends(records(
    PENDING("ob_1"),
    STEP("ob_1", "attempting", { attempts: 1 }),
    STEP("ob_1", "unknown", { attempts: 1, error: "no answer within 15000 ms" }),
  ));
  assert.equal(badge(send), "unknown · may or may not have been posted; not retried");
  assert.equal(send.delivery?.error, "no answer within 15000 ms");
});

Deno.test("`deriveLanes()` shows a failed send with Discord's error", () => {
  const [send] = sends(records(
    PENDING("ob_1"),
    STEP("ob_1", "attempting", { attempts: 1 }),
    STEP("ob_1", "failed", { attempts: 1, error: "HTTP 403: Missing Access" }),
  ));
  assert.equal(badge(send), "failed: HTTP 403: Missing Access · not posted; not retried");
});

Deno.test("`deriveLanes()` keeps a local send delivered beside Discord sends", () => {
  const items = sends(records(
    rec("send", { send_id: "snd_1", text: "done", conversation: "local:default" }),
    PENDING("ob_1"),
  ));
  assert.deepEqual(items.map((s) => [s.state, s.delivery === undefined]), [
    ["delivered", true],
    ["pending", false],
  ]);
  assert.equal(badge(items[0]), "delivered");
});

Deno.test("`deriveLanes()` moves only the send its outbox id names", () => {
  const items = sends(records(
    PENDING("ob_1", "first"),
    PENDING("ob_2", "second"),
    STEP("ob_2", "attempting", { attempts: 1 }),
    STEP("ob_2", "unknown", { error: "timeout" }),
    STEP("ob_1", "attempting", { attempts: 1 }),
  ));
  assert.deepEqual(items.map((s) => [s.sendId, s.state]), [
    ["ob_1", "attempting"],
    ["ob_2", "unknown"],
  ]);
});

Deno.test("`deriveLanes()` puts an outbox step without its pending record in the events lane", () => {
  // A step for a row the page never saw pending must still be shown, once.
  const view = deriveLanes(records(
    STEP("ob_9", "unknown", { error: "restart during the request" }),
    ["outbox.confirmed", { remote_id: "1" }],
  ));
  assert.equal(view.conversation.length, 0);
  assert.deepEqual(view.events.map((e) => [e.seq, e.title, e.severity]), [
    [1, "Discord send ob_9: unknown", "error"],
    [2, "unknown record outbox.confirmed", "warning"],
  ]);
  assert.equal(view.events[0].detail, "restart during the request");
});

Deno.test("`deriveLanes()` gives a repeated pending record of one row its own message", () => {
  const view = deriveLanes(records(
    PENDING("ob_1"),
    PENDING("ob_1"),
    STEP("ob_1", "attempting"),
  ));
  const items = view.conversation as SendItem[];
  assert.deepEqual(items.map((s) => [s.seq, s.state]), [[1, "pending"], [2, "attempting"]]);
  assert.equal(view.events.length, 0);
});

Deno.test("`deriveLanes()` shows an outbox row with missing or mistyped fields as an unknown record", () => {
  const view = deriveLanes(records(
    ["outbox.pending", { destination: { channel_id: "777" }, body: 42 }],
    ["outbox.pending", { outbox_id: 5, conversation: null }],
  ));
  assert.equal(view.conversation.length, 0, "no message is guessed from them");
  assert.deepEqual(view.events.map((e) => [e.seq, e.title]), [
    [1, "unknown record outbox.pending"],
    [2, "unknown record outbox.pending"],
  ]);
});

Deno.test("`deriveLanes()` leaves a send where it was when a step lacks its fields", () => {
  const view = deriveLanes(records(PENDING("ob_1"), ["outbox.attempting", { outbox_id: "ob_1" }]));
  const [send] = view.conversation as SendItem[];
  assert.equal(send.state, "pending");
  assert.equal(badge(send), "pending · not posted yet");
  assert.deepEqual(view.events.map((e) => [e.seq, e.title]), [
    [2, "unknown record outbox.attempting"],
  ]);
});

Deno.test("`sendLabel()` names a failure without an error and an unfamiliar state as it is", () => {
  const delivery = {
    outboxId: "ob_1",
    attempts: undefined,
    remoteId: undefined,
    error: undefined,
    steps: [],
    tries: [],
    notBefore: undefined,
  };
  assert.equal(
    sendLabel("failed", delivery),
    "failed: Discord refused it · not posted; not retried",
  );
  assert.equal(sendLabel("confirmed", delivery), "confirmed · posted");
  assert.equal(sendLabel("held", delivery), "held");
});

Deno.test("`deriveLanes()` shows a rate-limited retry, a reconciliation and a reaction in words", () => {
  const [send, reaction] = sends(records(
    PENDING("ob_1"),
    ["outbox.attempting", {
      outbox_id: "ob_1",
      state: "attempting",
      attempts: 1,
      remote_id: null,
      error: null,
    }],
    ["outbox.rate_limited", {
      outbox_id: "ob_1",
      state: "pending",
      attempts: 1,
      remote_id: null,
      error: "HTTP 429: not processed; retry after 200 ms",
      tries: [{ at: 3, how: "rate_limit", outcome: "HTTP 429: not processed; retry after 200 ms" }],
    }],
    ["outbox.attempting", {
      outbox_id: "ob_1",
      state: "attempting",
      attempts: 2,
      remote_id: null,
      error: null,
    }],
    ["outbox.unknown", {
      outbox_id: "ob_1",
      state: "unknown",
      attempts: 2,
      remote_id: null,
      error: "no answer",
      not_before: 5,
      tries: [],
    }],
    ["outbox.pending", {
      outbox_id: "ob_2",
      state: "pending",
      kind: "reaction",
      conversation: "discord:555",
      destination: { channel_id: "555", message_id: "77" },
      body: "👍",
      frame_id: null,
      cell_id: null,
    }],
  ));
  assert.equal(badge(send), "unknown · may or may not have been posted; reconciling by its nonce");
  assert.equal(reaction.text, "reaction 👍 on message 77");
  const delivery = {
    ...send.delivery!,
    tries: [{ how: "repost", outcome: "a re-post with the same nonce returned message 9" }],
  };
  assert.equal(
    sendLabel("confirmed", { ...delivery, remoteId: "9" }),
    "confirmed · posted as message 9 · reconciled: a re-post with the same nonce returned message 9",
  );
  assert.equal(
    sendLabel("unknown", { ...delivery, notBefore: null }),
    "unknown · left to you after 1 tries; never blindly resent: a re-post with the same nonce returned message 9",
  );
  assert.equal(
    sendLabel("pending", { ...delivery, tries: [{ how: "rate_limit", outcome: "HTTP 429" }] }),
    "pending · rate limited, retrying the same message: HTTP 429",
  );
});
