// What people's Discord messages become, against the real daemon and the loopback fake Discord
// (tests/fakes/discord_server.ts): Discord's system messages — a member joining, a message
// pinned, a thread created — are not things a person said to klbr, and are not admitted
// (docs/discord.md, "Inbound beyond text").

import assert from "node:assert/strict";
import type { LaneRecord } from "../../../runtime/core/mod.ts";
import { startTestDaemon } from "../../_helpers/daemon.ts";
import { connectLane, type LaneClient } from "../../_helpers/lane_client.ts";
import { startFakeDiscord } from "../../fakes/discord_server.ts";
import { startFakeOpenAI } from "../../fakes/openai_server.ts";

const TOKEN = "fake-bot-token-11";
const WAIT_CELL = { toolCall: { code: "wait()" } };

/** The fake model and Discord, a daemon using both, and a lane client to it. */
type Parts = Awaited<ReturnType<typeof startAll>>;

/** Runs `fn` with the parts started, and stops them after, whatever `fn` did. */
async function withAll(fn: (parts: Parts) => Promise<void>): Promise<void> {
  const parts = await startAll();
  try {
    await fn(parts);
  } finally {
    await parts.client.close();
    await parts.daemon.stop();
    await parts.discord.close();
    await parts.model.close();
  }
}

async function startAll() {
  const model = startFakeOpenAI({ fallback: () => WAIT_CELL });
  const discord = startFakeDiscord();
  const daemon = await startTestDaemon({
    modelUrl: model.url,
    extraConfig:
      `discord {\n    token_env "DISCORD_TOKEN"\n    channels "123"\n    api_url "${discord.apiUrl}"\n    gateway_url "${discord.gatewayUrl}"\n}\n`,
    env: { DISCORD_TOKEN: TOKEN },
  });
  await discord.identified();
  const client = await connectLane({ port: daemon.port, token: daemon.token });
  return { model, discord, daemon, client };
}

const admittedKeys = (client: LaneClient) =>
  client.messages.filter((m): m is LaneRecord => m.kind === "record" && m.type === "input.admitted")
    .map((r) => r.data.dedupe_key as string);

Deno.test("Discord's system messages (a join, a pin of the bot's message, a thread created) are not admitted", async () => {
  await withAll(async ({ model, discord, client }) => {
    model.enqueue({ toolCall: { code: "await discord.send('hello there')\nwait()" } });
    discord.dispatchMessage({
      channelId: "123",
      messageId: "700",
      content: "hi",
      mentionBot: true,
    });
    await client.waitFor((m) => m.kind === "record" && m.type === "outbox.confirmed", 30_000);
    const botMessage = discord.botMessages("123")[0].id;
    // Discord's "Message Types": USER_JOIN (7) is authored by the member who joined, with no
    // content; CHANNEL_PINNED_MESSAGE (6) by whoever pinned, its `message_reference` naming the
    // pinned message (here the bot's: read as a reply to the bot, it would be answered);
    // THREAD_CREATED (18) carries the thread's name as its content.
    discord.dispatchMessage({
      channelId: "123",
      messageId: "701",
      content: "",
      authorId: "77",
      username: "newcomer",
      type: 7,
    });
    discord.dispatchMessage({
      channelId: "123",
      messageId: "702",
      content: "",
      type: 6,
      reference: botMessage,
    });
    discord.dispatchMessage({ channelId: "123", messageId: "703", content: "a thread", type: 18 });
    // A person's message after them, on the same socket: once it is admitted, they were handled.
    discord.dispatchMessage({ channelId: "123", messageId: "704", content: "thanks" });
    await client.waitFor(
      (m) =>
        m.kind === "record" && m.type === "input.admitted" &&
        m.data.dedupe_key === "discord:123:704",
      30_000,
    );
    assert.deepEqual(admittedKeys(client), ["discord:123:700", "discord:123:704"]);
  });
});

const recordsOf = (client: LaneClient, type: string) =>
  client.messages.filter((m): m is LaneRecord => m.kind === "record" && m.type === type);

