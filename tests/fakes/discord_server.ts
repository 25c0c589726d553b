/**
 * A loopback fake of Discord for tests: one HTTP server on 127.0.0.1 that is both the gateway
 * (a WebSocket at `/gateway`) and the REST API (`/api/v10`), keeping enough state to behave like
 * Discord where klbr's guarantees depend on it:
 *
 * - Gateway: Hello (op 10), Identify (op 2) → `READY` with a new session id and a resume URL,
 *   heartbeats (op 1 → op 11), Resume (op 6) → the missed dispatches after the given sequence,
 *   then `RESUMED`; a session that is unknown or invalidated answers Invalid Session (op 9,
 *   `d: false`). Every dispatch is numbered in its session, so a resume replays exactly what
 *   the connection missed. While {@linkcode FakeDiscord.down} the gateway refuses connections.
 *   `closeOnIdentify(code)` answers the next Identifies by closing with `code`, as Discord does
 *   with 4004 (Authentication failed) and 4014 (Disallowed intent(s)) per its "Gateway Close
 *   Event Codes" table
 *   (https://discord.com/developers/docs/topics/opcodes-and-status-codes#gateway-gateway-close-event-codes).
 * - REST: `POST /channels/{id}/messages` creates a message (echoed on the gateway, with its
 *   nonce); with `enforce_nonce` a second post of the same nonce within `nonceWindowMs` returns
 *   the first message. Per-channel buckets (one `X-RateLimit-Bucket` hash for every channel, as
 *   Discord sends it) send `X-RateLimit-*` headers and answer 429 with
 *   `retry_after` past the limit. `GET /channels/{id}/messages` pages history with `after`
 *   (the messages just after it, newest first, like Discord) or gives the latest. Reactions,
 *   typing, `GET /users/@me` and attachment downloads are served too.
 *
 * @example
 * ```ts
 * const fake = startFakeDiscord();
 * fake.script({ status: 200 });       // the next message POST answers 200
 * fake.dispatchMessage({ channelId: "123", messageId: "9", content: "hi" });
 * await fake.close();
 * ```
 *
 * @module
 */

/** The bot's own user id in the fake. */
export const FAKE_BOT_ID = "1";

/**
 * One scripted answer to a message POST: a status (a 2xx creates the message and answers it);
 * `created: true` with a 5xx creates the message and still fails; `hang` creates the message
 * and never answers (a lost response); `{status: 429, retryAfter}` is a rate limit.
 */
export type FakeDiscordAnswer =
  | { status: number; id?: string; created?: boolean; retryAfter?: number; global?: boolean }
  | "hang";

/** One recorded REST request. */
export interface RecordedPost {
  method: string;
  path: string;
  authorization: string | null;
  // deno-lint-ignore no-explicit-any
  body: any;
}

/** A message as the fake stores it (Discord's JSON shape). */
// deno-lint-ignore no-explicit-any
export type FakeStoredMessage = Record<string, any> & { id: string; channel_id: string };

/** The fields of a message a user sends. */
export interface FakeMessage {
  channelId: string;
  /** Default: a fresh snowflake, later than every message before. */
  messageId?: string;
  content: string;
  authorId?: string;
  username?: string;
  bot?: boolean;
  timestamp?: string;
  /** Mention the bot (`mentions` has it, the content starts with `<@1>`). */
  mentionBot?: boolean;
  /** The guild; `null` makes it a direct message. Default `"900"`. */
  guildId?: string | null;
  /** The message this one replies to (`message_reference` and `referenced_message`). */
  replyTo?: { messageId: string; authorId: string };
  attachments?: { id: string; filename: string; size: number; content_type?: string }[];
  /**
   * Discord's message `type` ("Message Types" in its Message resource docs): default 19 (REPLY)
   * with `replyTo`, else 0 (DEFAULT); 6 is CHANNEL_PINNED_MESSAGE, 7 USER_JOIN, 18 THREAD_CREATED.
   */
  type?: number;
  /**
   * A `message_reference` to this message id without `referenced_message`, as a pin's system
   * message (type 6) carries: Discord returns `referenced_message` only for types 19, 21 and 23.
   */
  reference?: string;
  /**
   * Forwards a message of the fake's history (Discord's "Message Reference Types": FORWARD, 1):
   * the forwarding message has `type` 0, empty `content`, a `message_reference` of type 1 naming
   * the original, no `referenced_message` (Discord returns it only for types 19, 21 and 23), and
   * the original's content in `message_snapshots[0].message` — its "Message Snapshot Object", a
   * subset of the message's fields (`type`, `content`, `embeds`, `attachments`, `timestamp`,
   * `edited_timestamp`, `flags`, `mentions`, `mention_roles`), without its author or id
   * (https://discord.com/developers/docs/resources/message#message-snapshot-object).
   */
  forwardOf?: { channelId: string; messageId: string };
}

