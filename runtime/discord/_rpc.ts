/**
 * The agent's Discord effects and its explicit social decisions, as RPCs of a session's
 * workbench: `discord.send` and `discord.react` write an outbox row (committed before the RPC
 * answers) and wake the sender, never waiting for Discord; `discord.typing` is best effort and
 * never an outbox row; `discord.status` reads a row; `input.ignore` records that the agent read
 * an input of its frame and chose not to answer it.
 *
 * A reply names the message it answers (`message_reference`): by default the newest Discord
 * input the turn answers in that channel, so its reply state is consumed (`input.replied`) only
 * once that row is `confirmed`.
 *
 * The daemon binds these per session (`runtime/daemon/_session_rpc.ts`); a job is refused them.
 *
 * @module
 */

import { z } from "zod";
import { appendEvent } from "../../store/tables/events.ts";
import { getFrame } from "../../store/tables/frames.ts";
import { getInput, type InputRecord } from "../../store/tables/inputs.ts";
import { derivedEffectKey } from "../../store/tables/effects.ts";
import { type EnqueueOutbox, enqueueOutbox, getOutbox } from "../../store/tables/outbox.ts";
import type { Store } from "../../store/store.ts";
import { faultPoint, KlbrError } from "../core/mod.ts";
import { defineRpc, type RpcCall } from "../kernel/mod.ts";
import { routedConversations } from "../behavior/mod.ts";

const Snowflake = z.string().regex(/^[0-9]{1,20}$/);
const InputId = z.string().regex(/^in_[0-9A-Z]{26}$/);

/** An idempotency key given by the caller: it holds across the session. */
const Key = z.string().min(1).max(200);

const DiscordSendParams = z.strictObject({
  text: z.string(),
  channel: Snowflake.optional(),
  /** A message id, an input id, or `false` for no reply anchor. */
  reply_to: z.union([Snowflake, InputId, z.literal(false)]).optional(),
  key: Key.optional(),
});

const DiscordReactParams = z.strictObject({
  message: z.union([Snowflake, InputId]),
  emoji: z.string().min(1).max(100).refine((e) => !/[\s/]/.test(e), "has a space or a slash"),
  channel: Snowflake.optional(),
  key: Key.optional(),
});

const DiscordTypingParams = z.strictObject({ channel: Snowflake.optional() });
const DiscordStatusParams = z.strictObject({ outbox_id: z.string().min(1) });
const IgnoreParams = z.strictObject({
  input: InputId,
  reason: z.string().min(1).max(500),
});

/** The transport, as the handlers see it. */
export interface DiscordEffects {
  /** Configured channels and known threads of them. */
  channels(): readonly string[];
  /** Wakes the sender. */
  wake(): void;
  /** Shows "typing…" in `channel` for a few seconds; best effort. */
  typing(channel: string): Promise<{ ok: boolean; error: string | null }>;
}

/** What the handlers need: the session, its store and the transport, if Discord is on. */
export interface DiscordRpcOptions {
  store: Store;
  session: string;
  /** `undefined` when the configuration has no `discord` node. */
  discord: DiscordEffects | undefined;
  /** The frame whose turn is running. */
  frame: () => { id: string; routing: unknown } | null;
}

/** The Discord channel and message of a Discord input, from its dedupe key. */
function discordOf(input: InputRecord | undefined): { channel: string; message: string } | null {
  const m = input?.sourceKind === "discord" ? input.dedupeKey.match(/^discord:(\d+):(\d+)$/) : null;
  return m ? { channel: m[1], message: m[2] } : null;
}

/** The inputs the running frame answers (not those it ignored), newest last. */
function answeredInputs(store: Store, frame: { id: string; routing: unknown } | null) {
  if (frame === null) return [];
  const ignored = new Set(
    ((frame.routing as { ignored?: { input_id?: string }[] })?.ignored ?? []).map((i) =>
      i.input_id
    ),
  );
  return (getFrame(store, frame.id)?.inputIds ?? [])
    .filter((id) => !ignored.has(id))
    .map((id) => getInput(store, id))
    .filter((i): i is InputRecord => i !== undefined);
}

/** The Discord transport, or `invalid_config` when the configuration has none. */
function transportOf(options: DiscordRpcOptions, action: string): DiscordEffects {
  if (options.discord === undefined) {
    throw new KlbrError(
      "invalid_config",
      `cannot ${action}: discord is not configured (got no discord node in the configuration)`,
    );
  }
  return options.discord;
}

