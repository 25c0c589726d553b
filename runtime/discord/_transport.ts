/**
 * The Discord transport: the gateway client that admits messages and the one sender loop
 * that drains the outbox. It owns no inbox and no model loop: a `MESSAGE_CREATE` in a
 * configured channel from a non-bot author goes to `Coordinator.admitDiscord`, and an outbox
 * row goes to `POST /channels/{id}/messages`.
 *
 * Sending is honest about what it knows: `attempting` is committed before the request; a 2xx
 * with a message id is `confirmed`, a 4xx `failed`, and a 5xx, a network error or a timeout
 * `unknown`, never retried, because the message may have been posted.
 *
 * @module
 */

import { z } from "zod";
import { moveOutbox, nextPendingOutbox, type OutboxRecord } from "../../store/outbox.ts";
import type { Store } from "../../store/store.ts";
import type { DiscordConfig, Secret } from "../config/mod.ts";
import { DiscordGateway } from "./_gateway.ts";
import { type Logger, SerialRunner } from "../core/mod.ts";

/** A `MESSAGE_CREATE` the transport admits, reduced to what admission needs. */
export interface DiscordMessage {
  channelId: string;
  messageId: string;
  authorId: string;
  username: string;
  content: string;
  /** The message timestamp, in ms since the epoch. */
  receivedAt: number;
}

/** What the transport needs from the daemon: admission and a way to wake lane clients. */
export interface DiscordHost {
  /** Admits one message; it must not wait for Python. */
  admitDiscord(message: DiscordMessage): void;
  /** Tells lane clients of `session` that new records exist. */
  notify(session: string): void;
}

/** Options for {@linkcode DiscordTransport}. */
export interface DiscordTransportOptions {
  config: DiscordConfig;
  token: Secret;
  store: Store;
  log: Logger;
}

const MessageCreate = z.object({
  id: z.string().regex(/^[0-9]{1,20}$/),
  channel_id: z.string().regex(/^[0-9]{1,20}$/),
  content: z.string(),
  timestamp: z.string(),
  author: z.object({
    id: z.string().regex(/^[0-9]{1,20}$/),
    username: z.string().min(1),
    bot: z.boolean().optional(),
  }),
});

/** Rows one drain sends at most before it yields to the next wake. */
const MAX_ROWS_PER_DRAIN = 1000;

/**
 * The daemon's one Discord connection and outbox sender.
 *
 * @example
 * ```ts
 * const discord = new DiscordTransport({ config: config.discord, token, store, log });
 * discord.start({ admitDiscord: (m) => coordinator.admitDiscord("default", m), notify });
 * ```
 */
export class DiscordTransport {
  /** The configured channel ids; messages elsewhere are ignored, sends elsewhere refused. */
  readonly channels: readonly string[];
  #o: DiscordTransportOptions;
  #host: DiscordHost | null = null;
  #gateway: DiscordGateway | null = null;
  #stop = new AbortController();
  #sender = new SerialRunner(() => this.#drain());

  /** Creates the transport; {@linkcode start} connects and sends. */
  constructor(options: DiscordTransportOptions) {
    this.#o = options;
    this.channels = options.config.channels;
  }

