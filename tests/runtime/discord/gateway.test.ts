// The gateway on `@discordeno/gateway` against the loopback fake Discord, with a real store:
// identify, heartbeats, a resume that replays what a dropped connection missed, a refused
// resume that identifies anew, the resume state kept across a new client (a restart), a fatal
// close code, and a gateway that refuses connections without a tight reconnect loop.

import assert from "node:assert/strict";
import {
  DiscordGateway,
  type DiscordMessage,
  DiscordTransport,
  GATEWAY_INTENTS,
  type GatewaySession,
} from "../../../runtime/discord/mod.ts";
import { parseConfig, Secret } from "../../../runtime/config/mod.ts";
import { type Logger, SILENT_LOGGER } from "../../../runtime/core/mod.ts";
import { readGatewayState } from "../../../store/tables/discord_gateway.ts";
import { readEvents } from "../../../store/tables/events.ts";
import { admitInput } from "../../../store/tables/inputs.ts";
import { ensureSession } from "../../../store/tables/sessions.ts";
import { openStore, type Store } from "../../../store/store.ts";
import { type FakeDiscord, startFakeDiscord } from "../../fakes/discord_server.ts";

/** A logger that hands each line's message to `push`. */
function messagesTo(push: (message: string) => void): Logger {
  const line = (_event: string, message: string) => push(message);
  return { info: line, warn: line, error: line };
}

/**
 * A gateway client of `fake` (on `url`, default the fake's gateway) whose log lines, dispatches
 * and sessions tests can wait for.
 */
function gatewayOf(fake: FakeDiscord, store: Store, url = fake.gatewayUrl) {
  const lines: string[] = [];
  const dispatches: [string, { id?: string; content?: string }][] = [];
  const sessions: GatewaySession[] = [];
  const waiters: { check: () => boolean; resolve: () => void }[] = [];
  const settle = () => {
    for (const w of [...waiters]) {
      if (w.check()) waiters.splice(waiters.indexOf(w), 1) && w.resolve();
    }
  };
  const gateway = new DiscordGateway({
    url,
    token: new Secret("gw-token"),
    store,
    // The test reads each line's sentence; the logger adds the time, level and event.
    log: messagesTo((message) => {
      lines.push(message);
      settle();
    }),
    onDispatch: (event, data) => {
      dispatches.push([event, data as { id?: string }]);
      // After the gateway has saved the dispatch's sequence, which follows this handler.
      setTimeout(settle, 0);
    },
    onSession: (session) => {
      sessions.push(session);
      settle();
    },
  });
  const until = (check: () => boolean) =>
    new Promise<void>((resolve) => {
      waiters.push({ check, resolve });
      settle();
    });
  return { gateway, lines, dispatches, sessions, until };
}

