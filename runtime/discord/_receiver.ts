/**
 * Everything the gateway delivers, and the backfill when a resume was refused. A message from a
 * configured channel (or a thread of one) is admitted through the daemon's one admission path
 * under its dedupe key `discord:<channel>:<message>`, so one arriving by replay, by backfill or
 * both is one input; the channel's cursor moves past it only once it is admitted. Edits and
 * deletions are recorded as `input.edited` / `input.deleted` events on the original input;
 * threads of configured channels become channels of their own; the bot's own messages are
 * evidence for reconciliation, never input.
 *
 * @module
 */

import { camelize } from "@discordeno/utils";
import { appendEvent, lastInputEvent } from "../../store/tables/events.ts";
import { inputByDedupeKey } from "../../store/tables/inputs.ts";
import { discordDedupeKey } from "../../store/tables/dedupe_keys.ts";
import {
  advanceChannelCursor,
  channelCursors,
  ensureChannel,
  readGatewayState,
} from "../../store/tables/discord_gateway.ts";
import { isOwnMessage } from "../../store/tables/outbox.ts";
import { KlbrError } from "../core/mod.ts";
import type { GatewaySession } from "./_gateway.ts";
import {
  classify,
  describe,
  type DiscordApiMessage,
  type DiscordMessage,
  DM_PARENT,
  type InboundContext,
} from "./_inbound.ts";
import { failureText, sleep } from "./_rest.ts";
import type { OutboxSenderOptions } from "./_sender.ts";

/** What the receiver needs from the daemon. */
export interface DiscordHost {
  /** Admits one message; it must not wait for Python. Returns the input id, or an error. */
  admitDiscord(message: DiscordMessage): { inputId: string } | { error: string };
}

/** Options for {@linkcode DiscordReceiver}: the parts the sender has too, and the daemon. */
export interface DiscordReceiverOptions extends OutboxSenderOptions {
  host: DiscordHost;
  /** Called with the nonce and id of each message of the bot's own seen on the gateway. */
  onOwnMessage: (nonce: string, messageId: string) => void;
}

/** A snowflake for time `at` (ms): messages sent after `at` have larger ids. */
function snowflakeAt(at: number): string {
  return String((BigInt(Math.max(at, 1420070400000)) - 1420070400000n) << 22n);
}

const bigger = (a: string, b: string) => a.length > b.length || (a.length === b.length && a > b);

/** Admits what the gateway and the backfill deliver. */
export class DiscordReceiver {
  #o: DiscordReceiverOptions;
  #selfId: string | null;
  #guildOf = new Map<string, string | null>();

  /** Creates the receiver; the bot's id is the one saved from the last `READY`, if any. */
  constructor(options: DiscordReceiverOptions) {
    this.#o = options;
    this.#selfId = readGatewayState(options.store)?.selfId ?? null;
  }

