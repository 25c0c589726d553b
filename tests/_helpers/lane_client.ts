/**
 * A test client of the v2 lane protocol over a real WebSocket.
 *
 * @module
 */

import type { LaneRecord, ServerMessage } from "../../runtime/core/mod.ts";

/** Options for {@linkcode connectLane}. */
export interface ConnectLaneOptions {
  /** The daemon's port on 127.0.0.1. */
  port: number;
  /** Token presented at hello; omit for an anonymous native client (refused). */
  token?: string;
  session?: string;
  since?: number;
  client?: string;
  /** Extra headers for the upgrade, e.g. an Origin. */
  headers?: Record<string, string>;
}

/** A connected lane client that records every message it received. */
export interface LaneClient {
  /** Every message received so far, in order. */
  readonly messages: ServerMessage[];
  /** Sends one message. */
  send(message: Record<string, unknown>): void;
  /** Resolves with the first message (past or future) matching `predicate`. */
  waitFor<T extends ServerMessage = ServerMessage>(
    predicate: (m: ServerMessage) => boolean,
    timeoutMs?: number,
  ): Promise<T>;
  /** Sends a request and waits for the reply carrying the same `request` id. */
  request(message: Record<string, unknown>, timeoutMs?: number): Promise<ServerMessage>;
  /** Resolves when the socket has closed. */
  readonly closed: Promise<CloseEvent>;
  close(): Promise<void>;
}

let counter = 0;

/** Opens a socket, says hello and waits for `replayed`. */
export async function connectLane(options: ConnectLaneOptions): Promise<LaneClient> {
  const url = `ws://127.0.0.1:${options.port}/v2`;
  // Deno's WebSocket accepts headers as a second-argument option.
  const ws = new WebSocket(url, { headers: options.headers } as unknown as string[]);
  const messages: ServerMessage[] = [];
  const waiters = new Set<
    { predicate: (m: ServerMessage) => boolean; resolve: (m: ServerMessage) => void }
  >();
  let closeResolve!: (e: CloseEvent) => void;
  const closed = new Promise<CloseEvent>((r) => (closeResolve = r));
  ws.onmessage = (event) => {
    const message = JSON.parse(String(event.data)) as ServerMessage;
    messages.push(message);
    for (const waiter of [...waiters]) {
      if (waiter.predicate(message)) {
        waiters.delete(waiter);
        waiter.resolve(message);
      }
    }
  };
  ws.onclose = (event) => closeResolve(event);
  await new Promise<void>((resolve, reject) => {
    ws.onopen = () => resolve();
    ws.onerror = () => reject(new Error(`cannot connect to ${url}`));
  });
  const client: LaneClient = {
    messages,
    closed,
    send(message) {
      ws.send(JSON.stringify(message));
    },
    waitFor<T extends ServerMessage>(predicate: (m: ServerMessage) => boolean, timeoutMs = 20_000) {
      const found = messages.find(predicate);
      if (found) return Promise.resolve(found as T);
      return new Promise<T>((resolve, reject) => {
        const waiter = {
          predicate,
          resolve: (m: ServerMessage) => {
            clearTimeout(timer);
            resolve(m as T);
          },
        };
        const timer = setTimeout(() => {
          waiters.delete(waiter);
          reject(
            new Error(
              `no matching message within ${timeoutMs} ms; got ${messages.length}: ${
                JSON.stringify(messages.slice(-5))
              }`,
            ),
          );
        }, timeoutMs);
        waiters.add(waiter);
      });
    },
    request(message, timeoutMs) {
      const request = `t${++counter}`;
      client.send({ ...message, request });
      return client.waitFor(
        (m) => "request" in m && m.request === request,
        timeoutMs,
      );
    },
    async close() {
      if (ws.readyState === WebSocket.OPEN || ws.readyState === WebSocket.CONNECTING) ws.close();
      await closed;
    },
  };
  client.send({
    kind: "hello",
    session: options.session ?? "default",
    since: options.since ?? 0,
    token: options.token,
    client: options.client ?? "test",
  });
  await client.waitFor((m) => m.kind === "replayed" || m.kind === "error");
  return client;
}

/** The `frame.accepted` and `frame.finished` records of the frame that took one input up. */
export interface TakenUp {
  accepted: LaneRecord;
  finished: LaneRecord;
}

/**
 * Waits until the frame that took input `inputId` up has finished (60 s at most each step).
 *
 * @example
 * ```ts
 * const { finished } = await frameOf(client, ack.input_id);
 * ```
 */
export async function frameOf(client: LaneClient, inputId: string): Promise<TakenUp> {
  const accepted = await client.waitFor<LaneRecord>(
    (m) =>
      m.kind === "record" && m.type === "frame.accepted" &&
      ((m as LaneRecord).data.input_ids as string[]).includes(inputId),
    60_000,
  );
  const finished = await client.waitFor<LaneRecord>(
    (m) =>
      m.kind === "record" && m.type === "frame.finished" &&
      (m as LaneRecord).data.frame_id === accepted.data.frame_id,
    60_000,
  );
  return { accepted, finished };
}

/**
 * Sends `text` as a local input (its text is its client message id, so send each text once) and
 * waits until the frame that took it up has finished.
 *
 * @throws {Error} when the input is not acknowledged.
 */
export async function sendAndWait(client: LaneClient, text: string): Promise<TakenUp> {
  const ack = await client.request({ kind: "input", client_msg_id: text, text });
  if (ack.kind !== "ack") throw new Error(`the input was not acknowledged: ${JSON.stringify(ack)}`);
  return await frameOf(client, ack.input_id);
}
