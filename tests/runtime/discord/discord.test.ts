// Discord behind the admission path, with an honest outbox: the RPC handlers against a real
// store, then end to end with the real daemon, the real workbench, the fake model and a
// loopback fake of Discord's gateway and REST API (tests/fakes/discord_server.ts). The gateway
// and the sender alone are in gateway.test.ts and sender.test.ts.

import assert from "node:assert/strict";
import { discordRpcs, GATEWAY_INTENTS } from "../../../runtime/discord/mod.ts";
import { bindRpcs, RpcRegistry } from "../../../runtime/kernel/mod.ts";
import { KlbrError, type LaneRecord } from "../../../runtime/core/mod.ts";
import { readEvents } from "../../../store/tables/events.ts";
import { acceptFrame } from "../../../store/tables/frames.ts";
import { admitInput } from "../../../store/tables/inputs.ts";
import { getOutbox } from "../../../store/tables/outbox.ts";
import { ensureSession } from "../../../store/tables/sessions.ts";
import { openStore, type Store } from "../../../store/store.ts";
import { startTestDaemon } from "../../_helpers/daemon.ts";
import { connectLane, type LaneClient } from "../../_helpers/lane_client.ts";
import { type FakeDiscord, startFakeDiscord } from "../../fakes/discord_server.ts";
import { startFakeOpenAI } from "../../fakes/openai_server.ts";
import { AMBIENT_HEADING } from "../../../runtime/context/mod.ts";

// ---- the discord.* RPC handlers ----

async function withHandlers(
  discord: { channels: string[] } | undefined,
  fn: (
    call: (method: string, params: Record<string, unknown>) => Promise<unknown>,
    store: Store,
    wakes: () => number,
    setFrame: (frame: { id: string; routing: unknown } | null) => void,
  ) => Promise<void>,
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "klbr-discord-" });
  const store = openStore(dir);
  let wakes = 0;
  let frame: { id: string; routing: unknown } | null = null;
  try {
    ensureSession(store);
    const registry = new RpcRegistry(bindRpcs(discordRpcs, {
      store,
      session: "default",
      discord: discord === undefined ? undefined : {
        channels: () => discord.channels,
        wake: () => void wakes++,
        typing: (channel) => Promise.resolve({ ok: channel === "123", error: null }),
      },
      frame: () => frame,
    }));
    const ctx = { signal: new AbortController().signal, parent: "e1", cell: null };
    await fn(
      (method, params) => registry.call(method, params, ctx),
      store,
      () => wakes,
      (f) => void (frame = f),
    );
  } finally {
    store.close();
    await Deno.remove(dir, { recursive: true });
  }
}

async function rejects(promise: Promise<unknown>, code: string, message: string): Promise<void> {
  await assert.rejects(promise, (error) => {
    assert.ok(error instanceof KlbrError);
    assert.equal(error.code, code);
    assert.equal(error.message, message);
    return true;
  });
}

Deno.test("`discord.send` writes a pending row before it answers and wakes the sender", async () => {
  await withHandlers({ channels: ["123"] }, async (call, store, wakes) => {
    const receipt = await call("discord.send", { text: "hi", channel: "123", reply_to: "9" }) as {
      outbox_id: string;
      state: string;
    };
    assert.equal(receipt.state, "pending");
    const row = getOutbox(store, receipt.outbox_id);
    assert.equal(row?.state, "pending");
    assert.deepEqual(row?.destination, { channel_id: "123", reply_to: "9" });
    assert.equal(row?.conversation, "discord:123");
    assert.equal(wakes(), 1);
    const status = await call("discord.status", { outbox_id: receipt.outbox_id });
    assert.deepEqual(status, {
      outbox_id: receipt.outbox_id,
      kind: "message",
      state: "pending",
      attempts: 0,
      remote_id: null,
      error: null,
      channel_id: "123",
      reply_to: "9",
      input_id: null,
      nonce: receipt.outbox_id.slice(-25),
      tries: [],
    });
  });
});

Deno.test("`discord.send` refuses when Discord is not configured", async () => {
  await withHandlers(undefined, async (call) => {
    await rejects(
      call("discord.send", { text: "hi", channel: "123" }),
      "invalid_config",
      "cannot send to discord: discord is not configured (got no discord node in the configuration)",
    );
  });
});

