// The outbox sender against the loopback fake Discord and a real store: every request carries
// the row's nonce with enforce_nonce; a 429 retries the same row after retry_after and records
// the attempt; a burst past the bucket posts every row once and in order; only other 4xx end
// failed; an unknown row is reconciled (re-post inside the nonce window, history outside it,
// the gateway's echo) and a confirmed row is never posted again.

import assert from "node:assert/strict";
import { DiscordRest, OutboxSender, routeKey } from "../../../runtime/discord/mod.ts";
import { Secret } from "../../../runtime/config/mod.ts";
import { type DiscordConfig, parseConfig } from "../../../runtime/config/mod.ts";
import { KlbrError, SILENT_LOGGER } from "../../../runtime/core/mod.ts";
import { readEvents } from "../../../store/tables/events.ts";
import {
  enqueueOutbox,
  getOutbox,
  moveOutbox,
  type OutboxRecord,
} from "../../../store/tables/outbox.ts";
import { ensureSession } from "../../../store/tables/sessions.ts";
import { openStore, type Store } from "../../../store/store.ts";
import {
  type FakeDiscord,
  type FakeDiscordOptions,
  startFakeDiscord,
} from "../../fakes/discord_server.ts";

interface Rig {
  fake: FakeDiscord;
  store: Store;
  sender: OutboxSender;
  send: (text: string, channel?: string) => OutboxRecord;
  /** Resolves when row `id` is in `state` (checked after every move the sender makes). */
  until: (check: () => boolean) => Promise<void>;
}

async function withSender(
  fn: (rig: Rig) => Promise<void>,
  options: {
    fake?: FakeDiscordOptions;
    config?: Partial<DiscordConfig>;
    /** The store the sender is given, made from the rig's (the rig's own reads stay real). */
    senderStore?: (store: Store) => Store;
  } = {},
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "klbr-sender-" });
  const store = openStore(dir);
  ensureSession(store);
  const fake = startFakeDiscord(options.fake);
  const stop = new AbortController();
  const config = {
    ...parseConfig(`discord {\n token_env "T"\n channels "123" "456"\n}`, { file: "test.kdl" })
      .config.discord!,
    api_url: fake.apiUrl,
    gateway_url: fake.gatewayUrl,
    send_timeout_ms: 1000,
    ...options.config,
  };
  const waiters: { check: () => boolean; resolve: () => void }[] = [];
  const settle = () => {
    for (const w of [...waiters]) {
      if (w.check()) waiters.splice(waiters.indexOf(w), 1) && w.resolve();
    }
  };
  const rest = new DiscordRest({
    apiUrl: fake.apiUrl,
    token: new Secret("tok"),
    timeoutMs: config.send_timeout_ms,
    signal: stop.signal,
  });
  // Each commit (an outbox row moved) may be the state a waiter waits for.
  store.onCommit(settle);
  const sender = new OutboxSender({
    config,
    store: options.senderStore?.(store) ?? store,
    rest,
    log: SILENT_LOGGER,
    signal: stop.signal,
  });
  const send = (text: string, channel = "123") => {
    const row = enqueueOutbox(store, {
      session: "default",
      conversation: `discord:${channel}`,
      destination: { channel_id: channel },
      body: text,
    });
    sender.wake();
    return row;
  };
  const until = (check: () => boolean) =>
    new Promise<void>((resolve) => {
      waiters.push({ check, resolve });
      settle();
    });
  try {
    await fn({ fake, store, sender, send, until });
  } finally {
    stop.abort();
    await sender.idle();
    await fake.close();
    store.close();
    await Deno.remove(dir, { recursive: true });
  }
}

const stateOf = (store: Store, id: string) => getOutbox(store, id)?.state;