/** Options for {@linkcode startFakeDiscord}. */
export interface FakeDiscordOptions {
  /** The heartbeat interval Hello announces, in ms. Default 45000. */
  heartbeatMs?: number;
  /** How long a nonce is enforced, in ms. Default 300000. */
  nonceWindowMs?: number;
  /** Per-channel message POST bucket: `limit` requests per `windowMs`. Default: none. */
  rateLimit?: { limit: number; windowMs: number };
}

interface Session {
  id: string;
  seq: number;
  log: { s: number; t: string; d: unknown }[];
  valid: boolean;
}

let snowflakeCounter = 0n;

/** A fresh snowflake from the clock (ms since Discord's epoch, shifted), always increasing. */
export function snowflake(at = Date.now()): string {
  return String(((BigInt(at) - 1420070400000n) << 22n) + (snowflakeCounter++ % 4096n));
}

const bigger = (a: string, b: string) => a.length > b.length || (a.length === b.length && a > b);

/** Starts the fake on a free loopback port. */
export function startFakeDiscord(options: FakeDiscordOptions = {}) {
  const posts: RecordedPost[] = [];
  const identifies: Record<string, unknown>[] = [];
  const identifyUrls: string[] = [];
  const resumes: Record<string, unknown>[] = [];
  const answers: FakeDiscordAnswer[] = [];
  const answersFor = new Map<string, FakeDiscordAnswer[]>();
  const history = new Map<string, FakeStoredMessage[]>();
  const reactions: { channelId: string; messageId: string; emoji: string }[] = [];
  const attachments = new Map<string, Uint8Array>();
  const sockets = new Map<WebSocket, Session | null>();
  const sessions = new Map<string, Session>();
  const hanging = new Set<() => void>();
  const waiters: { check: () => boolean; resolve: () => void }[] = [];
  const buckets = new Map<string, { remaining: number; resetAt: number }>();
  const state = {
    heartbeats: 0,
    typing: 0,
    rateLimited: 0,
    down: false,
    ready: 0,
    resumed: 0,
    identifyClose: null as number | null,
    frozen: false,
  };
  let current: Session | null = null;
  let sessionCount = 0;
  let resumeUrl: string | null = null;
  const settle = () => {
    for (const waiter of [...waiters]) {
      if (waiter.check()) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve();
      }
    }
  };
  const until = (check: () => boolean) =>
    new Promise<void>((resolve) => {
      waiters.push({ check, resolve });
      settle();
    });
  // Like Discord, every payload carries `s` and `t`: null outside dispatches.
  const sendTo = (socket: WebSocket, payload: Record<string, unknown>) => {
    if (socket.readyState === WebSocket.OPEN) {
      socket.send(JSON.stringify({ s: null, t: null, ...payload }));
    }
  };

  /** Numbers a dispatch in the current session and sends it to its live connections. */
  const dispatch = (t: string, d: unknown) => {
    if (current === null) return;
    const entry = { s: ++current.seq, t, d };
    current.log.push(entry);
    for (const [socket, session] of sockets) {
      if (session === current) sendTo(socket, { op: 0, ...entry });
    }
  };

  const gateway = (request: Request): Response => {
    if (state.down) return new Response("gateway down", { status: 503 });
    const { socket, response } = Deno.upgradeWebSocket(request);
    // The URL the client opened (its host from the Host header: the relay's port through it).
    const opened = request.url;
    socket.onopen = () => {
      sockets.set(socket, null);
      sendTo(socket, { op: 10, d: { heartbeat_interval: options.heartbeatMs ?? 45_000 } });
    };
    socket.onmessage = (event) => {
      const payload = JSON.parse(String(event.data));
      if (payload.op === 1) {
        state.heartbeats++;
        sendTo(socket, { op: 11 });
      } else if (payload.op === 2) {
        identifies.push(payload.d);
        identifyUrls.push(opened);
        if (state.identifyClose !== null) {
          socket.close(state.identifyClose, "refused by the fake");
          settle();
          return;
        }
        if (current !== null) current.valid = false;
        current = { id: `s${++sessionCount}`, seq: 0, log: [], valid: true };
        sessions.set(current.id, current);
        sockets.set(socket, current);
        const d = {
          v: 10,
          user: { id: FAKE_BOT_ID, username: "klbr-bot", bot: true },
          session_id: current.id,
          resume_gateway_url: resumeUrl ?? gatewayUrl,
          guilds: [],
        };
        const entry = { s: ++current.seq, t: "READY", d };
        current.log.push(entry);
        state.ready++;
        sendTo(socket, { op: 0, ...entry });
      } else if (payload.op === 6) {
        resumes.push(payload.d);
        const session = sessions.get(payload.d?.session_id);
        if (session === undefined || !session.valid || session !== current) {
          sendTo(socket, { op: 9, d: false });
        } else {
          sockets.set(socket, session);
          for (const entry of session.log) {
            if (entry.s > (payload.d.seq ?? 0) && entry.t !== "READY") {
              sendTo(socket, { op: 0, ...entry });
            }
          }
          sendTo(socket, { op: 0, s: null, t: "RESUMED", d: {} });
          state.resumed++;
        }
      }
      settle();
    };
    socket.onclose = () => {
      sockets.delete(socket);
      settle();
    };
    return response;
  };

  /** The bucket of a channel's message route: headers, and whether this request is over it. */
  const bucket = (channelId: string): { headers: Headers; limited: number | null } => {
    const headers = new Headers();
    const limit = options.rateLimit;
    if (limit === undefined) return { headers, limited: null };
    const now = Date.now();
    let b = buckets.get(channelId);
    if (b === undefined || now >= b.resetAt) {
      b = { remaining: limit.limit, resetAt: now + limit.windowMs };
      buckets.set(channelId, b);
    }
    const resetAfter = (b.resetAt - now) / 1000;
    const over = b.remaining <= 0;
    if (!over) b.remaining--;
    headers.set("x-ratelimit-limit", String(limit.limit));
    headers.set("x-ratelimit-remaining", String(b.remaining));
    headers.set("x-ratelimit-reset", String(b.resetAt / 1000));
    headers.set("x-ratelimit-reset-after", resetAfter.toFixed(3));
    // Like Discord, one hash names the route's bucket in every channel: the limit itself is
    // per channel (the major parameter), which the hash does not include.
    headers.set("x-ratelimit-bucket", "bucket-channel-messages");
    return { headers, limited: over ? resetAfter : null };
  };

  const tooMany = (retryAfter: number, headers: Headers, global = false) => {
    state.rateLimited++;
    if (global) headers.set("x-ratelimit-global", "true");
    headers.set("x-ratelimit-scope", global ? "global" : "user");
    headers.set("retry-after", String(Math.ceil(retryAfter)));
    return Response.json(
      { message: "You are being rate limited.", retry_after: retryAfter, global },
      { status: 429, headers },
    );
  };

  const store = (message: FakeStoredMessage) => {
    const list = history.get(message.channel_id) ?? [];
    if (!list.some((m) => m.id === message.id)) list.push(message);
    list.sort((a, b) => (bigger(a.id, b.id) ? 1 : -1));
    history.set(message.channel_id, list);
  };

  const createMessage = async (request: Request, channelId: string): Promise<Response> => {
    const body = await request.json().catch(() => null);
    posts.push({
      method: "POST",
      path: `/channels/${channelId}/messages`,
      authorization: request.headers.get("authorization"),
      body,
    });
    settle();
    const { headers, limited } = bucket(channelId);
    if (limited !== null) return tooMany(limited, headers);
    const answer = answersFor.get(body?.content)?.shift() ?? answers.shift() ?? { status: 200 };
    if (answer !== "hang" && answer.status === 429) {
      return tooMany(answer.retryAfter ?? 0.05, headers, answer.global);
    }
    const windowMs = options.nonceWindowMs ?? 300_000;
    const existing = body?.enforce_nonce === true && body?.nonce !== undefined
      ? (history.get(channelId) ?? []).find((m) =>
        m.author.id === FAKE_BOT_ID && m.nonce === body.nonce &&
        Date.now() - Date.parse(m.timestamp) <= windowMs
      )
      : undefined;
    const creates = answer === "hang" || (answer.status >= 200 && answer.status < 300) ||
      answer.created === true;
    let message = existing;
    if (message === undefined && creates) {
      message = {
        id: answer !== "hang" && answer.id ? answer.id : snowflake(),
        channel_id: channelId,
        content: body?.content,
        timestamp: new Date().toISOString(),
        author: { id: FAKE_BOT_ID, username: "klbr-bot", bot: true },
        nonce: body?.nonce,
        ...(body?.message_reference ? { message_reference: body.message_reference } : {}),
        attachments: [],
        mentions: [],
      };
      store(message);
      dispatch("MESSAGE_CREATE", { ...message, guild_id: "900" });
      settle();
    }
    if (answer === "hang") {
      await new Promise<void>((resolve) => hanging.add(resolve));
      return new Response(null, { status: 599 });
    }
    if (answer.status >= 200 && answer.status < 300) return Response.json(message, { headers });
    return Response.json({ message: `fake ${answer.status}`, code: 0 }, {
      status: answer.status,
      headers,
    });
  };

  const listMessages = (url: URL, channelId: string): Response => {
    const list = history.get(channelId) ?? [];
    const limit = Math.min(100, Number(url.searchParams.get("limit") ?? 50));
    const after = url.searchParams.get("after");
    const page = after === null
      ? list.slice(-limit)
      : list.filter((m) => bigger(m.id, after)).slice(0, limit);
    return Response.json([...page].reverse());
  };

  const rest = async (request: Request, path: string, url: URL): Promise<Response> => {
    const auth = request.headers.get("authorization");
    let m: RegExpMatchArray | null;
    if (request.method === "POST" && (m = path.match(/^\/channels\/(\d+)\/messages$/))) {
      return await createMessage(request, m[1]);
    }
    posts.push({
      method: request.method,
      path,
      authorization: auth,
      body: await request.text() || null,
    });
    settle();
    if (request.method === "GET" && (m = path.match(/^\/channels\/(\d+)\/messages$/))) {
      return listMessages(url, m[1]);
    }
    if (
      request.method === "PUT" &&
      (m = path.match(/^\/channels\/(\d+)\/messages\/(\d+)\/reactions\/([^/]+)\/@me$/))
    ) {
      reactions.push({ channelId: m[1], messageId: m[2], emoji: decodeURIComponent(m[3]) });
      settle();
      return new Response(null, { status: 204 });
    }
    if (request.method === "POST" && (m = path.match(/^\/channels\/(\d+)\/typing$/))) {
      state.typing++;
      settle();
      return new Response(null, { status: 204 });
    }
    if (request.method === "GET" && path === "/users/@me") {
      return auth === null || auth === "Bot " || auth === "Bot wrong"
        ? Response.json({ message: "401: Unauthorized", code: 0 }, { status: 401 })
        : Response.json({ id: FAKE_BOT_ID, username: "klbr-bot", bot: true });
    }
    return Response.json({ message: "Unknown route", code: 0 }, { status: 404 });
  };

  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, (request) => {
    const url = new URL(request.url);
    if (url.pathname === "/gateway" && request.headers.get("upgrade") === "websocket") {
      return gateway(request);
    }
    if (url.pathname.startsWith("/attachments/")) {
      const data = attachments.get(url.pathname.slice("/attachments/".length));
      return data === undefined
        ? new Response("gone", { status: 404 })
        : new Response(data as BodyInit);
    }
    if (url.pathname.startsWith("/api/v10/")) {
      return rest(request, url.pathname.slice("/api/v10".length), url);
    }
    return new Response("not found", { status: 404 });
  });
  const base = `127.0.0.1:${server.addr.port}`;
  const gatewayUrl = `ws://${base}/gateway`;

  // A loopback TCP relay in front of the gateway. `freeze()` makes it carry no more bytes either
  // way while every connection stays open: a failed or "zombied" connection, which a client can
  // only notice by its heartbeats going unacknowledged; Discord's docs say it should then
  // terminate the connection and resume
  // (https://discord.com/developers/docs/events/gateway#sending-heartbeats).
  const relay = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const relayed = new Set<Deno.Conn>();
  const pipes: Promise<void>[] = [];
  const pipe = async (from: Deno.Conn, to: Deno.Conn) => {
    const buffer = new Uint8Array(64 * 1024);
    try {
      for (let n = await from.read(buffer); n !== null; n = await from.read(buffer)) {
        if (!state.frozen) await to.write(buffer.subarray(0, n));
      }
    } catch { /* a side closed */ }
  };
  const endRelayed = (...conns: Deno.Conn[]) => {
    for (const conn of conns) {
      if (relayed.delete(conn)) {
        try {
          conn.close();
        } catch { /* already closed */ }
      }
    }
  };
  const relaying = (async () => {
    for await (const client of relay) {
      const upstream = await Deno.connect({ hostname: "127.0.0.1", port: server.addr.port });
      relayed.add(client).add(upstream);
      const end = () => endRelayed(client, upstream);
      pipes.push(pipe(client, upstream).finally(end), pipe(upstream, client).finally(end));
    }
  })().catch(() => {});

  /** The fields a forward of a stored message carries (see {@linkcode FakeMessage.forwardOf}). */
  const forwardOf = (of: { channelId: string; messageId: string }) => {
    const m = (history.get(of.channelId) ?? []).find((x) => x.id === of.messageId);
    if (m === undefined) throw new Error(`the fake has no message ${of.messageId} to forward`);
    return {
      message_reference: {
        type: 1,
        message_id: m.id,
        channel_id: m.channel_id,
        guild_id: "900",
      },
      message_snapshots: [{
        message: {
          type: m.type ?? 0,
          content: m.content,
          embeds: m.embeds ?? [],
          attachments: m.attachments ?? [],
          timestamp: m.timestamp,
          edited_timestamp: m.edited_timestamp ?? null,
          flags: 0,
          mentions: m.mentions ?? [],
          mention_roles: [],
        },
      }],
    };
  };

  const messageOf = (message: FakeMessage): FakeStoredMessage => {
    const id = message.messageId ?? snowflake();
    const author = {
      id: message.authorId ?? "42",
      username: message.username ?? "ann",
      ...(message.bot ? { bot: true } : {}),
    };
    const files = (message.attachments ?? []).map((a) => ({
      ...a,
      url: `http://${base}/attachments/${a.id}`,
      proxy_url: `http://${base}/attachments/${a.id}`,
    }));
    const referenced = message.replyTo === undefined
      ? undefined
      : (history.get(message.channelId) ?? [])
        .find((m) => m.id === message.replyTo!.messageId) ??
        {
          id: message.replyTo.messageId,
          channel_id: message.channelId,
          author: { id: message.replyTo.authorId, username: "x" },
          content: "",
        };
    return {
      id,
      channel_id: message.channelId,
      content: message.mentionBot ? `<@${FAKE_BOT_ID}> ${message.content}` : message.content,
      timestamp: message.timestamp ?? "2026-01-02T03:04:05.678000+00:00",
      author,
      mentions: message.mentionBot ? [{ id: FAKE_BOT_ID, username: "klbr-bot", bot: true }] : [],
      attachments: files,
      type: message.type ?? (message.replyTo ? 19 : 0),
      ...(message.reference
        ? { message_reference: { message_id: message.reference, channel_id: message.channelId } }
        : {}),
      ...(message.forwardOf ? forwardOf(message.forwardOf) : {}),
      ...(message.replyTo
        ? {
          message_reference: {
            message_id: message.replyTo.messageId,
            channel_id: message.channelId,
          },
          referenced_message: referenced,
        }
        : {}),
    };
  };

  return {
    /** `http://127.0.0.1:<port>/api/v10`. */
    apiUrl: `http://${base}/api/v10`,
    /** `ws://127.0.0.1:<port>/gateway`. */
    gatewayUrl,
    /**
     * The gateway through the relay that {@linkcode freeze} stops; `READY` still names
     * {@linkcode gatewayUrl} as the resume URL, as Discord names its own.
     */
    relayedGatewayUrl: `ws://127.0.0.1:${(relay.addr as Deno.NetAddr).port}/gateway`,
    /**
     * The network under the relayed connections dies silently: no byte passes either way (no
     * heartbeat ACK, no close frame) and nothing closes.
     */
    freeze() {
      state.frozen = true;
    },
    /** Every REST request received but attachment downloads, in order. */
    posts,
    /** Every Identify (op 2) payload received, in order. */
    identifies,
    /**
     * The URL each Identify's connection was opened on (`http://`, with `v` and `encoding`), in
     * the order of {@linkcode identifies}.
     */
    identifyUrls,
    /** Every Resume (op 6) payload received, in order. */
    resumes,
    /** Every reaction the bot added. */
    reactions,
    get heartbeats() {
      return state.heartbeats;
    },
    get typing() {
      return state.typing;
    },
    /** 429s answered. */
    get rateLimited() {
      return state.rateLimited;
    },
    /** Sessions resumed (`RESUMED` sent). */
    get resumedCount() {
      return state.resumed;
    },
    /** The messages of a channel, oldest first. */
    history: (channelId: string): FakeStoredMessage[] => history.get(channelId) ?? [],
    /** The messages the bot posted in a channel, oldest first. */
    botMessages: (channelId: string) =>
      (history.get(channelId) ?? []).filter((m) => m.author.id === FAKE_BOT_ID),
    /** The message POSTs received (every try), in order. */
    messagePosts: () => posts.filter((p) => p.method === "POST" && p.path.endsWith("/messages")),
    /** Queues answers for the next message POSTs; with none queued a POST answers 200. */
    script: (...more: FakeDiscordAnswer[]) => void answers.push(...more),
    /** Queues answers for the next POSTs of a message with this content, before `script`'s. */
    scriptFor: (content: string, ...more: FakeDiscordAnswer[]) =>
      void answersFor.set(content, [...(answersFor.get(content) ?? []), ...more]),
    /** Serves `data` at the attachment URL of id `id`. */
    serveAttachment: (id: string, data: Uint8Array) => void attachments.set(id, data),
    /**
     * A user sends a message: it enters the channel's history and, as `MESSAGE_CREATE`, the
     * current session (sent now to live connections, replayed to a resume). Returns its id.
     */
    dispatchMessage(message: FakeMessage): string {
      const stored = messageOf(message);
      store(stored);
      const d = message.guildId === null
        ? stored
        : { ...stored, guild_id: message.guildId ?? "900" };
      dispatch("MESSAGE_CREATE", d);
      return stored.id;
    },
    /** Sends `data` as a `MESSAGE_CREATE` as it is, unchecked: a payload klbr may not read. */
    dispatchRawMessage(data: Record<string, unknown>): void {
      dispatch("MESSAGE_CREATE", data);
    },
    /** The author edits a message: `MESSAGE_UPDATE`. */
    editMessage(channelId: string, messageId: string, content: string) {
      const m = history.get(channelId)?.find((x) => x.id === messageId);
      const editedAt = new Date().toISOString();
      if (m) {
        m.content = content;
        m.edited_timestamp = editedAt;
      }
      dispatch("MESSAGE_UPDATE", {
        id: messageId,
        channel_id: channelId,
        content,
        edited_timestamp: editedAt,
        author: m?.author,
      });
    },
    /**
     * Discord attaches a link's embed to a message (or it is pinned): `MESSAGE_UPDATE` with the
     * whole message, its text unchanged and its `edited_timestamp` as it was — null if it was
     * never edited, else the last edit's time — not an edit.
     */
    embedMessage(channelId: string, messageId: string) {
      const m = history.get(channelId)?.find((x) => x.id === messageId);
      if (m === undefined) return;
      m.embeds = [{ type: "link", url: "https://example.com/" }];
      dispatch("MESSAGE_UPDATE", {
        ...m,
        guild_id: "900",
        edited_timestamp: m.edited_timestamp ?? null,
      });
    },
    /** The author deletes a message: `MESSAGE_DELETE`. */
    deleteMessage(channelId: string, messageId: string) {
      const list = history.get(channelId) ?? [];
      history.set(channelId, list.filter((x) => x.id !== messageId));
      dispatch("MESSAGE_DELETE", { id: messageId, channel_id: channelId });
    },
    /** A thread `threadId` is created under `parentId`: `THREAD_CREATE`. */
    createThread(threadId: string, parentId: string) {
      dispatch("THREAD_CREATE", {
        id: threadId,
        parent_id: parentId,
        type: 11,
        name: "a thread",
        guild_id: "900",
      });
    },
    /** Makes each following `READY` name `url` as the resume URL (default: the gateway's). */
    nameResumeUrl(url: string) {
      resumeUrl = url;
    },
    /** Makes the current session unresumable: the next Resume gets op 9. */
    invalidateSessions() {
      for (const session of sessions.values()) session.valid = false;
    },
    /** Closes every gateway connection and refuses new ones until {@linkcode up}. */
    down() {
      state.down = true;
      for (const socket of sockets.keys()) socket.close(4000, "gateway down");
    },
    /**
     * Answers each following Identify by closing with `code` (4004 a bad token, 4014 the
     * Message Content intent not enabled), or, with null, by `READY` again.
     */
    closeOnIdentify(code: number | null) {
      state.identifyClose = code;
    },
    /** Accepts gateway connections again. */
    up() {
      state.down = false;
    },
    /** Resolves when `count` Identify payloads have been received and a connection is live. */
    identified: (count = 1) =>
      until(() =>
        identifies.length >= count && [...sockets.values()].some((s) => s === current && s !== null)
      ),
    /** Resolves when `count` sessions have been resumed. */
    resumed: (count = 1) => until(() => state.resumed >= count),
    /** Resolves when `count` message POSTs have been received. */
    posted: (count: number) =>
      until(() =>
        posts.filter((p) => p.method === "POST" && p.path.endsWith("/messages")).length >= count
      ),
    /** Resolves when `check` holds, re-checked on every request and gateway frame. */
    until,
    /** Resolves when `count` heartbeats have been received. */
    heartbeated: (count: number) => until(() => state.heartbeats >= count),
    /** Closes every gateway connection with `code` (default 4000, which allows a resume). */
    drop(code = 4000) {
      for (const socket of sockets.keys()) socket.close(code, "dropped by the fake");
    },
    async close() {
      for (const resolve of hanging) resolve();
      relay.close();
      endRelayed(...relayed);
      await relaying;
      await Promise.all(pipes);
      for (const socket of sockets.keys()) socket.close();
      await server.shutdown();
    },
  };
}

/** A running fake. */
export type FakeDiscord = ReturnType<typeof startFakeDiscord>;