  /** Connects to the gateway and sends any rows already pending. */
  start(host: DiscordHost): void {
    this.#host = host;
    this.#gateway = new DiscordGateway({
      url: this.#o.config.gateway_url,
      token: this.#o.token,
      log: this.#o.log,
      onDispatch: (event, data) => {
        if (event === "MESSAGE_CREATE") this.#onMessage(data);
      },
    });
    this.#gateway.start();
    this.wake();
  }

  /** Tells the sender that a row may be pending; sends run one at a time, in order. */
  wake(): void {
    if (this.#host === null || this.#stop.signal.aborted) return;
    // #drain catches its own failures, so a run never rejects.
    void this.#sender.run();
  }

  /** Closes the gateway; a send in flight is aborted and recorded `unknown`. */
  async stop(): Promise<void> {
    this.#stop.abort();
    await this.#gateway?.stop();
    await this.#sender.idle();
  }

  #onMessage(data: unknown): void {
    const parsed = MessageCreate.safeParse(data);
    if (!parsed.success) {
      this.#o.log.warn(
        "discord.bad_message",
        "discord: ignored a MESSAGE_CREATE that does not parse",
      );
      return;
    }
    const m = parsed.data;
    if (m.author.bot === true || !this.channels.includes(m.channel_id)) return;
    const at = Date.parse(m.timestamp);
    try {
      this.#host?.admitDiscord({
        channelId: m.channel_id,
        messageId: m.id,
        authorId: m.author.id,
        username: m.author.username,
        content: m.content,
        receivedAt: Number.isFinite(at) && at >= 0 ? at : Date.now(),
      });
    } catch (error) {
      this.#o.log.error("discord.admit_failed", `discord: cannot admit message ${m.id}: ${error}`, {
        message_id: m.id,
      });
    }
  }

  async #drain(): Promise<void> {
    try {
      for (let i = 0; i < MAX_ROWS_PER_DRAIN && !this.#stop.signal.aborted; i++) {
        const row = nextPendingOutbox(this.#o.store);
        if (row === undefined) return;
        await this.#send(row);
      }
      // A long backlog is sent batch by batch: ask for one more run.
      if (!this.#stop.signal.aborted) void this.#sender.run();
    } catch (error) {
      // A store failure stops this drain only; the rows stay where the store left them and
      // the next wake tries again.
      this.#o.log.error(
        "discord.sender_stopped",
        `discord: the outbox sender stopped: ${error}; sends wait until the daemon restarts`,
      );
    }
  }

  async #send(row: OutboxRecord): Promise<void> {
    const { store, config, log } = this.#o;
    const move = (state: "confirmed" | "failed" | "unknown", fields: object) => {
      moveOutbox(store, row.id, state, fields);
      this.#host?.notify(row.session);
      log.info("discord.outbox_state", `discord: outbox ${row.id} ${state}`, {
        outbox_id: row.id,
        state,
      });
    };
    // Durable before the request leaves: a crash from here on leaves `attempting`, which the
    // next start records as `unknown`.
    moveOutbox(store, row.id, "attempting");
    this.#host?.notify(row.session);
    const body: Record<string, unknown> = { content: row.body };
    if (row.destination.reply_to !== undefined) {
      body.message_reference = { message_id: row.destination.reply_to, fail_if_not_exists: false };
    }
    const signal = AbortSignal.any([
      AbortSignal.timeout(config.send_timeout_ms),
      this.#stop.signal,
    ]);
    try {
      const response = await fetch(
        `${config.api_url.replace(/\/$/, "")}/channels/${row.destination.channel_id}/messages`,
        {
          method: "POST",
          headers: {
            authorization: `Bot ${this.#o.token.reveal()}`,
            "content-type": "application/json",
            "user-agent": "DiscordBot (klbr, 0.1.0)",
          },
          body: JSON.stringify(body),
          signal,
        },
      );
      const text = await response.text();
      if (response.ok) {
        let id: unknown;
        try {
          id = JSON.parse(text)?.id;
        } catch { /* not JSON: no id */ }
        if (typeof id === "string" && id !== "") return move("confirmed", { remoteId: id });
        return move("unknown", {
          error: `HTTP ${response.status} without a message id; it may have been posted`,
        });
      }
      if (response.status >= 400 && response.status < 500) {
        return move("failed", { error: `HTTP ${response.status}: ${text.slice(0, 200)}` });
      }
      return move("unknown", {
        error: `HTTP ${response.status}; it may have been posted: ${text.slice(0, 200)}`,
      });
    } catch (error) {
      const reason = signal.aborted && !this.#stop.signal.aborted
        ? `no answer within ${config.send_timeout_ms} ms`
        : this.#stop.signal.aborted
        ? "the daemon stopped during the request"
        : `network error: ${error instanceof Error ? error.message : error}`;
      return move("unknown", { error: `${reason}; it may have been posted` });
    }
  }
}
