/**
 * The daemon's listener: `node:http`, whose sockets can stop reading. A request goes to the
 * Hono app as a `Request`; a WebSocket upgrade goes to the app too, with a way to accept it in
 * the app's environment ({@linkcode LaneUpgrade}), so the `/v2` route upgrades it (to a `ws`
 * socket) only after the same `Host`, `Origin` and cookie checks as any request, and a refusal
 * is written back on the socket as that route's HTTP answer.
 *
 * Why not `Deno.serve`: its WebSocket reads its socket whatever the daemon does with the
 * messages (denoland/deno#14064: no way to pause reading), so a client that writes without
 * reading its acks could only be held in the daemon's memory. A `ws` socket over a
 * `node:http` upgrade pauses its TCP socket: the kernel's buffers fill and the client's
 * writes wait (TCP backpressure; `_lane_socket.ts`).
 *
 * A connection that has not sent its first request is bounded like a socket that has not said
 * hello ({@linkcode SilentConnections}): closed at the hello deadline, and the oldest closed to
 * make room past the pending bound, so connections that never speak cannot use up the daemon's
 * file descriptors.
 *
 * @module
 */

import {
  createServer,
  type IncomingMessage,
  type Server,
  type ServerResponse,
  STATUS_CODES,
} from "node:http";
import type { Buffer } from "node:buffer";
import type { Socket } from "node:net";
import { type Duplex, Readable } from "node:stream";
// @ts-types="npm:@types/ws@^8.18.1"
import { type WebSocket as NodeWebSocket, WebSocketServer } from "ws";
import { settlesWithin } from "../core/mod.ts";

/** What the app's environment carries for a request that asked to become a WebSocket. */
export interface LaneUpgrade {
  /**
   * Completes the upgrade: `onOpen` gets the socket once the handshake is written, with the TCP
   * stream under it, and may return how the socket settles before a shutdown closes it (it
   * stops reading and resolves once every message it read is answered). Until it is called,
   * the app's answer is what the client gets (a refusal, written on the socket).
   */
  accept(onOpen: (socket: NodeWebSocket, stream: Duplex) => Settle | void): void;
}

/** Stops a socket reading; resolves once every message it read is answered. */
export type Settle = () => Promise<void>;

/** The app's environment: the request's node side, and its upgrade when it asked for one. */
export interface ListenerEnv {
  incoming: IncomingMessage;
  upgrade?: LaneUpgrade;
}

/** The app as the listener calls it. */
export type AppFetch = (request: Request, env: ListenerEnv) => Response | Promise<Response>;

/** A listening daemon: its port, and how it stops. */
export interface Listening {
  port: number;
  /**
   * Stops accepting, lets every WebSocket answer the messages it read (it reads no more), then
   * closes it (1001, "the daemon is shutting down") and every idle connection, and resolves
   * `true` once every connection has closed, or `false` after `graceMs` (the rest are then cut).
   */
  close(graceMs: number): Promise<boolean>;
}

/**
 * The largest WebSocket message a socket reads (8 MiB): twice the largest envelope the lane
 * protocol allows (an input's 1,000,000 characters are up to 4 MB of UTF-8). A longer one
 * closes the socket (1009).
 */
const MAX_MESSAGE_BYTES = 8 << 20;

/** Where {@linkcode listenApp} listens, and how long a new connection may stay silent. */
export interface ListenOptions {
  hostname: string;
  /** 0 for any free port. */
  port: number;
  /** Connections without a first request kept at once (the lanes' `max_pending_hello`). */
  maxSilent: number;
  /** How long a connection may go without a first request (the lanes' `hello_timeout_ms`). */
  silentMs: number;
}

/**
 * Listens on `hostname:port` and serves `fetch`.
 *
 * @throws {Error} the listen error (`EADDRINUSE` and the like, with its `code`).
 * @example
 * ```ts
 * const listening = await listenApp(app.fetch, {
 *   hostname: "127.0.0.1", port: 0, maxSilent: 256, silentMs: 3_000,
 * });
 * await listening.close(5_000);
 * ```
 */