Deno.test("`discord.send` refuses a channel that is not configured", async () => {
  await withHandlers({ channels: ["123"] }, async (call, _store, wakes) => {
    await rejects(
      call("discord.send", { text: "hi", channel: "999" }),
      "invalid_input",
      "cannot send to discord: channel 999 is not configured (got 999)",
    );
    assert.equal(wakes(), 0);
  });
});

Deno.test("`discord.send` without a channel refuses a turn that answers no discord conversation", async () => {
  await withHandlers({ channels: ["123"] }, async (call) => {
    await rejects(
      call("discord.send", { text: "hi" }),
      "invalid_input",
      "cannot send to discord: this turn answers no discord conversation; pass channel= (got [])",
    );
  });
});

Deno.test("`discord.send` refuses blank or over-long text and malformed ids", async () => {
  await withHandlers({ channels: ["123"] }, async (call) => {
    await rejects(
      call("discord.send", { text: " ", channel: "123" }),
      "invalid_input",
      "cannot send to discord: text must be 1-2000 characters and not blank (got 1 characters)",
    );
    await rejects(
      call("discord.send", { text: "x".repeat(2001), channel: "123" }),
      "invalid_input",
      "cannot send to discord: text must be 1-2000 characters and not blank (got 2001 characters)",
    );
    await rejects(
      call("discord.send", { text: "hi", channel: "general" }),
      "invalid_input",
      "cannot send to discord: channel: Invalid string: must match pattern /^[0-9]{1,20}$/ " +
        '(got {"text":"hi","channel":"general"})',
    );
  });
});

Deno.test("`discord.send` counts text in code points, as Discord does: 1,500 emoji are 1,500 characters", async () => {
  // Discord's API counts a string's length in code points (discord/discord-api-docs#1315);
  // each of these emoji is two UTF-16 code units, so `.length` would say 3,000.
  await withHandlers({ channels: ["123"] }, async (call) => {
    const sent = await call("discord.send", { text: "\u{1F914}".repeat(1500), channel: "123" });
    assert.equal((sent as { state: string }).state, "pending");
    await rejects(
      call("discord.send", { text: "\u{1F914}".repeat(2001), channel: "123" }),
      "invalid_input",
      "cannot send to discord: text must be 1-2000 characters and not blank (got 2001 characters)",
    );
  });
});

Deno.test("`discord.status` refuses an unknown outbox id", async () => {
  await withHandlers({ channels: ["123"] }, async (call) => {
    await rejects(
      call("discord.status", { outbox_id: "ob_nope" }),
      "not_found",
      'cannot read discord send status: no outbox message ob_nope (got "ob_nope")',
    );
  });
});

/** A Discord input of channel 123 consumed by an accepted frame routed to its conversation. */
function discordFrame(store: Store, messageId: string, ignored: string[] = []) {
  const input = admitInput(store, {
    session: "default",
    sourceKind: "discord",
    dedupeKey: `discord:123:${messageId}`,
    conversationId: "discord:123",
    author: "discord:42:ann",
    body: { text: "hi" },
  }).inputId;
  const routing = {
    conversations: ["discord:123"],
    ...(ignored.length ? { ignored: [{ input_id: input, reason: "ambient" }] } : {}),
  };
  const frame = acceptFrame(store, {
    session: "default",
    inputIds: [input],
    routing,
    contextEpoch: 0,
    policyRevision: "r",
  });
  return { input, frame: { id: frame.frameId, routing } };
}

Deno.test("`discord.send` in a turn answering Discord replies to its newest input, which is the reply state", async () => {
  await withHandlers({ channels: ["123"] }, async (call, store, _wakes, setFrame) => {
    const { input, frame } = discordFrame(store, "555");
    setFrame(frame);
    const receipt = await call("discord.send", { text: "pong" }) as { outbox_id: string };
    const row = getOutbox(store, receipt.outbox_id)!;
    assert.deepEqual(row.destination, { channel_id: "123", reply_to: "555" });
    assert.equal(row.inputId, input);
    // reply_to=False sends without an anchor; an input of another channel is refused.
    const plain = await call("discord.send", { text: "x", reply_to: false }) as {
      outbox_id: string;
    };
    assert.deepEqual(getOutbox(store, plain.outbox_id)?.destination, { channel_id: "123" });
    assert.equal(getOutbox(store, plain.outbox_id)?.inputId, null);
    await rejects(
      call("discord.send", { text: "x", reply_to: "in_01J0000000AAAAAAAAAAAAAAAA" }),
      "invalid_input",
      "cannot send to discord: reply_to in_01J0000000AAAAAAAAAAAAAAAA is not a discord input of channel 123 (got in_01J0000000AAAAAAAAAAAAAAAA)",
    );
  });
});

