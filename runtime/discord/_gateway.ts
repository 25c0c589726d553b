/**
 * A small client of the Discord gateway wire protocol (v10, JSON): Hello (op 10) → Identify
 * (op 2) → `READY`; heartbeats (op 1) acknowledged by op 11 on the announced interval;
 * dispatches (op 0) handed to the caller. A lost connection is replaced by a fresh Identify
 * (no resume): a message delivered again is deduplicated at admission.
 *
 * `_transport.ts` owns it.
 *
 * @module
 */

import type { Secret } from "../config/mod.ts";
import type { Logger } from "../core/mod.ts";

/** GUILD_MESSAGES | DIRECT_MESSAGES | MESSAGE_CONTENT. */
export const GATEWAY_INTENTS: number = (1 << 9) | (1 << 12) | (1 << 15);

/** Close codes after which reconnecting cannot help (bad token, bad intents, …). */
const FATAL_CLOSE_CODES = new Set([4004, 4010, 4011, 4012, 4013, 4014]);

/** Consecutive failed connections after which the client gives up. */
const MAX_FAILURES = 50;

/** Longest wait between two connection attempts, in ms. */
const MAX_BACKOFF_MS = 30_000;

/** Options for {@linkcode DiscordGateway}. */
export interface DiscordGatewayOptions {
  /** The gateway URL, e.g. `wss://gateway.discord.gg`; `v=10&encoding=json` is added. */
  url: string;
  token: Secret;
  /** Called with each dispatch (op 0) but `READY`: its event name and data. */
  onDispatch: (event: string, data: unknown) => void;
  log: Logger;
}

interface Payload {
  op: number;
  d?: unknown;
  s?: number | null;
  t?: string | null;
}

/** One gateway connection at a time, replaced when it drops, until {@linkcode stop}. */
export class DiscordGateway {
  #o: DiscordGatewayOptions;
  #stop = new AbortController();
  #socket: WebSocket | null = null;
  #done: Promise<void> | null = null;

  /** Creates the client; {@linkcode start} connects. */
  constructor(options: DiscordGatewayOptions) {
    this.#o = options;
  }

  /** Starts connecting in the background. */
  start(): void {
    this.#done ??= this.#run();
  }

  /** Closes the connection and stops reconnecting; resolves when the loop has ended. */
  async stop(): Promise<void> {
    this.#stop.abort();
    this.#socket?.close(1000);
    await this.#done;
  }

  async #run(): Promise<void> {
    let failures = 0;
    while (!this.#stop.signal.aborted && failures < MAX_FAILURES) {
      const { ready, code } = await this.#connectOnce();
      if (this.#stop.signal.aborted) return;
      if (FATAL_CLOSE_CODES.has(code)) {
        this.#o.log.error(
          "discord.gateway_closed",
          `discord gateway closed with ${code}; not reconnecting`,
          { code },
        );
        return;
      }
      failures = ready ? 0 : failures + 1;
      const wait = Math.min(MAX_BACKOFF_MS, 500 * 2 ** Math.min(failures, 10));
      this.#o.log.warn(
        "discord.gateway_reconnect",
        `discord gateway closed (${code}); reconnecting in ${wait} ms`,
        { code, wait_ms: wait },
      );
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, wait);
        this.#stop.signal.addEventListener("abort", () => {
          clearTimeout(timer);
          resolve();
        }, { once: true });
      });
    }
    if (failures >= MAX_FAILURES) {
      this.#o.log.error(
        "discord.gateway_gave_up",
        `discord gateway failed ${failures} times in a row; giving up until the daemon restarts`,
        { failures },
      );
    }
  }

  /** One connection, from open to close: whether it reached `READY`, and the close code. */
  #connectOnce(): Promise<{ ready: boolean; code: number }> {
    const url = new URL(this.#o.url);
    url.searchParams.set("v", "10");
    url.searchParams.set("encoding", "json");
    let socket: WebSocket;
    try {
      socket = new WebSocket(url);
    } catch (error) {
      this.#o.log.warn(
        "discord.gateway_connect_failed",
        `discord gateway: cannot connect: ${error}`,
      );
      return Promise.resolve({ ready: false, code: 0 });
    }
    this.#socket = socket;
    let ready = false;
    let seq: number | null = null;
    let acked = true;
    let heartbeat: ReturnType<typeof setInterval> | undefined;
    const send = (payload: Payload) => {
      if (socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify(payload));
    };
    const beat = () => {
      // A beat not acknowledged before the next one means a dead connection: replace it.
      if (!acked) {
        socket.close(4000, "heartbeat not acknowledged");
        return;
      }
      acked = false;
      send({ op: 1, d: seq });
    };
    socket.onmessage = (event) => {
      let payload: Payload;
      try {
        payload = JSON.parse(String(event.data));
      } catch {
        this.#o.log.warn(
          "discord.gateway_bad_frame",
          "discord gateway: ignored a frame that is not JSON",
        );
        return;
      }
      if (typeof payload.s === "number") seq = payload.s;
      switch (payload.op) {
        case 10: {
          const interval = (payload.d as { heartbeat_interval?: unknown })?.heartbeat_interval;
          const ms = typeof interval === "number" && interval >= 100 ? interval : 41_250;
          clearInterval(heartbeat);
          heartbeat = setInterval(beat, ms);
          send({
            op: 2,
            d: {
              token: this.#o.token.reveal(),
              intents: GATEWAY_INTENTS,
              properties: { os: Deno.build.os, browser: "klbr", device: "klbr" },
            },
          });
          return;
        }
        case 1:
          send({ op: 1, d: seq });
          return;
        case 11:
          acked = true;
          return;
        case 7:
        case 9:
          socket.close(4000, "reconnect requested");
          return;
        case 0:
          if (payload.t === "READY") {
            ready = true;
            this.#o.log.info("discord.gateway_ready", "discord gateway ready");
          } else if (typeof payload.t === "string") {
            this.#o.onDispatch(payload.t, payload.d);
          }
          return;
      }
    };
    return new Promise((resolve) => {
      socket.onerror = () => {/* the close event follows */};
      socket.onclose = (event) => {
        clearInterval(heartbeat);
        this.#socket = null;
        resolve({ ready, code: event.code });
      };
    });
  }
}