/** The channel named, else the one discord conversation this turn answers; configured or refused. */
function channelOf(options: DiscordRpcOptions, action: string, given: string | undefined): string {
  const discord = transportOf(options, action);
  const frame = options.frame();
  let channel = given;
  if (channel === undefined) {
    const routed = routedConversations(frame?.routing).find((c) => c.startsWith("discord:"));
    if (routed === undefined) {
      throw new KlbrError(
        "invalid_input",
        `cannot ${action}: this turn answers no discord conversation; pass channel= (got ${
          JSON.stringify(routedConversations(frame?.routing))
        })`,
      );
    }
    channel = routed.slice("discord:".length);
  }
  if (!discord.channels().includes(channel)) {
    throw new KlbrError(
      "invalid_input",
      `cannot ${action}: channel ${channel} is not configured (got ${channel})`,
    );
  }
  return channel;
}

/**
 * Commits an outbox row of the session, in the conversation of its channel and for the running
 * frame (or finds the one its key already wrote), then wakes the lanes and the sender. The key
 * is the caller's, else one derived from the frame, the destination and the body: the same send
 * repeated in one turn is one row, one nonce, one message.
 */
function enqueue(
  options: DiscordRpcOptions,
  row: Omit<EnqueueOutbox, "session" | "conversation" | "frameId"> & { cellId: string | null },
) {
  const frameId = options.frame()?.id ?? null;
  const key = row.key ?? derivedEffectKey({ frameId, cellId: row.cellId }, [
    row.kind ?? "message",
    JSON.stringify(row.destination),
    row.body,
  ]);
  const written = enqueueOutbox(options.store, {
    ...row,
    session: options.session,
    conversation: `discord:${row.destination.channel_id}`,
    frameId,
    key,
  });
  // The row is committed and the cell has not heard of it: a crash here must not queue it twice.
  faultPoint("enqueue-before-reply");
  options.discord?.wake();
  return { outbox_id: written.id, state: written.state, duplicate: written.duplicate };
}

/** The message a send answers: an input named, a message named, or the newest input answered here. */
function replyAnchor(
  options: DiscordRpcOptions,
  replyTo: string | false | undefined,
  channel: string,
): { message: string; input: string | null } | null {
  if (typeof replyTo === "string" && replyTo.startsWith("in_")) {
    const input = getInput(options.store, replyTo);
    const where = discordOf(input);
    if (where === null || where.channel !== channel) {
      throw new KlbrError(
        "invalid_input",
        `cannot send to discord: reply_to ${replyTo} is not a discord input of channel ${channel} (got ${replyTo})`,
      );
    }
    return { message: where.message, input: input!.id };
  }
  if (typeof replyTo === "string") return { message: replyTo, input: null };
  if (replyTo === undefined) {
    const newest = answeredInputs(options.store, options.frame())
      .filter((i) => discordOf(i)?.channel === channel).pop();
    if (newest !== undefined) return { message: discordOf(newest)!.message, input: newest.id };
  }
  return null;
}

/** `discord.send`: an outbox row of text, replying to its anchor when it has one. */
function send(
  options: DiscordRpcOptions,
  p: z.output<typeof DiscordSendParams>,
  cell: string | null,
) {
  transportOf(options, "send to discord");
  // Discord counts content in code points (an emoji is one), not UTF-16 units as `.length` does.
  const chars = [...p.text].length;
  if (p.text.trim() === "" || chars > 2000) {
    throw new KlbrError(
      "invalid_input",
      `cannot send to discord: text must be 1-2000 characters and not blank (got ${chars} characters)`,
    );
  }
  const channel = channelOf(options, "send to discord", p.channel);
  const anchor = replyAnchor(options, p.reply_to, channel);
  return enqueue(options, {
    destination: anchor === null
      ? { channel_id: channel }
      : { channel_id: channel, reply_to: anchor.message },
    body: p.text,
    inputId: anchor?.input ?? null,
    cellId: cell,
    key: p.key,
  });
}

/** `discord.react`: an outbox row of one emoji on a message, named directly or by its input. */
function react(
  options: DiscordRpcOptions,
  p: z.output<typeof DiscordReactParams>,
  cell: string | null,
) {
  transportOf(options, "react on discord");
  let channel = p.channel;
  let message = p.message;
  if (p.message.startsWith("in_")) {
    const where = discordOf(getInput(options.store, p.message));
    if (where === null) {
      throw new KlbrError(
        "invalid_input",
        `cannot react on discord: ${p.message} is not a discord input (got ${p.message})`,
      );
    }
    channel = where.channel;
    message = where.message;
  }
  channel = channelOf(options, "react on discord", channel);
  return enqueue(options, {
    destination: { channel_id: channel, message_id: message },
    body: p.emoji,
    kind: "reaction",
    inputId: p.message.startsWith("in_") ? p.message : null,
    cellId: cell,
    key: p.key,
  });
}