Deno.test("`discord.react` queues a reaction row on an input's message; `discord.typing` is never a row", async () => {
  await withHandlers({ channels: ["123"] }, async (call, store, wakes, setFrame) => {
    const { input, frame } = discordFrame(store, "556");
    setFrame(frame);
    const receipt = await call("discord.react", { message: input, emoji: "👀" }) as {
      outbox_id: string;
    };
    const row = getOutbox(store, receipt.outbox_id)!;
    assert.equal(row.kind, "reaction");
    assert.equal(row.body, "👀");
    assert.deepEqual(row.destination, { channel_id: "123", message_id: "556" });
    assert.equal(wakes(), 1);
    assert.deepEqual(await call("discord.typing", {}), { ok: true, error: null });
    assert.equal(
      readEvents(store, "default", { since: 0, limit: 100 }).filter((e) =>
        e.kind === "outbox.pending"
      ).length,
      1,
    );
    await rejects(
      call("discord.react", { message: "556", emoji: "a b" }),
      "invalid_input",
      'cannot react on discord: emoji: has a space or a slash (got {"message":"556","emoji":"a b"})',
    );
  });
});

Deno.test("`discord.send` and `discord.react` queue the same thing once per frame; a key holds across frames", async () => {
  await withHandlers({ channels: ["123"] }, async (call, store, _wakes, setFrame) => {
    const { input, frame } = discordFrame(store, "560");
    setFrame(frame);
    type Receipt = { outbox_id: string; state: string; duplicate: boolean };
    const first = await call("discord.send", { text: "on it" }) as Receipt;
    const again = await call("discord.send", { text: "on it" }) as Receipt;
    assert.deepEqual([first.duplicate, again.duplicate], [false, true]);
    assert.equal(again.outbox_id, first.outbox_id, "one row, so one nonce");
    // Another text, or no reply anchor, is another message.
    const other = await call("discord.send", { text: "done" }) as Receipt;
    const plain = await call("discord.send", { text: "on it", reply_to: false }) as Receipt;
    const react = await call("discord.react", { message: input, emoji: "👀" }) as Receipt;
    const reactAgain = await call("discord.react", { message: input, emoji: "👀" }) as Receipt;
    assert.deepEqual([other.duplicate, plain.duplicate, react.duplicate, reactAgain.duplicate], [
      false,
      false,
      false,
      true,
    ]);
    assert.equal(reactAgain.outbox_id, react.outbox_id);
    // A later frame says the same words again; an explicit key holds across frames.
    const keyed = await call("discord.send", { text: "deployed", key: "deploy-7" }) as Receipt;
    setFrame(discordFrame(store, "561").frame);
    const later = await call("discord.send", { text: "on it" }) as Receipt;
    const keyedLater = await call("discord.send", {
      text: "deployed!",
      key: "deploy-7",
    }) as Receipt;
    assert.deepEqual([later.duplicate, keyedLater.duplicate], [false, true]);
    assert.equal(keyedLater.outbox_id, keyed.outbox_id);
    const rows = readEvents(store, "default", { since: 0, limit: 100 })
      .filter((e) => e.kind === "outbox.pending");
    assert.equal(rows.length, 6, "on it, done, on it (no anchor), 👀, deployed, on it (later)");
    await rejects(
      call("discord.send", { text: "x", key: "" }),
      "invalid_input",
      "cannot send to discord: key: Too small: expected string to have >=1 characters " +
        '(got {"text":"x","key":""})',
    );
  });
});