export async function listenApp(fetch: AppFetch, options: ListenOptions): Promise<Listening> {
  // A request without `Host` reaches the app, whose loopback guard refuses it (403, logged).
  const server = createServer({ noDelay: true, requireHostHeader: false });
  const sockets = new WebSocketServer({ noServer: true, maxPayload: MAX_MESSAGE_BYTES });
  const settles = new WeakMap<NodeWebSocket, Settle>();
  const silent = new SilentConnections(options);
  server.on("connection", (socket: Socket) => silent.add(socket));
  server.on("request", (incoming: IncomingMessage, outgoing: ServerResponse) => {
    silent.spoke(incoming.socket);
    void answerRequest(fetch, incoming, outgoing);
  });
  server.on("upgrade", (incoming: IncomingMessage, socket: Duplex, head: Buffer) => {
    silent.spoke(socket);
    void answerUpgrade(fetch, { incoming, socket, head, sockets, settles });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, options.hostname, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const port = (server.address() as { port: number }).port;
  return { port, close: (graceMs) => closeListener({ server, sockets, settles }, graceMs) };
}

/**
 * The connections that have not sent a request yet, oldest first. Each is closed when it has
 * been silent for `silentMs`, and a new one past `maxSilent` closes the oldest: a local process
 * that opens connections and never speaks holds at most `maxSilent` of the daemon's file
 * descriptors, for at most `silentMs` each. Once a connection has sent a request, HTTP's own
 * keep-alive limit (5 s idle) and the lanes' bounds (an upgraded socket's hello) take over.
 */
class SilentConnections {
  readonly #waiting = new Map<Duplex, () => void>();
  readonly #max: number;
  readonly #ms: number;

  constructor(limits: { maxSilent: number; silentMs: number }) {
    this.#max = limits.maxSilent;
    this.#ms = limits.silentMs;
  }

  /** Starts the silence deadline of a new connection; closes the oldest past the bound. */
  add(socket: Socket): void {
    const timedOut = () => socket.destroy();
    socket.setTimeout(this.#ms, timedOut);
    this.#waiting.set(socket, timedOut);
    socket.once("close", () => this.#waiting.delete(socket));
    if (this.#waiting.size <= this.#max) return;
    const [oldest] = this.#waiting.keys();
    this.#waiting.delete(oldest);
    oldest.destroy();
  }

  /** A connection sent its first request: it is no longer silent. */
  spoke(socket: Duplex): void {
    const timedOut = this.#waiting.get(socket);
    if (timedOut === undefined) return;
    this.#waiting.delete(socket);
    (socket as Socket).setTimeout(0);
    socket.off("timeout", timedOut);
  }
}

/**
 * The `Request` of a node request: its URL from the `Host` it named (a `Host` no URL can hold
 * gets a placeholder: the app's loopback guard refuses it by the header), its headers and body.
 */
function requestOf(incoming: IncomingMessage): Request {
  const path = incoming.url ?? "/";
  let url: URL;
  try {
    url = new URL(path, `http://${incoming.headers.host ?? "invalid.host"}`);
  } catch {
    url = new URL(path, "http://invalid.host");
  }
  const headers = new Headers();
  for (const [name, value] of Object.entries(incoming.headers)) {
    if (value === undefined) continue;
    for (const one of Array.isArray(value) ? value : [value]) headers.append(name, one);
  }
  const method = incoming.method ?? "GET";
  const hasBody = method !== "GET" && method !== "HEAD";
  return new Request(url, {
    method,
    headers,
    ...(hasBody
      ? { body: Readable.toWeb(incoming) as ReadableStream<Uint8Array>, duplex: "half" }
      : {}),
  });
}

/** Answers one HTTP request with what the app says; an app failure is a bare 500. */
async function answerRequest(
  fetch: AppFetch,
  incoming: IncomingMessage,
  outgoing: ServerResponse,
): Promise<void> {
  try {
    const response = await fetch(requestOf(incoming), { incoming });
    const body = new Uint8Array(await response.arrayBuffer());
    // Answered before its body was read (an upload over its limit): the connection closes
    // after the answer. Kept open, it waits for the client to send the rest, which nothing
    // reads, while a browser reads no answer before it has sent the whole body.
    const close = incoming.complete ? {} : { connection: "close" };
    // Whole bodies, with their length: no chunked encoding.
    outgoing.writeHead(response.status, {
      ...headersOf(response),
      "content-length": body.length,
      ...close,
    });
    outgoing.end(body);
  } catch {
    if (!outgoing.headersSent) outgoing.writeHead(500);
    outgoing.end();
  }
}

/**
 * Hands an upgrade request to the app; when the app did not accept it (a refusal, a path with
 * no WebSocket), writes the app's answer on the raw socket and ends it.
 */
async function answerUpgrade(
  fetch: AppFetch,
  raw: {
    incoming: IncomingMessage;
    socket: Duplex;
    head: Buffer;
    sockets: WebSocketServer;
    settles: WeakMap<NodeWebSocket, Settle>;
  },
): Promise<void> {
  const { incoming, socket, head, sockets, settles } = raw;
  socket.on("error", () => socket.destroy());
  let accepted = false;
  const upgrade: LaneUpgrade = {
    accept(onOpen) {
      accepted = true;
      sockets.handleUpgrade(incoming, socket, head, (ws) => {
        const settle = onOpen(ws, socket);
        if (settle) settles.set(ws, settle);
      });
    },
  };
  try {
    const response = await fetch(requestOf(incoming), { incoming, upgrade });
    if (accepted) return;
    const body = new Uint8Array(await response.arrayBuffer());
    const reason = STATUS_CODES[response.status] ?? "Refused";
    const lines = [`HTTP/1.1 ${response.status} ${reason}`];
    for (const [name, value] of Object.entries(headersOf(response))) {
      for (const one of Array.isArray(value) ? value : [value]) lines.push(`${name}: ${one}`);
    }
    lines.push(`content-length: ${body.length}`, "connection: close", "", "");
    const preamble = new TextEncoder().encode(lines.join("\r\n"));
    const answer = new Uint8Array(preamble.length + body.length);
    answer.set(preamble);
    answer.set(body, preamble.length);
    socket.end(answer);
  } catch {
    socket.destroy();
  }
}

/** A response's headers for node, each `set-cookie` kept apart. */
function headersOf(response: Response): Record<string, string | string[]> {
  const headers: Record<string, string | string[]> = {};
  response.headers.forEach((value, name) => {
    if (name !== "set-cookie" && name !== "content-length") headers[name] = value;
  });
  const cookies = response.headers.getSetCookie();
  if (cookies.length > 0) headers["set-cookie"] = cookies;
  return headers;
}

/**
 * Closes the server: each WebSocket once it answered what it read (it reads no more), and idle
 * connections at once; the rest after `graceMs`. Resolves `false` when some had to be cut;
 * either way only once every WebSocket's `close` has been handled (its lane let go), or a
 * second after it was cut. A message a socket had not read when its close was sent is never
 * acted upon: the close (1001) tells its client to send it again after the restart.
 */
async function closeListener(
  listener: { server: Server; sockets: WebSocketServer; settles: WeakMap<NodeWebSocket, Settle> },
  graceMs: number,
): Promise<boolean> {
  const { server, sockets, settles } = listener;
  const deadline = Date.now() + graceMs;
  const serverClosed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeIdleConnections();
  const lanes = [...sockets.clients];
  const ended = Promise.all(lanes.map(closeHandled));
  await settlesWithin(
    Promise.all(lanes.map((socket) => settles.get(socket)?.().catch(() => {}))),
    graceMs,
  );
  for (const socket of lanes) socket.close(1001, "the daemon is shutting down");
  const left = Math.max(0, deadline - Date.now());
  const graceful = await settlesWithin(Promise.all([serverClosed, ended]), left);
  if (!graceful) {
    for (const socket of sockets.clients) socket.terminate();
    server.closeAllConnections();
    await settlesWithin(ended, 1_000);
  }
  return graceful;
}

/** Resolves once `socket`'s `close` was emitted (at once for a closed one). */
function closeHandled(socket: NodeWebSocket): Promise<void> {
  return new Promise((resolve) => {
    if (socket.readyState === socket.CLOSED) resolve();
    else socket.once("close", () => resolve());
  });
}
