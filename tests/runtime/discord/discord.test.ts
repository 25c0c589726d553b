// Discord behind the admission path, with an honest outbox: the RPC handlers against a real
// store, then end to end with the real daemon, the real workbench, the fake model and a
// loopback fake of Discord's gateway and REST API.

import assert from "node:assert/strict";
import { DiscordGateway, discordHandlers, GATEWAY_INTENTS } from "../../../runtime/discord/mod.ts";
import { Secret } from "../../../runtime/config/mod.ts";
import { KlbrError, type LaneRecord, type Logger } from "../../../runtime/core/mod.ts";
import { getOutbox } from "../../../store/outbox.ts";
import { ensureSession } from "../../../store/sessions.ts";
import { openStore, type Store } from "../../../store/store.ts";
import { startTestDaemon } from "../../_helpers/daemon.ts";
import { connectLane, type LaneClient } from "../../_helpers/lane_client.ts";
import { type FakeDiscord, startFakeDiscord } from "../../fakes/discord_server.ts";
import { startFakeOpenAI } from "../../fakes/openai_server.ts";

// ---- the discord.* RPC handlers ----

async function withHandlers(
  discord: { channels: string[] } | undefined,
  fn: (
    call: (method: string, params: Record<string, unknown>) => Promise<unknown>,
    store: Store,
    wakes: () => number,
  ) => Promise<void>,
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "klbr-discord-" });
  const store = openStore(dir);
  let wakes = 0;
  try {
    ensureSession(store);
    const handlers = discordHandlers({
      store,
      session: "default",
      discord: discord === undefined
        ? undefined
        : { channels: discord.channels, wake: () => wakes++ },
      frame: () => null,
      notify: () => {},
    });
    const ctx = { signal: new AbortController().signal, method: "", parent: "e1", cell: null };
    await fn((method, params) => handlers[method](params, { ...ctx, method }), store, () => wakes);
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
      state: "pending",
      attempts: 0,
      remote_id: null,
      error: null,
      channel_id: "123",
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
      'cannot send to discord: channel is invalid (got "general")',
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

// ---- the gateway client ----

/** A logger that hands each line's message to `push`. */
function messagesTo(push: (message: string) => void): Logger {
  const line = (_event: string, message: string) => push(message);
  return { info: line, warn: line, error: line };
}

/** A gateway client of `fake` whose log lines and dispatches tests can wait for. */
function gatewayOf(fake: FakeDiscord) {
  const lines: string[] = [];
  const dispatches: [string, unknown][] = [];
  const waiters: { check: () => boolean; resolve: () => void }[] = [];
  const settle = () => {
    for (const w of [...waiters]) {
      if (w.check()) waiters.splice(waiters.indexOf(w), 1) && w.resolve();
    }
  };
  const gateway = new DiscordGateway({
    url: fake.gatewayUrl,
    token: new Secret("gw-token"),
    // The test reads each line's sentence; the logger adds the time, level and event.
    log: messagesTo((message) => {
      lines.push(message);
      settle();
    }),
    onDispatch: (event, data) => {
      dispatches.push([event, data]);
      settle();
    },
  });
  const until = (check: () => boolean) =>
    new Promise<void>((resolve) => {
      waiters.push({ check, resolve });
      settle();
    });
  return { gateway, lines, dispatches, until };
}

Deno.test("`DiscordGateway` identifies after Hello, heartbeats on the interval and hands dispatches on", async () => {
  const fake = startFakeDiscord({ heartbeatMs: 100 });
  const { gateway, dispatches, until } = gatewayOf(fake);
  try {
    gateway.start();
    await fake.identified();
    assert.equal(fake.identifies[0].token, "gw-token");
    assert.equal(fake.identifies[0].intents, GATEWAY_INTENTS);
    await fake.heartbeated(2);
    fake.dispatchMessage({ channelId: "1", messageId: "2", content: "x" });
    await until(() => dispatches.length === 1);
    // READY is the client's own business; only MESSAGE_CREATE reached the caller.
    assert.equal(dispatches[0][0], "MESSAGE_CREATE");
    assert.equal((dispatches[0][1] as { content: string }).content, "x");
  } finally {
    await gateway.stop();
    await fake.close();
  }
});

Deno.test("`DiscordGateway` identifies again after the connection drops", async () => {
  const fake = startFakeDiscord();
  const { gateway } = gatewayOf(fake);
  try {
    gateway.start();
    await fake.identified(1);
    fake.drop();
    await fake.identified(2);
    assert.equal(fake.identifies.length, 2);
  } finally {
    await gateway.stop();
    await fake.close();
  }
});

Deno.test("`DiscordGateway` stops reconnecting after an authentication failure (4004)", async () => {
  const fake = startFakeDiscord();
  const { gateway, lines, until } = gatewayOf(fake);
  try {
    gateway.start();
    await fake.identified(1);
    fake.drop(4004);
    await until(() => lines.some((l) => l.includes("not reconnecting")));
    assert.ok(lines.includes("discord gateway closed with 4004; not reconnecting"));
    assert.equal(fake.identifies.length, 1);
    assert.ok(!lines.join("\n").includes("gw-token"));
  } finally {
    await gateway.stop();
    await fake.close();
  }
});

// ---- end to end ----

const TOKEN = "fake-bot-token-7";
const WAIT_CELL = { toolCall: { code: "wait()" } };

const discordConfig = (fake: FakeDiscord, timeoutMs: number) =>
  `discord {\n    token_env "DISCORD_TOKEN"\n    channels "123" "456"\n    api_url "${fake.apiUrl}"\n    gateway_url "${fake.gatewayUrl}"\n    send_timeout_ms ${timeoutMs}\n}\n`;

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

async function startAll(timeoutMs: number) {
  const model = startFakeOpenAI({ fallback: () => WAIT_CELL });
  const discord = startFakeDiscord();
  const daemon = await startTestDaemon({
    modelUrl: model.url,
    extraConfig: discordConfig(discord, timeoutMs),
    env: { DISCORD_TOKEN: TOKEN },
  });
  await discord.identified();
  const client = await connectLane({ port: daemon.port, token: daemon.token });
  return { model, discord, daemon, client };
}

Deno.test("a Discord message delivered twice is admitted once; discord.send posts once and is confirmed", async () => {
  const { model, discord, daemon, client } = await startAll(10_000);
  try {
    // Identify carries the token and the message intents.
    assert.equal(discord.identifies[0].token, TOKEN);
    assert.equal(discord.identifies[0].intents, GATEWAY_INTENTS);
    assert.equal(GATEWAY_INTENTS, 512 | 4096 | 32768);
    model.enqueue({
      toolCall: {
        code: "r = await discord.send('hi')\nprint(r['state'])\nawait local.send('noted')\nwait()",
      },
    });
    discord.dispatchMessage({ channelId: "123", messageId: "555", content: "hello bot" });
    discord.dispatchMessage({ channelId: "123", messageId: "555", content: "hello bot" });
    // Ignored: a bot author, and a channel that is not configured.
    discord.dispatchMessage({ channelId: "123", messageId: "557", content: "beep", bot: true });
    discord.dispatchMessage({ channelId: "789", messageId: "558", content: "elsewhere" });
    // A later message on the same socket: once it is admitted, the ones before were handled.
    discord.dispatchMessage({ channelId: "456", messageId: "556", content: "second" });
    await waitRecord(client, "input.admitted", (r) => r.data.dedupe_key === "discord:456:556");

    const admitted = records(client, "input.admitted");
    assert.deepEqual(admitted.map((r) => r.data.dedupe_key), [
      "discord:123:555",
      "discord:456:556",
    ]);
    const first = admitted[0].data;
    assert.equal(first.source_kind, "discord");
    assert.equal(first.conversation_id, "discord:123");
    assert.equal(first.author, "discord:42:ann");
    assert.equal(first.body, "hello bot");
    assert.equal(first.received_at, Date.parse("2026-01-02T03:04:05.678Z"));

    const confirmed = await waitRecord(client, "outbox.confirmed");
    const id = confirmed.data.outbox_id as string;
    assert.deepEqual(statesOf(client, id), ["pending", "attempting", "confirmed"]);
    assert.equal(confirmed.data.remote_id, "1000000");
    const pending = records(client, "outbox.pending")[0].data;
    assert.equal(pending.conversation, "discord:123");
    assert.ok(typeof pending.cell_id === "string" && typeof pending.frame_id === "string");

    assert.equal(discord.posts.length, 1);
    assert.equal(discord.posts[0].path, "/channels/123/messages");
    assert.equal(discord.posts[0].authorization, `Bot ${TOKEN}`);
    assert.deepEqual(discord.posts[0].body, { content: "hi" });
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

Deno.test("a 4xx ends failed, a 5xx and a hanging request end unknown, and nothing is retried", async () => {
  const { model, discord, daemon, client } = await startAll(1_000);
  try {
    discord.script({ status: 403 }, { status: 502 }, "hang", { status: 200, id: "777" });
    model.enqueue({
      toolCall: {
        code: [
          "ids = [(await discord.send(t))['outbox_id'] for t in ['one', 'two', 'three']]",
          "ids.append((await discord.send('four', channel='456'))['outbox_id'])",
          "wait()",
        ].join("\n"),
      },
    });
    discord.dispatchMessage({ channelId: "123", messageId: "600", content: "go" });
    // The fourth send is taken only after the third has ended: rows go one at a time, in order.
    const done = await waitRecord(client, "outbox.confirmed");
    const ids = records(client, "outbox.pending").map((r) => r.data.outbox_id as string);
    assert.equal(ids.length, 4);
    assert.equal(done.data.outbox_id, ids[3]);
    assert.deepEqual(statesOf(client, ids[0]), ["pending", "attempting", "failed"]);
    assert.deepEqual(statesOf(client, ids[1]), ["pending", "attempting", "unknown"]);
    assert.deepEqual(statesOf(client, ids[2]), ["pending", "attempting", "unknown"]);
    assert.deepEqual(statesOf(client, ids[3]), ["pending", "attempting", "confirmed"]);
    const ended = (type: string, id: string) =>
      records(client, type).find((r) => r.data.outbox_id === id)?.data;
    assert.match(ended("outbox.failed", ids[0])?.error as string, /^HTTP 403: /);
    assert.match(
      ended("outbox.unknown", ids[1])?.error as string,
      /^HTTP 502; it may have been posted/,
    );
    assert.equal(
      ended("outbox.unknown", ids[2])?.error,
      "no answer within 1000 ms; it may have been posted",
    );
    // Exactly one POST per row: the failed and unknown ones were not sent again.
    assert.deepEqual(discord.posts.map((p) => [p.path, p.body.content]), [
      ["/channels/123/messages", "one"],
      ["/channels/123/messages", "two"],
      ["/channels/123/messages", "three"],
      ["/channels/456/messages", "four"],
    ]);
  } finally {
    await client.close();
    await daemon.stop();
    await discord.close();
    await model.close();
  }
});

Deno.test("SIGKILL while a send is attempting: after restart the row is unknown and not sent again", async () => {
  const { model, discord, daemon, client } = await startAll(60_000);
  let restarted: Awaited<ReturnType<typeof daemon.restart>> | undefined;
  let after: LaneClient | undefined;
  try {
    discord.script("hang");
    model.enqueue({ toolCall: { code: "await discord.send('in flight')\nwait()" } });
    discord.dispatchMessage({ channelId: "123", messageId: "700", content: "go" });
    const attempting = await waitRecord(client, "outbox.attempting");
    const id = attempting.data.outbox_id as string;
    await discord.posted(1);
    await client.close();
    await daemon.kill();

    restarted = await daemon.restart();
    after = await connectLane({ port: restarted.port, token: restarted.token });
    const unknown = await waitRecord(after, "outbox.unknown", (r) => r.data.outbox_id === id);
    assert.match(unknown.data.error as string, /restarted during the request/);
    assert.deepEqual(statesOf(after, id), ["pending", "attempting", "unknown"]);
    // The new daemon is connected and its sender has run: still exactly one POST.
    await discord.identified(2);
    await after.request({ kind: "ping" });
    assert.equal(discord.posts.length, 1);
  } finally {
    await after?.close();
    await restarted?.stop();
    await discord.close();
    await model.close();
  }
});