Deno.test("`input.ignore` records the agent's decision on an input of its frame, and refuses others", async () => {
  await withHandlers({ channels: ["123"] }, async (call, store, _wakes, setFrame) => {
    const { input, frame } = discordFrame(store, "557");
    await rejects(
      call("input.ignore", { input, reason: "small talk" }),
      "invalid_input",
      `cannot ignore input: ${input} is not an input of this turn's frame (got ${input})`,
    );
    setFrame(frame);
    const result = await call("input.ignore", { input, reason: "small talk" }) as { seq: number };
    const event = readEvents(store, "default", { since: result.seq - 1, limit: 1 })[0];
    assert.equal(event.kind, "input.ignored");
    assert.deepEqual(event.body, {
      input_id: input,
      frame_id: frame.id,
      reason: "small talk",
      by: "agent",
    });
  });
});

// ---- end to end ----

const TOKEN = "fake-bot-token-7";
const WAIT_CELL = { toolCall: { code: "wait()" } };

const discordConfig = (fake: FakeDiscord, timeoutMs: number, extra = "") =>
  `discord {\n    token_env "DISCORD_TOKEN"\n    channels "123" "456"\n    api_url "${fake.apiUrl}"\n    gateway_url "${fake.gatewayUrl}"\n    send_timeout_ms ${timeoutMs}\n${extra}}\n`;

const records = (client: LaneClient, type: string) =>
  client.messages.filter((m): m is LaneRecord => m.kind === "record" && m.type === type);

const waitRecord = (
  client: LaneClient,
  type: string,
  extra: (r: LaneRecord) => boolean = () => true,
) => client.waitFor<LaneRecord>((m) => m.kind === "record" && m.type === type && extra(m), 30_000);

/** The outbox states of `id`, in the order the lane saw them. */
const statesOf = (client: LaneClient, id: string) =>
  client.messages.filter((m): m is LaneRecord =>
    m.kind === "record" && m.type.startsWith("outbox.") && m.data.outbox_id === id
  ).map((m) => m.data.state);

/** The dedupe keys the lane saw admitted, in order. */
const admittedKeys = (client: LaneClient) =>
  records(client, "input.admitted").map((r) => r.data.dedupe_key as string);

async function startAll(timeoutMs: number, extra = "") {
  const model = startFakeOpenAI({ fallback: () => WAIT_CELL });
  const discord = startFakeDiscord();
  const daemon = await startTestDaemon({
    modelUrl: model.url,
    extraConfig: discordConfig(discord, timeoutMs, extra),
    env: { DISCORD_TOKEN: TOKEN },
  });
  await discord.identified();
  const client = await connectLane({ port: daemon.port, token: daemon.token });
  return { model, discord, daemon, client };
}

