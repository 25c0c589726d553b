/**
 * The Discord transport: the gateway (`_gateway.ts`, resumed across reconnects and restarts),
 * what it delivers (`_receiver.ts`: admission, edits, deletions, threads, backfill), the one
 * outbox sender (`_sender.ts`: nonces, rate limits, reconciliation) and typing. It owns no
 * inbox and no model loop: messages go to `Coordinator.admitDiscord`, rows come from the
 * outbox the `discord.*` RPCs write.
 *
 * @module
 */

import { channelCursors } from "../../store/tables/discord_gateway.ts";
import type { Store } from "../../store/store.ts";
import type { DiscordConfig, Secret } from "../config/mod.ts";
import type { Logger } from "../core/mod.ts";
import { connectingStatus, DiscordGateway, type GatewayStatus } from "./_gateway.ts";
import { DM_PARENT } from "./_inbound.ts";
import { type DiscordHost, DiscordReceiver } from "./_receiver.ts";
import { DiscordRest, failureText } from "./_rest.ts";
import type { DiscordEffects } from "./_rpc.ts";
import { OutboxSender } from "./_sender.ts";

/** What `/health` and the start-up block say of Discord: the gateway and the config. */
export interface DiscordStatus extends GatewayStatus {
  channels: string[];
  /** Direct messages are admitted (config `dms`). */
  dms: boolean;
}

/**
 * Why Discord makes the daemon `degraded`, one sentence, or null while it is not: a fatal
 * close (with its fix), or a gateway down since a time (with the last error).
 *
 * @example
 * ```ts
 * discordReason(transport.status()); // "Discord: down since 2026-… (cannot connect to …)"
 * ```
 */
export function discordReason(status: DiscordStatus): string | null {
  if (status.state === "refused") {
    return `Discord: ${status.lastError}; not reconnecting: ${status.fix}, then restart klbr`;
  }
  if (status.state === "down") {
    return `Discord: down since ${
      new Date(status.since).toISOString()
    } (${status.lastError}); reconnecting`;
  }
  return null;
}

/** The start-up block's Discord line: the state, the gateway, the channels and DMs. */
export function describeDiscord(status: DiscordStatus): string {
  const reason = discordReason(status);
  const where = `channels ${status.channels.join(", ")}; direct messages ${
    status.dms ? "answered" : "refused (dms #false)"
  }`;
  return reason !== null ? `${reason}; ${where}` : `${status.state} (${status.url}); ${where}`;
}

/** Options for {@linkcode DiscordTransport}. */
export interface DiscordTransportOptions {
  config: DiscordConfig;
  token: Secret;
  store: Store;
  log: Logger;
}

/**
 * The daemon's one Discord connection and outbox sender.
 *
 * @example
 * ```ts
 * const discord = new DiscordTransport({ config: config.discord, token, store, log });
 * discord.start({ admitDiscord: (m) => admit(m) });
 * ```
 */
export class DiscordTransport implements DiscordEffects {
  #o: DiscordTransportOptions;
  #stop = new AbortController();
  #rest: DiscordRest;
  #gateway: DiscordGateway | null = null;
  #sender: OutboxSender | null = null;

  /** Creates the transport; {@linkcode start} connects and sends. */
  constructor(options: DiscordTransportOptions) {
    this.#o = options;
    this.#rest = new DiscordRest({
      apiUrl: options.config.api_url,
      token: options.token,
      timeoutMs: options.config.send_timeout_ms,
      signal: this.#stop.signal,
    });
  }

  /**
   * Where the agent may speak: the configured channels, the known threads of them and, unless
   * `dms #false`, the direct-message channels a message was admitted from.
   */
  channels(): readonly string[] {
    const { channels: configured, dms } = this.#o.config;
    const threads = channelCursors(this.#o.store)
      .filter((c) =>
        c.parentId !== null &&
        (configured.includes(c.parentId) || (dms && c.parentId === DM_PARENT))
      )
      .map((c) => c.channelId);
    return [...configured, ...threads];
  }

  /** The gateway's state, with the configured channels and whether DMs are answered. */
  status(): DiscordStatus {
    const { config } = this.#o;
    const gateway = this.#gateway?.status() ?? connectingStatus(config.gateway_url, Date.now());
    return { ...gateway, channels: [...config.channels], dms: config.dms };
  }

  /**
   * Connects to the gateway (resuming the saved session) and starts the sender, which first
   * reconciles any row a restart left `unknown`.
   */
  start(host: DiscordHost): void {
    const { config, store, log, token } = this.#o;
    const shared = { config, store, rest: this.#rest, log, signal: this.#stop.signal };
    const sender = new OutboxSender(shared);
    this.#sender = sender;
    const receiver = new DiscordReceiver({
      ...shared,
      host,
      onOwnMessage: (nonce, id) => sender.onOwnMessage(nonce, id),
    });
    this.#gateway = new DiscordGateway({
      url: config.gateway_url,
      token,
      tokenEnv: config.token_env,
      store,
      log,
      onDispatch: (event, data) => receiver.onDispatch(event, data),
      onSession: (session) => receiver.onSession(session),
    });
    this.#gateway.start();
    sender.wake();
  }

  /** Tells the sender that a row may be due. */
  wake(): void {
    this.#sender?.wake();
  }

  /** Shows "typing…" in `channel` (Discord shows it for about 10 s); never an outbox row. */
  async typing(channel: string): Promise<{ ok: boolean; error: string | null }> {
    const result = await this.#rest.request("POST", `/channels/${channel}/typing`, {
      timeoutMs: Math.min(5000, this.#o.config.send_timeout_ms),
    });
    return result.kind === "ok"
      ? { ok: true, error: null }
      : { ok: false, error: failureText(result) };
  }

  /** Closes the gateway; a send in flight is aborted and recorded `unknown`. */
  async stop(): Promise<void> {
    this.#stop.abort();
    await this.#gateway?.stop();
    await this.#sender?.idle();
  }
}
