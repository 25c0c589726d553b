/**
 * A loopback fake of Discord for tests: one HTTP server on 127.0.0.1 that is both the
 * gateway (a WebSocket at `/gateway` speaking Hello, Identify, READY and heartbeat acks) and
 * the REST API (`/api/v10`), recording every POST and answering from a script.
 *
 * @example
 * ```ts
 * const fake = startFakeDiscord();
 * fake.script({ status: 200 });       // the next POST answers 200 with a fresh message id
 * fake.dispatchMessage({ channelId: "123", messageId: "9", content: "hi" });
 * assertEquals(fake.posts.length, 1);
 * await fake.close();
 * ```
 *
 * @module
 */

/** One scripted REST answer: a status (2xx answers `{id}`), or `hang` to never answer. */
export type FakeDiscordAnswer = { status: number; id?: string } | "hang";

/** One recorded POST. */
export interface RecordedPost {
  path: string;
  authorization: string | null;
  // deno-lint-ignore no-explicit-any
  body: any;
}

/** The fields of a pushed `MESSAGE_CREATE`. */
export interface FakeMessage {
  channelId: string;
  messageId: string;
  content: string;
  authorId?: string;
  username?: string;
  bot?: boolean;
  timestamp?: string;
}

/** A running fake. */
export interface FakeDiscord {
  /** `http://127.0.0.1:<port>/api/v10`. */
  apiUrl: string;
  /** `ws://127.0.0.1:<port>/gateway`. */
  gatewayUrl: string;
  /** Every POST received, in order. */
  posts: RecordedPost[];
  /** Every Identify (op 2) payload received, in order. */
  identifies: Record<string, unknown>[];
  /** Heartbeats (op 1) received. */
  heartbeats: number;
  /** Queues answers for the next POSTs; with none queued a POST answers 200. */
  script(...answers: FakeDiscordAnswer[]): void;
  /** Pushes a `MESSAGE_CREATE` dispatch to every identified gateway connection. */
  dispatchMessage(message: FakeMessage): void;
  /** Resolves when `count` Identify payloads have been received. */
  identified(count?: number): Promise<void>;
  /** Resolves when `count` POSTs have been received. */
  posted(count: number): Promise<void>;
  /** Resolves when `count` heartbeats have been received. */
  heartbeated(count: number): Promise<void>;
  /** Closes every identified gateway connection with `code` (default 4000, "reconnect"). */
  drop(code?: number): void;
  close(): Promise<void>;
}

/** Options for {@linkcode startFakeDiscord}. */
export interface FakeDiscordOptions {
  /** The heartbeat interval Hello announces, in ms. Default 45000. */
  heartbeatMs?: number;
}

/** Starts the fake on a free loopback port. */
export function startFakeDiscord(options: FakeDiscordOptions = {}): FakeDiscord {
  const posts: RecordedPost[] = [];
  const identifies: Record<string, unknown>[] = [];
  const answers: FakeDiscordAnswer[] = [];
  const sockets = new Set<WebSocket>();
  const hanging = new Set<() => void>();
  const waiters: { check: () => boolean; resolve: () => void }[] = [];
  let seq = 0;
  let nextId = 1_000_000;
  const state = { heartbeats: 0 };
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

  const gateway = (request: Request): Response => {
    const { socket, response } = Deno.upgradeWebSocket(request);
    socket.onopen = () => {
      socket.send(
        JSON.stringify({ op: 10, d: { heartbeat_interval: options.heartbeatMs ?? 45_000 } }),
      );
    };
    socket.onmessage = (event) => {
      const payload = JSON.parse(String(event.data));
      if (payload.op === 1) {
        state.heartbeats++;
        socket.send(JSON.stringify({ op: 11 }));
        settle();
      } else if (payload.op === 2) {
        identifies.push(payload.d);
        sockets.add(socket);
        socket.send(JSON.stringify({
          op: 0,
          s: ++seq,
          t: "READY",
          d: { v: 10, user: { id: "1", username: "klbr-bot", bot: true }, session_id: "s1" },
        }));
        settle();
      }
    };
    socket.onclose = () => sockets.delete(socket);
    return response;
  };

  const rest = async (request: Request, path: string): Promise<Response> => {
    const text = await request.text();
    let body: unknown = null;
    try {
      body = text === "" ? null : JSON.parse(text);
    } catch { /* recorded as null */ }
    posts.push({ path, authorization: request.headers.get("authorization"), body });
    settle();
    const answer = answers.shift() ?? { status: 200 };
    if (answer === "hang") {
      // Never answer; close() ends the request.
      await new Promise<void>((resolve) => hanging.add(resolve));
      return new Response(null, { status: 599 });
    }
    if (answer.status >= 200 && answer.status < 300) {
      return Response.json({
        id: answer.id ?? String(nextId++),
        content: (body as { content?: string })?.content,
      });
    }
    return Response.json({ message: `fake ${answer.status}`, code: 0 }, { status: answer.status });
  };

  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, (request) => {
    const url = new URL(request.url);
    if (url.pathname === "/gateway" && request.headers.get("upgrade") === "websocket") {
      return gateway(request);
    }
    if (request.method === "POST" && url.pathname.startsWith("/api/v10/")) {
      return rest(request, url.pathname.slice("/api/v10".length));
    }
    return new Response("not found", { status: 404 });
  });
  const base = `127.0.0.1:${server.addr.port}`;

  return {
    apiUrl: `http://${base}/api/v10`,
    gatewayUrl: `ws://${base}/gateway`,
    posts,
    identifies,
    get heartbeats() {
      return state.heartbeats;
    },
    script: (...more) => void answers.push(...more),
    dispatchMessage(message) {
      const d = {
        id: message.messageId,
        channel_id: message.channelId,
        content: message.content,
        timestamp: message.timestamp ?? "2026-01-02T03:04:05.678000+00:00",
        author: {
          id: message.authorId ?? "42",
          username: message.username ?? "ann",
          ...(message.bot ? { bot: true } : {}),
        },
      };
      for (const socket of sockets) {
        socket.send(JSON.stringify({ op: 0, s: ++seq, t: "MESSAGE_CREATE", d }));
      }
    },
    identified: (count = 1) => until(() => identifies.length >= count && sockets.size > 0),
    posted: (count) => until(() => posts.length >= count),
    heartbeated: (count) => until(() => state.heartbeats >= count),
    drop(code = 4000) {
      for (const socket of sockets) socket.close(code, "dropped by the fake");
      sockets.clear();
    },
    async close() {
      for (const resolve of hanging) resolve();
      for (const socket of sockets) socket.close();
      await server.shutdown();
    },
  };
}