Deno.test("a Discord message delivered twice is admitted once; discord.send replies once, anchored, and is confirmed", async () => {
  const { model, discord, daemon, client } = await startAll(10_000);
  try {
    // Identify carries the token and the message intents.
    assert.equal(discord.identifies[0].token, `Bot ${TOKEN}`);
    assert.equal(discord.identifies[0].intents, GATEWAY_INTENTS);
    model.enqueue({
      toolCall: {
        code: "r = await discord.send('hi')\nprint(r['state'])\nawait local.send('noted')\nwait()",
      },
    });
    const mention = { channelId: "123", messageId: "555", content: "hello bot", mentionBot: true };
    discord.dispatchMessage(mention);
    discord.dispatchMessage(mention);
    // Ignored: a bot author, and a channel that is not configured.
    discord.dispatchMessage({ channelId: "123", messageId: "557", content: "beep", bot: true });
    discord.dispatchMessage({ channelId: "789", messageId: "558", content: "elsewhere" });
    // A later message on the same socket: once it is admitted, the ones before were handled.
    discord.dispatchMessage({ channelId: "456", messageId: "556", content: "second" });
    await waitRecord(client, "input.admitted", (r) => r.data.dedupe_key === "discord:456:556");

    assert.deepEqual(admittedKeys(client), ["discord:123:555", "discord:456:556"]);
    const first = records(client, "input.admitted")[0].data;
    assert.equal(first.source_kind, "discord");
    assert.equal(first.conversation_id, "discord:123");
    assert.equal(first.author, "discord:42:ann");
    assert.deepEqual(first.body, {
      text: "<@1> hello bot",
      message_id: "555",
      channel_id: "123",
      guild_id: "900",
      dm: false,
      mentioned: true,
      reply_to: null,
      thread_of: null,
      attachments: [],
    });
    assert.equal(first.received_at, Date.parse("2026-01-02T03:04:05.678Z"));

    const confirmed = await waitRecord(client, "outbox.confirmed");
    const id = confirmed.data.outbox_id as string;
    assert.deepEqual(statesOf(client, id), ["pending", "attempting", "confirmed"]);
    assert.equal(confirmed.data.remote_id, discord.botMessages("123")[0].id);
    const pending = records(client, "outbox.pending")[0].data;
    assert.equal(pending.conversation, "discord:123");
    assert.ok(typeof pending.cell_id === "string" && typeof pending.frame_id === "string");
    // The reply state of input 555 is consumed by the confirmation, not before.
    const replied = await waitRecord(client, "input.replied");
    assert.deepEqual(replied.data, {
      input_id: first.input_id,
      outbox_id: id,
      remote_id: confirmed.data.remote_id,
    });
    assert.ok(
      replied.seq > confirmed.seq - 1 && replied.seq > records(client, "outbox.attempting")[0].seq,
    );

    const posts = discord.messagePosts();
    assert.equal(posts.length, 1);
    assert.equal(posts[0].path, "/channels/123/messages");
    assert.equal(posts[0].authorization, `Bot ${TOKEN}`);
    assert.deepEqual(posts[0].body, {
      content: "hi",
      nonce: id.slice(-25),
      enforce_nonce: true,
      message_reference: { message_id: "555", fail_if_not_exists: false },
    });
    const cell = await waitRecord(client, "cell.finished");
    assert.equal((cell.data.result as { stdout: string }).stdout, "pending\n");
    // local.send in a turn that answers Discord still speaks to the local conversation only.
    const local = records(client, "send");
    assert.deepEqual(local.map((r) => [r.data.text, r.data.conversation]), [
      ["noted", "local:default"],
    ]);
    // The token never reaches the log.
    assert.ok(!daemon.logs().includes(TOKEN));
  } finally {
    await client.close();
    await daemon.stop();
    await discord.close();
    await model.close();
  }
});

Deno.test("an ambient message gets no reply and no model request; a mention, a DM and a reply to the bot each get one", async () => {
  const { model, discord, daemon, client } = await startAll(10_000);
  try {
    discord.dispatchMessage({ channelId: "123", messageId: "600", content: "lunch anyone?" });
    // Its frame takes it as ignored, with the reason, and ends at once without a turn.
    const accepted = await waitRecord(client, "frame.accepted");
    const routing = accepted.data.routing as { ignored: { input_id: string; reason: string }[] };
    assert.equal(routing.ignored.length, 1);
    assert.match(routing.ignored[0].reason, /^ambient: a Discord message that does not mention/);
    const finished = await waitRecord(client, "frame.finished");
    assert.equal(finished.data.reason, "every input ignored; no turn");
    // A local ping after it: once its turn has asked the model, the ambient frame made no request.
    await client.request({ kind: "input", client_msg_id: "p1", text: "ping" });
    await model.waitForRequests(1);
    await waitRecord(client, "frame.finished", (r) => r.seq > finished.seq);
    assert.equal(model.requests.length, 1);
    assert.ok(!JSON.stringify(model.requests[0].body).includes("lunch anyone?"));

    model.enqueue(
      { toolCall: { code: "await discord.send('yes?')\nwait()" } },
      { toolCall: { code: "await discord.send('dm back')\nwait()" } },
    );
    discord.dispatchMessage({
      channelId: "123",
      messageId: "601",
      content: "help",
      mentionBot: true,
    });
    await waitRecord(client, "outbox.confirmed");
    // The turn that answers in channel 123 reads the talk it had been silent through.
    const messages = (model.requests[1].body as { messages: { content: string }[] }).messages;
    const opening = String(messages.at(-1)?.content);
    assert.ok(opening.startsWith(AMBIENT_HEADING), opening);
    assert.ok(opening.indexOf("lunch anyone?") < opening.lastIndexOf("help"), opening);
    discord.dispatchMessage({ channelId: "456", messageId: "602", content: "psst", guildId: null });
    await client.waitFor(() => records(client, "outbox.confirmed").length === 2, 30_000);
    const replyTo = discord.botMessages("123")[0].id;
    model.enqueue({ toolCall: { code: "await discord.send('you replied')\nwait()" } });
    discord.dispatchMessage({
      channelId: "123",
      messageId: "603",
      content: "thanks",
      replyTo: { messageId: replyTo, authorId: "1" },
    });
    await client.waitFor(() => records(client, "outbox.confirmed").length === 3, 30_000);
    assert.deepEqual(
      discord.botMessages("123").map((m) => [m.content, m.message_reference?.message_id]),
      [
        ["yes?", "601"],
        ["you replied", "603"],
      ],
    );
    assert.deepEqual(discord.botMessages("456").map((m) => m.content), ["dm back"]);
    // Four model requests: the local ping and the three addressed messages, none for ambient.
    assert.equal(model.requests.length, 4);
  } finally {
    await client.close();
    await daemon.stop();
    await discord.close();
    await model.close();
  }
});