Deno.test("`routeKey()` keeps the major id and folds the others", () => {
  assert.equal(routeKey("POST", "/channels/123/messages"), "POST /channels/123/messages");
  assert.equal(
    routeKey("PUT", "/channels/123/messages/456/reactions/%F0%9F%91%8D/@me"),
    "PUT /channels/123/messages/:id/reactions/:emoji/@me",
  );
  assert.equal(routeKey("GET", "/users/@me"), "GET /users/@me");
});

Deno.test("a send carries its nonce with enforce_nonce and ends confirmed with the message id", async () => {
  await withSender(async ({ fake, store, send, until }) => {
    const row = send("hello");
    await until(() => stateOf(store, row.id) === "confirmed");
    const [post] = fake.messagePosts();
    assert.deepEqual(post.body, { content: "hello", nonce: row.nonce, enforce_nonce: true });
    assert.equal(post.authorization, "Bot tok");
    assert.equal(getOutbox(store, row.id)?.remoteId, fake.botMessages("123")[0].id);
  });
});

Deno.test("a 429 retries the same row after retry_after, recorded as an attempt; other 4xx end failed", async () => {
  await withSender(async ({ fake, store, send, until }) => {
    fake.script({ status: 429, retryAfter: 0.2 }, { status: 200 }, { status: 403 });
    const a = send("limited");
    const b = send("refused");
    await until(() => stateOf(store, b.id) === "failed");
    const rowA = getOutbox(store, a.id)!;
    assert.equal(rowA.state, "confirmed");
    assert.equal(rowA.attempts, 2);
    assert.equal(rowA.tries[0].how, "rate_limit");
    assert.match(rowA.tries[0].outcome, /^HTTP 429: not processed; retry after 200 ms$/);
    // The retry waited out retry_after: it left no sooner than 200 ms after the 429's try.
    const events = readEvents(store, "default", { since: 0, limit: 100 })
      .filter((e) => (e.body as { outbox_id?: string }).outbox_id === a.id).map((e) => e.kind);
    assert.deepEqual(events, [
      "outbox.pending",
      "outbox.attempting",
      "outbox.rate_limited",
      "outbox.attempting",
      "outbox.confirmed",
    ]);
    assert.match(getOutbox(store, b.id)?.error ?? "", /^HTTP 403: /);
    assert.equal(fake.botMessages("123").length, 1);
    assert.equal(fake.messagePosts().length, 3);
  });
});

Deno.test("a burst past the rate limit posts every row once and in order, per channel", async () => {
  await withSender(async ({ fake, store, send, until }) => {
    const texts = Array.from({ length: 12 }, (_, i) => `m${i}`);
    const rows = texts.map((t, i) => send(t, i % 3 === 2 ? "456" : "123"));
    await until(() => rows.every((r) => stateOf(store, r.id) === "confirmed"));
    assert.deepEqual(
      fake.botMessages("123").map((m) => m.content),
      texts.filter((_, i) => i % 3 !== 2),
    );
    assert.deepEqual(
      fake.botMessages("456").map((m) => m.content),
      texts.filter((_, i) => i % 3 === 2),
    );
    // The buckets were honoured from their headers: Discord never had to refuse one.
    assert.equal(fake.rateLimited, 0);
    assert.equal(fake.messagePosts().length, 12);
  }, { fake: { rateLimit: { limit: 3, windowMs: 300 } } });
});

Deno.test("`DiscordRest` holds a spent bucket per channel: Discord's bucket hash is the same in every channel, its limit is not", async () => {
  const fake = startFakeDiscord({ rateLimit: { limit: 2, windowMs: 30_000 } });
  const stop = new AbortController();
  try {
    const rest = new DiscordRest({
      apiUrl: fake.apiUrl,
      token: new Secret("tok"),
      timeoutMs: 1000,
      signal: stop.signal,
    });
    for (const channel of ["456", "123", "123"]) {
      const result = await rest.request("POST", `/channels/${channel}/messages`, {
        body: { content: "x" },
      });
      assert.equal(result.kind, "ok");
    }
    // Channel 123's bucket is spent for 30 s; channel 456 has one request left in its own.
    assert.ok(rest.waitFor("POST /channels/123/messages") > 20_000);
    assert.equal(rest.waitFor("POST /channels/456/messages"), 0);
    const result = await rest.request("POST", "/channels/456/messages", { body: { content: "y" } });
    assert.equal(result.kind, "ok");
    assert.ok(rest.waitFor("POST /channels/456/messages") > 20_000);
  } finally {
    stop.abort();
    await fake.close();
  }
});

