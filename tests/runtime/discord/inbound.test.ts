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
  const { model, discord, daemon, client } = await startAll();
  try {
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
  } finally {
    await client.close();
    await daemon.stop();
    await discord.close();
    await model.close();
  }
});