/** Waits until the message `id` of channel 123 is admitted, and returns its `input.admitted`. */
async function admittedOf(client: LaneClient, id: string): Promise<LaneRecord> {
  const key = `discord:123:${id}`;
  await client.waitFor(
    (m) => m.kind === "record" && m.type === "input.admitted" && m.data.dedupe_key === key,
    30_000,
  );
  return recordsOf(client, "input.admitted").find((r) => r.data.dedupe_key === key)!;
}

Deno.test("a forwarded message is admitted with the forwarded text and attachments, and a forward of the bot's message is not a reply to it", async () => {
  await withAll(async ({ model, discord, client }) => {
    model.enqueue({ toolCall: { code: "await discord.send('the build is green')\nwait()" } });
    discord.dispatchMessage({
      channelId: "123",
      messageId: "700",
      content: "hi",
      mentionBot: true,
    });
    await client.waitFor((m) => m.kind === "record" && m.type === "outbox.confirmed", 30_000);
    const botMessage = discord.botMessages("123")[0].id;
    // The original of the first forward is said in a channel klbr does not listen in.
    discord.serveAttachment("5001", new TextEncoder().encode("log line"));
    discord.dispatchMessage({
      channelId: "555",
      messageId: "710",
      content: "the deploy failed, log attached",
      attachments: [{ id: "5001", filename: "deploy.log", size: 8, content_type: "text/plain" }],
    });
    // Discord's forward: empty content of its own, the original in `message_snapshots`.
    discord.dispatchMessage({
      channelId: "123",
      messageId: "711",
      content: "",
      forwardOf: { channelId: "555", messageId: "710" },
    });
    discord.dispatchMessage({
      channelId: "123",
      messageId: "712",
      content: "",
      forwardOf: { channelId: "123", messageId: botMessage },
    });
    const first = (await admittedOf(client, "711")).data.body as Record<string, unknown>;
    const second = (await admittedOf(client, "712")).data.body as Record<string, unknown>;
    assert.equal(first.text, "[forwarded message]\nthe deploy failed, log attached");
    const [note] = first.attachments as Record<string, unknown>[];
    assert.deepEqual(
      [note.id, note.filename, note.size, note.content_type, note.skipped],
      ["5001", "deploy.log", 8, "text/plain", null],
    );
    assert.match(String(note.artifact), /\S/);
    // Forwarding the bot's words is not answering the bot: nothing here addresses klbr.
    assert.equal(second.text, "[forwarded message]\nthe build is green");
    assert.equal(second.reply_to, null);
    assert.equal(first.reply_to, null);
  });
});

Deno.test("an update after an edit that changes nothing (a link's embed, a pin: the same edited_timestamp) records no second input.edited", async () => {
  await withAll(async ({ discord, client }) => {
    discord.dispatchMessage({ channelId: "123", messageId: "720", content: "see example.com" });
    await admittedOf(client, "720");
    discord.editMessage("123", "720", "see https://example.com/");
    // Discord resends the whole message, its last edit's `edited_timestamp` unchanged.
    discord.embedMessage("123", "720");
    // A later message on the same socket: once it is admitted, the updates were handled.
    discord.dispatchMessage({ channelId: "123", messageId: "721", content: "ok" });
    await admittedOf(client, "721");
    assert.deepEqual(recordsOf(client, "input.edited").map((r) => r.data.text), [
      "see https://example.com/",
    ]);
  });
});

Deno.test("a message klbr cannot read is named in the log, not dropped in silence, and the next one is admitted", async () => {
  await withAll(async ({ discord, daemon, client }) => {
    // A payload whose shape this build does not know (here no author name): skipped, but the
    // owner hears which message and why, instead of a person's words vanishing.
    discord.dispatchRawMessage({
      id: "720",
      channel_id: "123",
      guild_id: "900",
      content: "can you see this?",
      timestamp: new Date().toISOString(),
      author: { id: "55" },
      mentions: [],
      attachments: [],
      type: 0,
    });
    discord.dispatchMessage({ channelId: "123", messageId: "721", content: "and this?" });
    await client.waitFor(
      (m) =>
        m.kind === "record" && m.type === "input.admitted" &&
        m.data.dedupe_key === "discord:123:721",
      30_000,
    );
    assert.deepEqual(admittedKeys(client), ["discord:123:721"]);
    assert.match(
      daemon.logs(),
      /discord: cannot read message 720 in channel 123: author\.username: .*; it was not admitted/,
    );
  });
});