Deno.test("a 429 from a bucket the sender did not know yet is waited out and the row posted once", async () => {
  await withSender(async ({ fake, store, send, until }) => {
    // One request in the window: the second row meets the bucket before its headers are known
    // to be spent only if they are ignored; a global 429 pauses every request.
    fake.script({ status: 429, retryAfter: 0.1, global: true });
    const rows = ["a", "b", "c"].map((t) => send(t));
    await until(() => rows.every((r) => stateOf(store, r.id) === "confirmed"));
    assert.deepEqual(fake.botMessages("123").map((m) => m.content), ["a", "b", "c"]);
    assert.equal(fake.rateLimited, 1);
    assert.equal(getOutbox(store, rows[0].id)?.attempts, 2);
  });
});

Deno.test("a 5xx and a lost response end unknown, and a re-post with the same nonce confirms each, posted once", async () => {
  await withSender(async ({ fake, store, send, until }) => {
    // 500 after creating the message; then a response that never comes; re-posts answer 200.
    fake.script({ status: 500, created: true }, "hang");
    const a = send("five hundred");
    const b = send("hanging", "456");
    await until(() => stateOf(store, a.id) === "confirmed" && stateOf(store, b.id) === "confirmed");
    for (const id of [a.id, b.id]) {
      const row = getOutbox(store, id)!;
      assert.equal(row.state, "confirmed");
      assert.equal(row.tries.length, 1);
      assert.equal(row.tries[0].how, "repost");
      assert.match(row.tries[0].outcome, /^a re-post with the same nonce returned message \d+$/);
      assert.equal(row.attempts, 2);
    }
    // Each message exists exactly once, and the ids are the originals.
    const posted = [...fake.botMessages("123"), ...fake.botMessages("456")];
    assert.deepEqual(posted.map((m) => m.content), ["five hundred", "hanging"]);
    assert.equal(getOutbox(store, a.id)?.remoteId, posted[0].id);
    assert.equal(getOutbox(store, b.id)?.remoteId, posted[1].id);
    assert.equal(fake.messagePosts().length, 4);
  });
});

Deno.test("outside the nonce window an unknown row is looked for in history: found confirms it, absent leaves it", async () => {
  await withSender(async ({ fake, store, send, until, sender }) => {
    fake.script({ status: 502, created: true }, { status: 502 });
    const posted = send("was posted");
    const lost = send("never posted");
    await until(() => {
      const [p, l] = [getOutbox(store, posted.id)!, getOutbox(store, lost.id)!];
      return p.state === "confirmed" && l.state === "unknown" && l.notBefore === null;
    });
    const found = getOutbox(store, posted.id)!;
    assert.equal(found.tries[0].how, "history");
    assert.match(found.tries[0].outcome, /^found message \d+ with this nonce among the last 1$/);
    assert.equal(found.remoteId, fake.botMessages("123")[0].id);
    const left = getOutbox(store, lost.id)!;
    assert.equal(left.tries.length, 1);
    assert.match(
      left.tries[0].outcome,
      /^no message with this nonce among the last 1; outside the nonce window/,
    );
    // Never re-posted: one POST each.
    assert.equal(fake.messagePosts().length, 2);
    assert.equal(fake.botMessages("123").length, 1);
    // A later wake does not touch the row left to the operator.
    sender.wake();
    await sender.idle();
    assert.equal(getOutbox(store, lost.id)?.tries.length, 1);
  }, { config: { nonce_window_ms: 1 } });
});