async function withFake(
  fn: (fake: FakeDiscord, store: Store) => Promise<void>,
  heartbeatMs?: number,
) {
  const dir = await Deno.makeTempDir({ prefix: "klbr-gateway-" });
  const store = openStore(dir);
  const fake = startFakeDiscord({ heartbeatMs });
  try {
    await fn(fake, store);
  } finally {
    await fake.close();
    store.close();
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("`DiscordGateway` identifies after Hello, heartbeats on the interval and hands dispatches on", async () => {
  // The library's send bucket leaves no room for Identify below a ~1.02 s heartbeat interval.
  await withFake(async (fake, store) => {
    const { gateway, dispatches, sessions, until } = gatewayOf(fake, store);
    try {
      gateway.start();
      await fake.identified();
      assert.equal(fake.identifies[0].token, "Bot gw-token");
      assert.equal(fake.identifies[0].intents, GATEWAY_INTENTS);
      assert.equal(GATEWAY_INTENTS, 1 | 512 | 4096 | 32768);
      await until(() => sessions.length === 1);
      assert.deepEqual(sessions[0], { resumed: false, sessionId: "s1", selfId: "1" });
      await fake.heartbeated(2);
      fake.dispatchMessage({ channelId: "1", messageId: "2", content: "x" });
      await until(() => dispatches.length === 1);
      // READY is the client's own business; only MESSAGE_CREATE reached the caller.
      assert.equal(dispatches[0][0], "MESSAGE_CREATE");
      assert.equal(dispatches[0][1].content, "x");
      // Saved after it was handled: a restart resumes from here.
      await until(() => readGatewayState(store)?.seq === 2);
      assert.equal(readGatewayState(store)?.sessionId, "s1");
      assert.equal(readGatewayState(store)?.resumeUrl, fake.gatewayUrl);
    } finally {
      await gateway.stop();
    }
  }, 1100);
});

Deno.test("`DiscordGateway` resumes after the connection drops and receives what it missed, once", async () => {
  await withFake(async (fake, store) => {
    const { gateway, dispatches, sessions, until } = gatewayOf(fake, store);
    try {
      gateway.start();
      await fake.identified(1);
      fake.dispatchMessage({ channelId: "1", messageId: "10", content: "before" });
      await until(() => dispatches.length === 1);
      fake.down();
      // Sent while the connection is gone: in the session, not yet delivered.
      fake.dispatchMessage({ channelId: "1", messageId: "11", content: "during" });
      fake.dispatchMessage({ channelId: "1", messageId: "12", content: "during 2" });
      fake.up();
      await fake.resumed(1);
      await until(() => dispatches.length === 3);
      assert.deepEqual(dispatches.map(([, d]) => d.id), ["10", "11", "12"]);
      assert.equal(fake.identifies.length, 1);
      assert.equal(fake.resumes[0].session_id, "s1");
      assert.equal(fake.resumes[0].seq, 2);
      await until(() => sessions.length === 2);
      assert.equal(sessions[1].resumed, true);
    } finally {
      await gateway.stop();
    }
  });
});

Deno.test("`DiscordGateway` resumes a saved session in a new client, and identifies anew when Discord refuses", async () => {
  await withFake(async (fake, store) => {
    const first = gatewayOf(fake, store);
    first.gateway.start();
    await fake.identified(1);
    fake.dispatchMessage({ channelId: "1", messageId: "20", content: "a" });
    await first.until(() => readGatewayState(store)?.seq === 2);
    await first.gateway.stop();
    // A "restart": a new client reads the saved state and resumes where the old one stopped.
    fake.dispatchMessage({ channelId: "1", messageId: "21", content: "while away" });
    const second = gatewayOf(fake, store);
    try {
      second.gateway.start();
      await fake.resumed(1);
      await second.until(() => second.dispatches.length === 1);
      assert.equal(second.dispatches[0][1].id, "21");
      assert.deepEqual(fake.resumes[0], { token: "Bot gw-token", session_id: "s1", seq: 2 });
      // Discord refuses the next resume: op 9, then a new session the caller is told about.
      fake.invalidateSessions();
      fake.drop();
      await fake.identified(2);
      await second.until(() => second.sessions.some((s) => !s.resumed && s.sessionId === "s2"));
      assert.equal(readGatewayState(store)?.sessionId, "s2");
    } finally {
      await second.gateway.stop();
    }
  });
});

Deno.test("`DiscordGateway` stops reconnecting after an authentication failure (4004)", async () => {
  await withFake(async (fake, store) => {
    const { gateway, lines, until } = gatewayOf(fake, store);
    try {
      gateway.start();
      await fake.identified(1);
      fake.drop(4004);
      await until(() => lines.some((l) => l.includes("not reconnecting")));
      assert.ok(
        lines.includes(
          `discord gateway ${fake.gatewayUrl} closed with 4004 (authentication failed); not reconnecting: the token was refused: reset it in the developer portal (Bot → Reset Token) and set the token's variable`,
        ),
        lines.join("\n"),
      );
      assert.equal(gateway.status().state, "refused");
      assert.equal(gateway.status().closeCode, 4004);
      assert.equal(fake.identifies.length, 1);
      assert.equal(fake.resumes.length, 0);
      assert.ok(!lines.join("\n").includes("gw-token"));
    } finally {
      await gateway.stop();
    }
  });
});

Deno.test("`DiscordGateway` ends a connection whose heartbeats go unacknowledged (zombied) and resumes, receiving what it missed", async () => {
  // Discord: no heartbeat ACK between two heartbeats means a failed or "zombied" connection;
  // terminate it and resume (https://discord.com/developers/docs/events/gateway#sending-heartbeats).
  // On a dead network the close handshake never completes, so no close event ever comes.
  await withFake(async (fake, store) => {
    const { gateway, dispatches, until } = gatewayOf(fake, store, fake.relayedGatewayUrl);
    let bound: ReturnType<typeof setTimeout> | undefined;
    try {
      gateway.start();
      await fake.identified(1);
      fake.dispatchMessage({ channelId: "1", messageId: "30", content: "before" });
      await until(() => dispatches.length === 1);
      fake.freeze();
      fake.dispatchMessage({ channelId: "1", messageId: "31", content: "into the dead network" });
      // Two heartbeat intervals find the zombie; the bound only keeps a failure from hanging.
      const gaveUp = new Promise<"stuck">((resolve) => {
        bound = setTimeout(() => resolve("stuck"), 15_000);
      });
      const outcome = await Promise.race([fake.resumed(1).then(() => "resumed"), gaveUp]);
      assert.equal(
        outcome,
        "resumed",
        `no resume 15 s after the network froze; gateway: ${JSON.stringify(gateway.status())}`,
      );
      await until(() => dispatches.length === 2);
      assert.deepEqual(dispatches.map(([, d]) => d.id), ["30", "31"]);
      // Resumed on the resume URL READY named, keeping the session.
      assert.equal(fake.identifies.length, 1);
      assert.deepEqual(fake.resumes[0], { token: "Bot gw-token", session_id: "s1", seq: 2 });
      assert.equal(gateway.status().state, "connected");
    } finally {
      clearTimeout(bound);
      await gateway.stop();
    }
  }, 1100);
});

Deno.test("`DiscordGateway` backs off while the gateway refuses connections, then resumes", async () => {
  await withFake(async (fake, store) => {
    const { gateway, lines, until } = gatewayOf(fake, store);
    try {
      gateway.start();
      await fake.identified(1);
      fake.down();
      // Three refused attempts, each announced with its (growing) wait.
      await until(() => lines.filter((l) => l.includes("reconnecting in")).length >= 3);
      const waits = lines.filter((l) => l.includes("reconnecting in"))
        .map((l) => Number(l.match(/reconnecting in (\d+) ms/)?.[1]));
      assert.deepEqual(waits.slice(0, 3), [500, 1000, 2000]);
      fake.up();
      await fake.resumed(1);
      // It kept the session: a resume, not a new identify.
      assert.equal(fake.identifies.length, 1);
    } finally {
      await gateway.stop();
    }
  });
});

Deno.test("`DiscordGateway` identifies at the configured URL when the resume URL does not answer", async () => {
  // Discord: only a resume uses `resume_gateway_url`; a new session connects to the gateway URL.
  await withFake(async (fake, store) => {
    const closed = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    fake.nameResumeUrl(`ws://127.0.0.1:${closed.addr.port}/gateway`);
    closed.close();
    const { gateway, sessions, until } = gatewayOf(fake, store);
    let bound: ReturnType<typeof setTimeout> | undefined;
    try {
      gateway.start();
      await fake.identified(1);
      fake.drop();
      const gaveUp = new Promise<"stuck">((resolve) => {
        bound = setTimeout(() => resolve("stuck"), 15_000);
      });
      const outcome = await Promise.race([fake.identified(2).then(() => "identified"), gaveUp]);
      assert.equal(
        outcome,
        "identified",
        `not back 15 s after the resume host went silent; gateway: ${
          JSON.stringify(gateway.status())
        }`,
      );
      assert.ok(fake.identifyUrls[1].startsWith(fake.gatewayUrl.replace("ws:", "http:")));
      await until(() => sessions.some((s) => !s.resumed && s.sessionId === "s2"));
      assert.equal(gateway.status().state, "connected");
    } finally {
      clearTimeout(bound);
      await gateway.stop();
    }
  });
});

Deno.test("`DiscordGateway` identifies anew at the configured URL, not the resume URL, after a refused resume", async () => {
  await withFake(async (fake, store) => {
    fake.nameResumeUrl(fake.relayedGatewayUrl);
    const { gateway, sessions, until } = gatewayOf(fake, store);
    try {
      gateway.start();
      await fake.identified(1);
      fake.invalidateSessions();
      fake.drop();
      await fake.identified(2);
      // The resume went to the resume URL (the relay) and got op 9; the identify did not.
      assert.equal(fake.resumes.length, 1);
      const relay = fake.relayedGatewayUrl.replace("ws:", "http:");
      assert.deepEqual(
        fake.identifyUrls.map((url) => url.startsWith(relay) ? "resume URL" : url.split("?")[0]),
        [fake.gatewayUrl, fake.gatewayUrl].map((url) => url.replace("ws:", "http:")),
      );
      await until(() => sessions.some((s) => !s.resumed && s.sessionId === "s2"));
    } finally {
      await gateway.stop();
    }
  });
});

Deno.test("a Discord message refused while admission is closed (a draining daemon) is admitted after the restart resumes", async () => {
  await withFake(async (fake, store) => {
    const config = {
      ...parseConfig(`discord {\n token_env "T"\n channels "123"\n}`, { file: "test.kdl" })
        .config.discord!,
      api_url: fake.apiUrl,
      gateway_url: fake.gatewayUrl,
    };
    const seen: { refused: string[]; admitted: string[] } = { refused: [], admitted: [] };
    const waiters: { check: () => boolean; resolve: () => void }[] = [];
    const settle = () => {
      for (const w of [...waiters]) {
        if (w.check()) waiters.splice(waiters.indexOf(w), 1) && w.resolve();
      }
    };
    const until = (check: () => boolean) =>
      new Promise<void>((resolve) => {
        waiters.push({ check, resolve });
        settle();
      });
    const transport = () =>
      new DiscordTransport({ config, token: new Secret("gw-token"), store, log: SILENT_LOGGER });
    // The daemon drains for a restart: admission is closed, the gateway still delivers.
    const first = transport();
    first.start({
      admitDiscord: (message: DiscordMessage) => {
        seen.refused.push(message.messageId);
        queueMicrotask(settle);
        return { error: "cannot admit input: the daemon is shutting down" };
      },
    });
    await fake.identified(1);
    const during = fake.dispatchMessage({ channelId: "123", content: "sent during the drain" });
    await until(() => seen.refused.length === 1);
    await first.stop();
    // The new daemon resumes the saved session: Discord replays what it did not admit.
    const second = transport();
    try {
      second.start({
        admitDiscord: (message: DiscordMessage) => {
          seen.admitted.push(message.messageId);
          queueMicrotask(settle);
          return { inputId: `in_${message.messageId}` };
        },
      });
      await fake.resumed(1);
      const later = fake.dispatchMessage({ channelId: "123", content: "after the restart" });
      await until(() => seen.admitted.includes(later));
      assert.equal(fake.identifies.length, 1);
      assert.deepEqual(seen.admitted, [during, later]);
    } finally {
      await second.stop();
    }
  });
});

Deno.test("a MESSAGE_UPDATE that only adds a link's embed (edited_timestamp null) is not recorded as an edit; a real edit is", async () => {
  await withFake(async (fake, store) => {
    ensureSession(store);
    const config = {
      ...parseConfig(`discord {\n token_env "T"\n channels "123"\n}`, { file: "test.kdl" })
        .config.discord!,
      api_url: fake.apiUrl,
      gateway_url: fake.gatewayUrl,
    };
    const edits = () =>
      readEvents(store, "default", { since: 0, limit: 100 }).filter((e) =>
        e.kind === "input.edited"
      );
    const waiters: { check: () => boolean; resolve: () => void }[] = [];
    store.onCommit(() => {
      for (const w of [...waiters]) {
        if (w.check()) waiters.splice(waiters.indexOf(w), 1) && w.resolve();
      }
    });
    const until = (check: () => boolean) =>
      new Promise<void>((resolve) => check() ? resolve() : waiters.push({ check, resolve }));
    const transport = new DiscordTransport({
      config,
      token: new Secret("gw-token"),
      store,
      log: SILENT_LOGGER,
    });
    try {
      transport.start({
        admitDiscord: (m: DiscordMessage) => {
          const admitted = admitInput(store, {
            session: "default",
            sourceKind: "discord",
            dedupeKey: `discord:${m.channelId}:${m.messageId}`,
            conversationId: `discord:${m.channelId}`,
            author: `discord:${m.authorId}:${m.username}`,
            body: m.body,
            receivedAt: m.receivedAt,
          });
          return { inputId: admitted.inputId };
        },
      });
      await fake.identified(1);
      const id = fake.dispatchMessage({ channelId: "123", content: "see https://example.com/" });
      fake.embedMessage("123", id);
      fake.editMessage("123", id, "see https://example.org/");
      await until(() => edits().some((e) => (e.body as { text?: string }).text?.endsWith(".org/")));
    } finally {
      await transport.stop();
    }
    assert.deepEqual(edits().map((e) => (e.body as { text: string }).text), [
      "see https://example.org/",
    ]);
  });
});