Deno.test("messages sent while the gateway is down, and while the daemon is killed, are each admitted exactly once", async () => {
  const { model, discord, daemon, client } = await startAll(10_000);
  let restarted: Awaited<ReturnType<typeof daemon.restart>> | undefined;
  let again: Awaited<ReturnType<typeof daemon.restart>> | undefined;
  let after: LaneClient | undefined;
  try {
    // Real snowflakes (from the clock): later than the cursor each channel got at first READY.
    const key = (channel: string, content: string) =>
      `discord:${channel}:${discord.dispatchMessage({ channelId: channel, content })}`;
    const keys = [key("123", "before")];
    await waitRecord(client, "input.admitted", (r) => r.data.dedupe_key === keys[0]);
    // Channels new to the store are anchored at the first READY, with no history to page: a
    // page then could admit a later message of one channel before an earlier one of another.
    const historyPages = () =>
      discord.posts.filter((p) => p.method === "GET" && p.path.endsWith("/messages")).length;
    assert.equal(historyPages(), 0, "no backfill of channels anchored at this READY");
    // 1. The gateway goes down; two messages are sent; it comes back: the resume replays them.
    discord.down();
    keys.push(key("123", "gap 1"), key("456", "gap 2"));
    discord.up();
    await waitRecord(client, "input.admitted", (r) => r.data.dedupe_key === keys[2]);
    assert.equal(discord.resumedCount >= 1, true);
    assert.equal(discord.identifies.length, 1);
    await client.close();

    // 2. The daemon is killed; two messages are sent; the new daemon resumes the saved session.
    await daemon.kill();
    keys.push(key("123", "while dead"), key("123", "while dead 2"));
    restarted = await daemon.restart();
    after = await connectLane({ port: restarted.port, token: restarted.token });
    await waitRecord(after, "input.admitted", (r) => r.data.dedupe_key === keys[4]);
    assert.equal(discord.identifies.length, 1);
    assert.equal(discord.resumes.at(-1)?.session_id, "s1");
    await after.close();

    // 3. Killed again, and Discord refuses to resume: the new session backfills from history.
    await restarted.kill();
    keys.push(key("123", "missed 1"), key("456", "missed 2"));
    discord.invalidateSessions();
    again = await restarted.restart();
    after = await connectLane({ port: again.port, token: again.token });
    await waitRecord(after, "input.admitted", (r) => r.data.dedupe_key === keys[5]);
    await waitRecord(after, "input.admitted", (r) => r.data.dedupe_key === keys[6]);
    assert.equal(discord.identifies.length, 2);
    // The backfill paged both channels from their last admitted message.
    assert.ok(historyPages() >= 2);
    // A new message after the backfill arrives live; then every message was admitted once.
    keys.push(key("123", "live"));
    await waitRecord(after, "input.admitted", (r) => r.data.dedupe_key === keys[7]);
    assert.deepEqual(admittedKeys(after), keys);
    // Ambient talk: read, every one of it, without a single model request.
    assert.equal(model.requests.length, 0);
  } finally {
    await client.close();
    await after?.close();
    await again?.stop();
    await discord.close();
    await model.close();
  }
});