Deno.test("the bot's own message seen with a row's nonce confirms an unknown row; a confirmed row is never posted again", async () => {
  await withSender(async ({ fake, store, sender }) => {
    const row = enqueueOutbox(store, {
      session: "default",
      conversation: "discord:123",
      destination: { channel_id: "123" },
      body: "echoed",
    });
    moveOutbox(store, row.id, "attempting");
    moveOutbox(store, row.id, "unknown", {
      error: "the daemon restarted",
      notBefore: Date.now() + 60_000,
    });
    sender.onOwnMessage(row.nonce, "777");
    const confirmed = getOutbox(store, row.id)!;
    assert.equal(confirmed.state, "confirmed");
    assert.equal(confirmed.remoteId, "777");
    assert.equal(confirmed.tries[0].how, "gateway");
    sender.wake();
    await sender.idle();
    assert.equal(fake.messagePosts().length, 0);
    // The table refuses to move a confirmed row, whoever writes.
    assert.throws(
      () => store.statement(`UPDATE outbox SET state = 'unknown' WHERE id = '${row.id}'`).run(),
      /a finished outbox row is final/,
    );
  });
});

/**
 * A store whose transactions fail, as on a full disk (`SQLITE_FULL` is what a commit meets
 * there), once `allowed` more have run; reads go on working, as they do on a full disk.
 */
class FullDisk {
  /** Transactions still allowed before each fails; Infinity: the disk has room. */
  allowed = Infinity;
  /** Transactions refused so far. */
  refused = 0;

  /** `store` as the sender sees it. */
  wrap(store: Store): Store {
    return new Proxy(store, {
      get: (target, key) => {
        if (key === "transaction" && this.allowed <= 0) {
          return () => {
            this.refused++;
            throw new KlbrError("store_unavailable", "cannot commit: database or disk is full");
          };
        }
        if (key === "transaction") this.allowed--;
        const value = Reflect.get(target, key, target);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
  }
}

/** Waits (real time, at most 5 s) until `check` holds. */
async function eventually(check: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 500 && !check(); i++) await new Promise((r) => setTimeout(r, 10));
  assert.ok(check(), `not within 5 s: ${what}`);
}

Deno.test("a send the store could not record goes out once the store works again, without another send to wake the sender", async () => {
  const disk = new FullDisk();
  disk.allowed = 0;
  await withSender(async ({ fake, store, send }) => {
    const row = send("after the disk");
    await eventually(() => disk.refused > 0, "the sender met the full disk");
    assert.equal(stateOf(store, row.id), "pending");
    assert.equal(fake.messagePosts().length, 0, "nothing leaves before `attempting` is durable");
    disk.allowed = Infinity;
    await eventually(() => stateOf(store, row.id) === "confirmed", "the row confirmed");
    assert.deepEqual(fake.botMessages("123").map((m) => m.content), ["after the disk"]);
  }, { senderStore: (store) => disk.wrap(store) });
});

Deno.test("a request whose outcome the store could not record is reconciled by nonce, never posted twice", async () => {
  const disk = new FullDisk();
  await withSender(async ({ fake, store, send }) => {
    disk.allowed = 1; // `attempting` commits; the outcome after the POST does not
    const row = send("posted, not recorded");
    await eventually(() => disk.refused > 0, "the sender met the full disk after its request");
    assert.equal(stateOf(store, row.id), "attempting");
    assert.equal(fake.messagePosts().length, 1);
    disk.allowed = Infinity;
    await eventually(() => stateOf(store, row.id) === "confirmed", "the row confirmed");
    const done = getOutbox(store, row.id)!;
    assert.match(done.tries[0].outcome, /^a re-post with the same nonce returned message \d+$/);
    // The re-post carried the same nonce: one message, the original.
    assert.deepEqual(fake.botMessages("123").map((m) => m.content), ["posted, not recorded"]);
    assert.equal(done.remoteId, fake.botMessages("123")[0].id);
  }, { senderStore: (store) => disk.wrap(store) });
});
