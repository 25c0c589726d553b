// Discord as a new user meets it, against the real daemon and the loopback fake Discord
// (tests/fakes/discord_server.ts): a direct message is answered by default and refused with
// `dms #false`; a gateway that refuses the intents (4014) or goes away makes /health
// `degraded` naming Discord, and the start-up block and /health show the gateway's state.

import assert from "node:assert/strict";
import type { LaneRecord } from "../../../runtime/core/mod.ts";
import { healthUntil, startTestDaemon, type TestDaemon } from "../../_helpers/daemon.ts";
import { connectLane, type LaneClient } from "../../_helpers/lane_client.ts";
import { type FakeDiscord, startFakeDiscord } from "../../fakes/discord_server.ts";
import { startFakeOpenAI } from "../../fakes/openai_server.ts";

const TOKEN = "fake-bot-token-9";
const WAIT_CELL = { toolCall: { code: "wait()" } };

async function startAll(extra = "", options: { identified?: boolean } = {}) {
  const model = startFakeOpenAI({ fallback: () => WAIT_CELL });
  const discord = startFakeDiscord();
  if (options.identified === false) discord.closeOnIdentify(4014);
  const daemon = await startTestDaemon({
    modelUrl: model.url,
    extraConfig:
      `discord {\n    token_env "DISCORD_TOKEN"\n    channels "123"\n    api_url "${discord.apiUrl}"\n    gateway_url "${discord.gatewayUrl}"\n${extra}}\n`,
    env: { DISCORD_TOKEN: TOKEN },
  });
  if (options.identified !== false) await discord.identified();
  const client = await connectLane({ port: daemon.port, token: daemon.token });
  return { model, discord, daemon, client };
}

async function stopAll(
  parts: { model: { close(): Promise<void> }; discord: FakeDiscord; daemon: TestDaemon },
  client: LaneClient,
) {
  await client.close();
  await parts.daemon.stop();
  await parts.discord.close();
  await parts.model.close();
}

/** Discord's reconnects take seconds: /health asked at most 300 times, 100 ms apart. */
const SLOW_POLL = { tries: 300, everyMs: 100 };

const admittedKeys = (client: LaneClient) =>
  client.messages.filter((m): m is LaneRecord => m.kind === "record" && m.type === "input.admitted")
    .map((r) => r.data.dedupe_key as string);

const discordOf = (health: Record<string, unknown>) =>
  health.discord as { state: string; since: number; last_error: string | null; fix: string | null };

Deno.test("a direct message in a channel not listed in `channels` is admitted and answered", async () => {
  const all = await startAll();
  const { model, discord, client } = all;
  try {
    model.enqueue({ toolCall: { code: "await discord.send('dm answer')\nwait()" } });
    discord.dispatchMessage({ channelId: "777", messageId: "901", content: "hi", guildId: null });
    await client.waitFor(
      (m) => m.kind === "record" && m.type === "outbox.confirmed",
      30_000,
    );
    assert.deepEqual(admittedKeys(client), ["discord:777:901"]);
    assert.deepEqual(discord.botMessages("777").map((m) => m.content), ["dm answer"]);
  } finally {
    await stopAll(all, client);
  }
});

Deno.test("with `dms #false` a direct message is not admitted", async () => {
  const all = await startAll("    dms #false\n");
  const { discord, client } = all;
  try {
    discord.dispatchMessage({ channelId: "777", messageId: "901", content: "hi", guildId: null });
    // A later message on the same socket: once it is admitted, the DM before it was handled.
    discord.dispatchMessage({ channelId: "123", messageId: "902", content: "later" });
    await client.waitFor(
      (m) => m.kind === "record" && m.type === "input.admitted",
      30_000,
    );
    assert.deepEqual(admittedKeys(client), ["discord:123:902"]);
  } finally {
    await stopAll(all, client);
  }
});

Deno.test("a gateway closing with 4014 makes /health degraded naming Discord and the intent fix; it is not retried", async () => {
  const all = await startAll("", { identified: false });
  const { discord, daemon, client } = all;
  try {
    const health = await healthUntil(daemon, (h) => discordOf(h)?.state === "refused", SLOW_POLL);
    assert.equal(health.status, "degraded");
    const fix =
      "enable Message Content Intent in the developer portal (Bot → Privileged Gateway Intents)";
    assert.equal(discordOf(health).fix, fix);
    assert.ok(
      (health.reasons as string[]).includes(
        `Discord: the gateway closed with 4014 (disallowed intents); not reconnecting: ${fix}, then restart klbr`,
      ),
      JSON.stringify(health.reasons),
    );
    // The start-up block names Discord's gateway; the close is logged once, with the URL.
    assert.match(daemon.logs(), new RegExp(`^ {2}discord {4}.*direct messages answered$`, "m"));
    const closes = daemon.logs().split("\n").filter((l) => l.includes("discord.gateway_closed"));
    assert.equal(closes.length, 1, daemon.logs());
    assert.ok(closes[0].includes(discord.gatewayUrl), closes[0]);
    assert.equal(discord.identifies.length, 1);
  } finally {
    await stopAll(all, client);
  }
});

Deno.test("the gateway going away makes /health degraded with 'Discord: down since …', and ok once it is back", async () => {
  const all = await startAll();
  const { discord, daemon, client } = all;
  try {
    const before = await healthUntil(daemon, (h) => discordOf(h)?.state === "connected", SLOW_POLL);
    assert.equal(before.status, "ok");
    assert.match(daemon.logs(), /^ {2}discord {4}.*direct messages answered$/m);
    discord.down();
    const down = await healthUntil(daemon, (h) => discordOf(h)?.state === "down", SLOW_POLL);
    assert.equal(down.status, "degraded");
    const since = new Date(discordOf(down).since).toISOString();
    const reason = (down.reasons as string[]).find((r) => r.startsWith("Discord: "));
    assert.ok(
      reason?.startsWith(`Discord: down since ${since} (cannot connect to ${discord.gatewayUrl}`),
      reason,
    );
    // The library's error is logged with the URL, never as `[object ErrorEvent]`.
    assert.ok(!daemon.logs().includes("[object ErrorEvent]"));
    discord.up();
    const back = await healthUntil(daemon, (h) => discordOf(h)?.state === "connected", SLOW_POLL);
    assert.equal(back.status, "ok");
  } finally {
    await stopAll(all, client);
  }
});