  /** The context a message is classified in. */
  #context(): InboundContext {
    const cursors = channelCursors(this.#o.store);
    const channels = this.#o.config.channels;
    return {
      selfId: this.#selfId,
      channels,
      dms: this.#o.config.dms,
      threadParent: (id) => {
        const parent = cursors.find((c) => c.channelId === id)?.parentId ?? null;
        return parent !== null && channels.includes(parent) ? parent : null;
      },
      isOwnMessage: (id) => isOwnMessage(this.#o.store, id),
    };
  }

  /** Handles one dispatch of the gateway, in order. */
  async onDispatch(event: string, data: unknown): Promise<void> {
    const d = (data ?? {}) as Record<string, unknown>;
    switch (event) {
      case "MESSAGE_CREATE":
        // A message not admitted throws: the gateway does not count it handled, and replays it.
        await this.#message(data);
        return;
      case "MESSAGE_UPDATE":
        // Discord also sends it when a link's embed is attached or the message is pinned, with
        // the text unchanged and `edited_timestamp` null, or, for a message edited before, the
        // last edit's time: only a new time or text is an edit (`#onOriginal`).
        if (typeof d.content === "string" && typeof d.editedTimestamp === "string") {
          this.#onOriginal(d, "input.edited", { text: d.content, edited_at: d.editedTimestamp });
        }
        return;
      case "MESSAGE_DELETE":
        return this.#onOriginal(d, "input.deleted", {});
      case "THREAD_CREATE":
      case "THREAD_UPDATE":
        return this.#thread(d);
      case "THREAD_LIST_SYNC":
        for (const thread of Array.isArray(d.threads) ? d.threads : []) this.#thread(thread);
        return;
    }
  }

  /**
   * After `READY` or `RESUMED`: anchors new channels at now, and backfills the others when
   * nothing is replayed. A channel anchored here has no history to catch up: what is posted in
   * it from now on comes as the new session's dispatches, in order.
   */
  async onSession(session: GatewaySession): Promise<void> {
    if (session.selfId !== null) this.#selfId = session.selfId;
    // The channels known before this session: the anchored ones a backfill catches up (none on
    // a resumed session, whose missed events are replayed).
    const known = session.resumed ? [] : channelCursors(this.#o.store);
    const anchor = snowflakeAt(Date.now());
    for (const channel of this.#o.config.channels) {
      ensureChannel(this.#o.store, channel, { anchor });
    }
    if (session.resumed) return;
    for (const cursor of known) {
      if (this.#o.signal.aborted) return;
      if (cursor.lastMessageId === null) continue;
      if (cursor.parentId === DM_PARENT) {
        if (!this.#o.config.dms) continue;
        this.#guildOf.set(cursor.channelId, null);
      } else if (
        cursor.parentId !== null && !this.#o.config.channels.includes(cursor.parentId)
      ) continue;
      await this.#backfill(cursor.channelId, cursor.lastMessageId);
    }
  }

  /**
   * Classifies, describes and admits one message. `guildId` is given for a backfilled one
   * (history carries no guild): `null` for a direct message, `undefined` when not known, which
   * is taken as not a direct message.
   *
   * @throws {KlbrError} when admission refuses the message (it is closed): its channel's cursor
   * does not move for it, and the gateway saves no sequence past it until a replay admits it.
   */
  async #message(
    data: unknown,
    backfill?: { guildId: string | null | undefined },
  ): Promise<"admitted" | "skipped"> {
    const { store, host } = this.#o;
    const context = this.#context();
    // History carries no guild: a backfilled message is a direct message only when its
    // channel is known to be one.
    const sorted = classify(data, {
      ...context,
      dms: context.dms && (backfill === undefined || backfill.guildId === null),
    });
    if (sorted.kind === "own") {
      const nonce = sorted.message.nonce;
      if (nonce !== undefined && nonce !== null) {
        this.#o.onOwnMessage(String(nonce), sorted.message.id);
      }
      return "skipped";
    }
    if (sorted.kind === "unreadable") {
      // A shape this build does not know: never admitted, but never lost without a word.
      this.#o.log.warn(
        "discord.message_unreadable",
        `discord: cannot read message ${sorted.id} in channel ${sorted.channelId}: ${sorted.reason}; it was not admitted`,
        { message: sorted.id, channel: sorted.channelId },
      );
      return "skipped";
    }
    if (sorted.kind === "ignore") return "skipped";
    const m: DiscordApiMessage = backfill === undefined ? sorted.message : {
      ...sorted.message,
      guildId: sorted.message.guildId ?? backfill.guildId,
    };
    if (backfill === undefined) this.#guildOf.set(m.channelId, m.guildId ?? null);
    const message = await describe(m, sorted.threadOf, context, {
      stateDir: store.stateDir,
      maxBytes: this.#o.config.attachment_max_bytes,
      timeoutMs: this.#o.config.send_timeout_ms,
      signal: this.#o.signal,
    });
    if (backfill !== undefined && backfill.guildId === undefined) message.body.dm = false;
    const outcome = host.admitDiscord(message);
    if ("error" in outcome) {
      // Admission is closed (the daemon drains, the session stopped, the store is damaged):
      // the message is not skipped, the next resume replays it.
      throw new KlbrError(
        "shutting_down",
        `cannot admit discord message ${m.id}: ${outcome.error}; it is admitted when the gateway replays it`,
      );
    }
    if (message.body.dm && sorted.threadOf === null && !context.channels.includes(m.channelId)) {
      // Recorded as a direct-message channel: the agent may answer in it, a backfill pages it.
      ensureChannel(store, m.channelId, { parentId: DM_PARENT });
    }
    advanceChannelCursor(store, m.channelId, m.id);
    return "admitted";
  }

  /**
   * Records an edit or a deletion on the input it concerns; unknown messages change nothing,
   * and neither does an edit equal (text and `edited_at`) to the last one recorded.
   */
  #onOriginal(
    d: Record<string, unknown>,
    kind: "input.edited" | "input.deleted",
    fields: Record<string, unknown>,
  ): void {
    const { store } = this.#o;
    if (typeof d.id !== "string" || typeof d.channelId !== "string") return;
    let key: string;
    try {
      key = discordDedupeKey(d.channelId, d.id);
    } catch {
      return;
    }
    const input = inputByDedupeKey(store, "discord", key);
    if (input === undefined) return;
    if (kind === "input.edited") {
      const last = lastInputEvent(store, input.session, {
        kind,
        inputId: input.id,
        since: input.seq,
      })?.body as { text?: unknown; edited_at?: unknown } | undefined;
      if (last?.text === fields.text && last?.edited_at === fields.edited_at) return;
    }
    const body = { input_id: input.id, message_id: d.id, ...fields } as never;
    // The type written out, so the records test finds each type's writer in the source.
    appendEvent(
      store,
      input.session,
      kind === "input.edited" ? "input.edited" : "input.deleted",
      body,
    );
  }

  #thread(thread: unknown): void {
    const t = (thread ?? {}) as { id?: unknown; parentId?: unknown; guildId?: unknown };
    if (typeof t.id !== "string" || typeof t.parentId !== "string") return;
    if (!this.#o.config.channels.includes(t.parentId) || !/^[0-9]{1,20}$/.test(t.id)) return;
    // A thread's id is the time it was made: every message in it is later.
    ensureChannel(this.#o.store, t.id, { parentId: t.parentId, anchor: t.id });
    if (typeof t.guildId === "string") this.#guildOf.set(t.id, t.guildId);
  }

  /** Pages `GET /channels/{id}/messages?after=` until caught up, admitting each message. */
  async #backfill(channelId: string, after: string): Promise<void> {
    const { rest, log, config } = this.#o;
    const guildId = await this.#guild(channelId);
    let cursor = after;
    let admitted = 0;
    let pages = 0;
    const maxPages = Math.ceil(config.backfill_max_messages / 100) + 10;
    for (let tries = 0; tries < 5 && admitted < config.backfill_max_messages && pages < maxPages;) {
      const result = await rest.request(
        "GET",
        `/channels/${channelId}/messages?after=${cursor}&limit=100`,
      );
      if (result.kind === "rate_limited") {
        tries++;
        await sleep(result.retryAfterMs, this.#o.signal);
        continue;
      }
      if (result.kind !== "ok" || !Array.isArray(result.json)) {
        log.warn(
          "discord.backfill_failed",
          `discord: cannot backfill channel ${channelId}: ${failureText(result)}`,
          { channel: channelId },
        );
        return;
      }
      pages++;
      const page = (camelize(result.json) as { id: string }[])
        .filter((m) => typeof m?.id === "string")
        .sort((a, b) => (bigger(a.id, b.id) ? 1 : -1));
      for (const m of page) {
        if (this.#o.signal.aborted) return;
        if (await this.#message({ channelId, ...m }, { guildId }) === "admitted") admitted++;
        if (bigger(m.id, cursor)) cursor = m.id;
      }
      if (page.length < 100) break;
    }
    log.info(
      "discord.backfilled",
      `discord: backfilled channel ${channelId}: ${admitted} message(s) in ${pages} page(s)`,
      { channel: channelId, admitted, pages },
    );
  }

  /** The guild of a channel (`null` for a direct message), asked of Discord once. */
  async #guild(channelId: string): Promise<string | null | undefined> {
    if (this.#guildOf.has(channelId)) return this.#guildOf.get(channelId);
    const result = await this.#o.rest.request("GET", `/channels/${channelId}`);
    if (result.kind !== "ok") return undefined;
    const channel = result.json as { type?: unknown; guild_id?: unknown };
    const guild = typeof channel.guild_id === "string" ? channel.guild_id : null;
    this.#guildOf.set(channelId, guild);
    return guild;
  }
}
