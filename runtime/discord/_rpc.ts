/**
 * The `discord.send` and `discord.status` RPCs of a session's workbench. A send writes a
 * `pending` outbox row (committed before the RPC answers) and wakes the sender; it never
 * waits for Discord.
 *
 * The daemon binds these per session (`runtime/daemon/_session_rpc.ts`).
 *
 * @module
 */

import { z } from "zod";
import { enqueueOutbox, getOutbox } from "../../store/outbox.ts";
import type { Store } from "../../store/store.ts";
import { KlbrError } from "../core/mod.ts";
import type { RpcHandler } from "../kernel/mod.ts";
import { routedConversations } from "../behavior/mod.ts";

const Snowflake = z.string().regex(/^[0-9]{1,20}$/);

const DiscordSendParams = z.strictObject({
  text: z.string(),
  channel: Snowflake.optional(),
  reply_to: Snowflake.optional(),
});

const DiscordStatusParams = z.strictObject({ outbox_id: z.string().min(1) });

/** What the handlers need: the session, its store and the transport, if Discord is on. */
export interface DiscordRpcOptions {
  store: Store;
  session: string;
  /** `undefined` when the configuration has no `discord` node. */
  discord: { channels: readonly string[]; wake(): void } | undefined;
  /** The frame whose turn is running, for the default channel. */
  frame: () => { id: string; routing: unknown } | null;
  /** Wakes lane clients of the session. */
  notify: () => void;
}

/**
 * Returns the `discord.*` RPC handlers for one session's workbench.
 *
 * @throws {KlbrError} (from a handler) `invalid_config` when Discord is not configured;
 *   `invalid_input` for bad text, a channel not configured or no channel to default to;
 *   `not_found` for an unknown outbox id.
 */
export function discordHandlers(options: DiscordRpcOptions): Record<string, RpcHandler> {
  const { store, session } = options;
  const send = (params: Record<string, unknown>, cell: string | null) => {
    const discord = options.discord;
    if (discord === undefined) {
      throw new KlbrError(
        "invalid_config",
        "cannot send to discord: discord is not configured (got no discord node in the configuration)",
      );
    }
    const parsed = DiscordSendParams.safeParse(params);
    if (!parsed.success) {
      const field = String(parsed.error.issues[0].path[0] ?? "params");
      throw new KlbrError(
        "invalid_input",
        `cannot send to discord: ${field} is invalid (got ${
          JSON.stringify(params[field])?.slice(0, 100)
        })`,
      );
    }
    const { text, reply_to } = parsed.data;
    if (text.trim() === "" || text.length > 2000) {
      throw new KlbrError(
        "invalid_input",
        `cannot send to discord: text must be 1-2000 characters and not blank (got ${text.length} characters)`,
      );
    }
    const frame = options.frame();
    let channel = parsed.data.channel;
    if (channel === undefined) {
      const routed = routedConversations(frame?.routing).find((c) => c.startsWith("discord:"));
      if (routed === undefined) {
        throw new KlbrError(
          "invalid_input",
          `cannot send to discord: this turn answers no discord conversation; pass channel= (got ${
            JSON.stringify(routedConversations(frame?.routing))
          })`,
        );
      }
      channel = routed.slice("discord:".length);
    }
    if (!discord.channels.includes(channel)) {
      throw new KlbrError(
        "invalid_input",
        `cannot send to discord: channel ${channel} is not configured (got ${channel})`,
      );
    }
    const row = enqueueOutbox(store, {
      session,
      conversation: `discord:${channel}`,
      destination: reply_to === undefined
        ? { channel_id: channel }
        : { channel_id: channel, reply_to },
      body: text,
      frameId: frame?.id ?? null,
      cellId: cell,
    });
    options.notify();
    discord.wake();
    return { outbox_id: row.id, state: row.state };
  };
  const status = (params: Record<string, unknown>) => {
    const parsed = DiscordStatusParams.safeParse(params);
    const id = parsed.success ? parsed.data.outbox_id : undefined;
    const row = id === undefined ? undefined : getOutbox(store, id);
    if (row === undefined || row.session !== session) {
      throw new KlbrError(
        "not_found",
        `cannot read discord send status: no outbox message ${id} (got ${
          JSON.stringify(params.outbox_id)
        })`,
      );
    }
    return {
      outbox_id: row.id,
      state: row.state,
      attempts: row.attempts,
      remote_id: row.remoteId,
      error: row.error,
      channel_id: row.destination.channel_id,
    };
  };
  return {
    "discord.send": (params, ctx) => Promise.resolve().then(() => send(params, ctx.cell)),
    "discord.status": (params) => Promise.resolve().then(() => status(params)),
  };
}