Deno.test("SIGKILL between attempting and the response: one posted message, confirmed after reconciliation", async () => {
  const { model, discord, daemon, client } = await startAll(60_000);
  let restarted: Awaited<ReturnType<typeof daemon.restart>> | undefined;
  let after: LaneClient | undefined;
  try {
    // The fake posts the message and never answers: the response is lost with the daemon.
    discord.script("hang");
    model.enqueue({ toolCall: { code: "await discord.send('in flight')\nwait()" } });
    discord.dispatchMessage({
      channelId: "123",
      messageId: "700",
      content: "go",
      mentionBot: true,
    });
    const attempting = await waitRecord(client, "outbox.attempting");
    const id = attempting.data.outbox_id as string;
    await discord.posted(1);
    // The kill lands while the request is open: the fake holds it and the row says attempting.
    assert.equal(discord.botMessages("123").length, 1);
    assert.deepEqual(statesOf(client, id), ["pending", "attempting"]);
    await client.close();
    await daemon.kill();

    restarted = await daemon.restart();
    after = await connectLane({ port: restarted.port, token: restarted.token });
    const unknown = await waitRecord(after, "outbox.unknown", (r) => r.data.outbox_id === id);
    assert.match(unknown.data.error as string, /restarted during the request/);
    const confirmed = await waitRecord(after, "outbox.confirmed", (r) => r.data.outbox_id === id);
    assert.deepEqual(statesOf(after, id), ["pending", "attempting", "unknown", "confirmed"]);
    const posted = discord.botMessages("123");
    assert.equal(posted.length, 1);
    assert.equal(confirmed.data.remote_id, posted[0].id);
    // Reconciled by evidence: the gateway's replay of the bot's own message or a re-post with
    // the same nonce, both of which name the one message.
    const tries = confirmed.data.tries as { how: string }[];
    assert.ok(["gateway", "repost"].includes(tries.at(-1)!.how));
    await after.request({ kind: "ping" });
    assert.ok(discord.messagePosts().length <= 2);
    assert.equal(discord.botMessages("123").length, 1);
  } finally {
    await after?.close();
    await restarted?.stop();
    await discord.close();
    await model.close();
  }
});

Deno.test("a 4xx ends failed; a 5xx and a hanging request end unknown and are reconciled to confirmed, each posted once", async () => {
  const { model, discord, daemon, client } = await startAll(1_000);
  try {
    // Per message: the first POST of "two" fails after posting it, "three" never hears back.
    discord.scriptFor("one", { status: 403 });
    discord.scriptFor("two", { status: 502, created: true });
    discord.scriptFor("three", "hang");
    model.enqueue({
      toolCall: {
        code: [
          "ids = [(await discord.send(t))['outbox_id'] for t in ['one', 'two', 'three']]",
          "ids.append((await discord.send('four', channel='456'))['outbox_id'])",
          "wait()",
        ].join("\n"),
      },
    });
    discord.dispatchMessage({
      channelId: "123",
      messageId: "600",
      content: "go",
      mentionBot: true,
    });
    await client.waitFor(() => records(client, "outbox.confirmed").length === 3, 30_000);
    const ids = records(client, "outbox.pending").map((r) => r.data.outbox_id as string);
    assert.equal(ids.length, 4);
    assert.deepEqual(statesOf(client, ids[0]), ["pending", "attempting", "failed"]);
    assert.deepEqual(statesOf(client, ids[1]), ["pending", "attempting", "unknown", "confirmed"]);
    assert.deepEqual(statesOf(client, ids[2]), ["pending", "attempting", "unknown", "confirmed"]);
    assert.deepEqual(statesOf(client, ids[3]), ["pending", "attempting", "confirmed"]);
    const ended = (type: string, id: string) =>
      records(client, type).find((r) => r.data.outbox_id === id)?.data;
    assert.match(ended("outbox.failed", ids[0])?.error as string, /^HTTP 403: /);
    assert.match(
      ended("outbox.unknown", ids[1])?.error as string,
      /^HTTP 502: .*; it may have been posted/,
    );
    assert.equal(
      ended("outbox.unknown", ids[2])?.error,
      "no answer within 1000 ms; it may have been posted",
    );
    // Every message that Discord has, exactly once, in the order it was written per channel.
    assert.deepEqual(discord.botMessages("123").map((m) => m.content), ["two", "three"]);
    assert.deepEqual(discord.botMessages("456").map((m) => m.content), ["four"]);
    // The re-posts carried the same nonce as the first request.
    const nonces = discord.messagePosts().filter((p) => p.body.content === "three").map((p) =>
      p.body.nonce
    );
    assert.equal(new Set(nonces).size, 1);
  } finally {
    await client.close();
    await daemon.stop();
    await discord.close();
    await model.close();
  }
});