/** `discord.typing`: best effort, never an outbox row. */
async function typing(options: DiscordRpcOptions, p: z.output<typeof DiscordTypingParams>) {
  return await transportOf(options, "show typing on discord").typing(
    channelOf(options, "show typing on discord", p.channel),
  );
}

/** `discord.status`: one outbox row of this session, as the cell reads it. */
function status(options: DiscordRpcOptions, p: z.output<typeof DiscordStatusParams>) {
  const row = getOutbox(options.store, p.outbox_id);
  if (row === undefined || row.session !== options.session) {
    throw new KlbrError(
      "not_found",
      `cannot read discord send status: no outbox message ${p.outbox_id} (got ${
        JSON.stringify(p.outbox_id)
      })`,
    );
  }
  return {
    outbox_id: row.id,
    kind: row.kind,
    state: row.state,
    attempts: row.attempts,
    remote_id: row.remoteId,
    error: row.error,
    channel_id: row.destination.channel_id,
    reply_to: row.destination.reply_to ?? null,
    input_id: row.inputId,
    nonce: row.nonce,
    tries: row.tries,
  };
}

/** `input.ignore`: records that the agent read an input of its frame and chose not to answer. */
function ignore(options: DiscordRpcOptions, p: z.output<typeof IgnoreParams>) {
  const frame = options.frame();
  const inFrame = frame === null ? [] : getFrame(options.store, frame.id)?.inputIds ?? [];
  if (frame === null || !inFrame.includes(p.input)) {
    throw new KlbrError(
      "invalid_input",
      `cannot ignore input: ${p.input} is not an input of this turn's frame (got ${p.input})`,
    );
  }
  const seq = appendEvent(options.store, options.session, "input.ignored", {
    input_id: p.input,
    frame_id: frame.id,
    reason: p.reason,
    by: "agent",
  });
  return { input_id: p.input, seq };
}

const Receipt = z.strictObject({
  outbox_id: z.string(),
  state: z.string(),
  duplicate: z.boolean(),
});
const ROLES = ["workbench"] as const;
const JOB_NEVER_SPEAKS =
  "a job never speaks to a conversation; return a value and the agent is woken with it";

/**
 * `discord.send`: an outbox row of text, committed before the answer; never waits for Discord.
 *
 * @throws {KlbrError} `invalid_config` when Discord is not configured; `invalid_input` for bad
 * text, a channel not configured, no channel to default to or a bad `reply_to`.
 */
export const discordSendRpc = defineRpc({
  name: "discord.send",
  summary: "Queues a Discord message (an outbox row committed before the answer); replies to " +
    "the newest input the frame answers in that channel unless `reply_to` says otherwise.",
  roles: ROLES,
  refusal: JOB_NEVER_SPEAKS,
  action: "send to discord",
  args: DiscordSendParams,
  reply: Receipt,
  handler: (p, call: RpcCall<DiscordRpcOptions>) => send(call.deps, p, call.cell),
});

/**
 * The `discord.*` and `input.ignore` RPCs of a session's cells, bound to
 * {@linkcode DiscordRpcOptions}.
 *
 * @example
 * ```ts
 * const rpc = bindRpcs(discordRpcs, { store, session, discord, frame, notify });
 * ```
 */
export const discordRpcs = [
  discordSendRpc,
  defineRpc({
    name: "discord.react",
    summary: "Queues one emoji reaction on a message, named directly or by its input.",
    roles: ROLES,
    action: "react on discord",
    args: DiscordReactParams,
    reply: Receipt,
    handler: (p, call: RpcCall<DiscordRpcOptions>) => react(call.deps, p, call.cell),
  }),
  defineRpc({
    name: "discord.typing",
    summary: "Shows typing in a channel for a few seconds; best effort, never an outbox row.",
    roles: ROLES,
    action: "show typing on discord",
    args: DiscordTypingParams,
    reply: z.strictObject({ ok: z.boolean(), error: z.string().nullable() }),
    handler: (p, call: RpcCall<DiscordRpcOptions>) => typing(call.deps, p),
  }),
  defineRpc({
    name: "discord.status",
    summary: "Reads the state of one outbox row of this session (`docs/discord.md`).",
    roles: ROLES,
    action: "read discord send status",
    args: DiscordStatusParams,
    reply: z.object({ outbox_id: z.string(), kind: z.string(), state: z.string() }),
    handler: (p, call: RpcCall<DiscordRpcOptions>) => status(call.deps, p),
  }),
  defineRpc({
    name: "input.ignore",
    summary: "Records `input.ignored` for an input of the running frame: read, not answered.",
    roles: ROLES,
    action: "ignore input",
    args: IgnoreParams,
    reply: z.strictObject({ input_id: z.string(), seq: z.int() }),
    handler: (p, call: RpcCall<DiscordRpcOptions>) => ignore(call.deps, p),
  }),
];