Deno.test("attachments are fetched into kept artifacts up to the limit; edits and deletions are events on the input; a thread is its own conversation", async () => {
  const { model, discord, daemon, client } = await startAll(
    10_000,
    "    attachment_max_bytes 16\n",
  );
  try {
    discord.serveAttachment("801", new TextEncoder().encode("tiny file"));
    discord.dispatchMessage({
      channelId: "123",
      messageId: "800",
      content: "see attached",
      attachments: [
        { id: "801", filename: "a.txt", size: 9, content_type: "text/plain" },
        { id: "802", filename: "big.bin", size: 17 },
      ],
    });
    const admitted = await waitRecord(
      client,
      "input.admitted",
      (r) => r.data.dedupe_key === "discord:123:800",
    );
    const [small, big] =
      (admitted.data.body as { attachments: Record<string, unknown>[] }).attachments;
    const sha = Array.from(
      new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode("tiny file"))),
      (b) => b.toString(16).padStart(2, "0"),
    ).join("");
    assert.deepEqual(small, {
      id: "801",
      filename: "a.txt",
      size: 9,
      content_type: "text/plain",
      artifact: sha,
      skipped: null,
    });
    // Kept (never evicted) like every file an input carries.
    assert.equal(await Deno.readTextFile(`${daemon.stateDir}/artifacts/kept/${sha}`), "tiny file");
    assert.equal(big.artifact, null);
    assert.equal(big.skipped, "over attachment_max_bytes (16 bytes)");

    discord.editMessage("123", "800", "see attached (edited)");
    const edited = await waitRecord(client, "input.edited");
    assert.deepEqual(
      [edited.data.input_id, edited.data.text],
      [admitted.data.input_id, "see attached (edited)"],
    );
    discord.deleteMessage("123", "800");
    const deleted = await waitRecord(client, "input.deleted");
    assert.equal(deleted.data.input_id, admitted.data.input_id);

    discord.createThread("850", "123");
    discord.dispatchMessage({ channelId: "850", messageId: "851", content: "in the thread" });
    const threaded = await waitRecord(
      client,
      "input.admitted",
      (r) => r.data.dedupe_key === "discord:850:851",
    );
    assert.equal(threaded.data.conversation_id, "discord:850");
    assert.equal((threaded.data.body as { thread_of: string }).thread_of, "123");
    // Still one input each: the edit and the deletion were not admitted as inputs.
    assert.deepEqual(admittedKeys(client), ["discord:123:800", "discord:850:851"]);
    assert.equal(model.requests.length, 0);
  } finally {
    await client.close();
    await daemon.stop();
    await discord.close();
    await model.close();
  }
});

Deno.test("a cell reacts and shows typing; the reaction is an outbox row, typing is not", async () => {
  const { model, discord, daemon, client } = await startAll(10_000);
  try {
    model.enqueue({
      toolCall: {
        code:
          "t = await discord.typing()\nprint(t['ok'])\nawait discord.react('900', '👍')\nwait()",
      },
    });
    discord.dispatchMessage({
      channelId: "123",
      messageId: "900",
      content: "ship it?",
      mentionBot: true,
    });
    const confirmed = await waitRecord(client, "outbox.confirmed");
    assert.equal(confirmed.data.kind, "reaction");
    assert.equal(confirmed.data.remote_id, "900:👍");
    assert.deepEqual(discord.reactions, [{ channelId: "123", messageId: "900", emoji: "👍" }]);
    assert.equal(discord.typing, 1);
    const cell = await waitRecord(client, "cell.finished");
    assert.equal((cell.data.result as { stdout: string }).stdout, "True\n");
    assert.equal(records(client, "outbox.pending").length, 1);
  } finally {
    await client.close();
    await daemon.stop();
    await discord.close();
    await model.close();
  }
});
