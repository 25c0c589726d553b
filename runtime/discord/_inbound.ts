/**
 * What a Discord message becomes before admission: parsed (camel-cased, from the gateway or from
 * history), classified (ignored: a bot, the bot itself, a system message such as a join or a
 * pin, a channel that is neither configured nor a thread of one nor a direct message, and a
 * direct message under `dms #false`; admitted otherwise) and described in the input's body —
 * the text, where it was said, whether it mentions the bot, is a direct message or replies to
 * the bot, its thread's parent, and its attachments, each fetched into a kept artifact (never
 * evicted) when small enough. A forward's text and attachments are those of the message it
 * forwards (its snapshot), its text marked as forwarded; a forward is no reply.
 *
 * @module
 */

import { z } from "zod";
import { keepAttachment } from "../../store/tables/artifacts.ts";
import { describeIssues } from "../core/mod.ts";

const Snowflake = z.string().regex(/^[0-9]{1,20}$/);

const Attachment = z.object({
  id: Snowflake,
  filename: z.string(),
  size: z.number().int().nonnegative(),
  url: z.string(),
  contentType: z.string().optional(),
});

/** Discord's "Message Reference Types": FORWARD (1) points at a message forwarded, not answered. */
const FORWARD = 1;

/** A message as the gateway (camelized by the library) or `camelize`d history gives it. */
export const DiscordApiMessage = z.object({
  id: Snowflake,
  channelId: Snowflake,
  guildId: Snowflake.optional().nullable(),
  content: z.string().default(""),
  timestamp: z.string(),
  author: z.object({ id: Snowflake, username: z.string().min(1), bot: z.boolean().optional() }),
  mentions: z.array(z.object({ id: Snowflake })).default([]),
  /** `type` 0 (DEFAULT, absent in older payloads) for a reply, 1 (FORWARD) for a forward. */
  messageReference: z.object({
    messageId: Snowflake.optional(),
    type: z.number().int().optional(),
  }).optional().nullable(),
  referencedMessage: z.object({ author: z.object({ id: Snowflake }) }).optional().nullable(),
  attachments: z.array(Attachment).default([]),
  /**
   * A forward's copy of the forwarded message (Discord's "Message Snapshot Object": a subset of
   * its fields, no author); the forward's own `content` is empty.
   */
  messageSnapshots: z.array(z.object({
    message: z.object({
      content: z.string().default(""),
      attachments: z.array(Attachment).default([]),
    }),
  })).default([]),
  nonce: z.union([z.string(), z.number()]).optional().nullable(),
  /** Discord's message type; absent is taken as DEFAULT (0). */
  type: z.number().int().optional(),
});

/** A parsed message. */
export type DiscordApiMessage = z.infer<typeof DiscordApiMessage>;

/** One attachment as named in an input: fetched into `artifact`, or `skipped` with a reason. */
export interface InputAttachment {
  id: string;
  filename: string;
  size: number;
  content_type: string | null;
  artifact: string | null;
  skipped: string | null;
}

/** The body of a Discord input: the text and what attention and the agent need about it. */
export interface DiscordInputBody {
  text: string;
  message_id: string;
  channel_id: string;
  guild_id: string | null;
  /** A direct message (no guild). */
  dm: boolean;
  /** The bot is mentioned. */
  mentioned: boolean;
  /** The message it replies to, and whether that message is the bot's. */
  reply_to: { message_id: string; to_bot: boolean } | null;
  /** For a message in a thread: the configured channel the thread belongs to. */
  thread_of: string | null;
  attachments: InputAttachment[];
}

/** A message ready for admission. */
export interface DiscordMessage {
  channelId: string;
  messageId: string;
  authorId: string;
  username: string;
  /** The text as admitted (`body.text`): a forward's carries the forwarded text. */
  content: string;
  /** The message timestamp, in ms since the epoch. */
  receivedAt: number;
  body: DiscordInputBody;
}

/** The `parentId` a direct-message channel is recorded under (never a snowflake). */
export const DM_PARENT = "@dm";

/** Where a message may be admitted from, and who the bot is. */
export interface InboundContext {
  selfId: string | null;
  channels: readonly string[];
  /** Direct messages (no guild) are admitted from any channel (config `dms`). */
  dms: boolean;
  /** The thread's parent, for a known thread of a configured channel. */
  threadParent: (channelId: string) => string | null;
  /** Whether `messageId` is one the bot posted (a reply to it addresses the bot). */
  isOwnMessage: (messageId: string) => boolean;
}

/**
 * The message types a person writes: DEFAULT (0) and REPLY (19). Every other type is Discord's
 * system message (a member joined, a message pinned, a thread created, a boost, …): said by no
 * one to the bot, and a pin's `message_reference` names the pinned message, which would read as
 * a reply to the bot.
 */
const SPOKEN_TYPES: readonly number[] = [0, 19];

/**
 * How a message is handled: admitted, evidence about our own send, ignored (and why), or
 * unreadable (a payload this build does not know: which message, and why).
 */
export type Classified =
  | { kind: "admit"; message: DiscordApiMessage; threadOf: string | null }
  | { kind: "own"; message: DiscordApiMessage }
  | { kind: "ignore"; reason: string }
  | { kind: "unreadable"; reason: string; id: string; channelId: string };

/** The message's and its channel's ids, as far as a payload that does not parse gives them. */
function idsOf(data: unknown): { id: string; channelId: string } {
  const raw = (data ?? {}) as { id?: unknown; channelId?: unknown };
  return { id: String(raw.id ?? "?"), channelId: String(raw.channelId ?? "?") };
}

/**
 * Sorts a message: bots, the bot itself and Discord's system messages are never admitted; a
 * configured channel or a thread of one is; a direct message (no guild) is when `context.dms`;
 * other channels are not.
 */
export function classify(data: unknown, context: InboundContext): Classified {
  const parsed = DiscordApiMessage.safeParse(data);
  if (!parsed.success) {
    return { kind: "unreadable", reason: describeIssues(parsed.error), ...idsOf(data) };
  }
  const m = parsed.data;
  if (context.selfId !== null && m.author.id === context.selfId) return { kind: "own", message: m };
  if (m.author.bot === true) return { kind: "ignore", reason: "from a bot" };
  if (m.type !== undefined && !SPOKEN_TYPES.includes(m.type)) {
    return { kind: "ignore", reason: `a system message (type ${m.type})` };
  }
  if (context.channels.includes(m.channelId)) return { kind: "admit", message: m, threadOf: null };
  const threadOf = context.threadParent(m.channelId);
  if (threadOf !== null) return { kind: "admit", message: m, threadOf };
  if (m.guildId !== undefined && m.guildId !== null) {
    return { kind: "ignore", reason: "not a configured channel" };
  }
  return context.dms
    ? { kind: "admit", message: m, threadOf: null }
    : { kind: "ignore", reason: "a direct message, and dms is #false" };
}

/** Whether `m` addresses the bot: a mention of it (in `mentions` or the text). */
function mentions(m: DiscordApiMessage, selfId: string | null): boolean {
  if (selfId === null) return false;
  return m.mentions.some((u) => u.id === selfId) || m.content.includes(`<@${selfId}>`) ||
    m.content.includes(`<@!${selfId}>`);
}

/**
 * Builds the admission record of `m`, fetching each attachment of at most `maxBytes` into an
 * artifact (a failed or oversized one is named with the reason it was skipped).
 */
export async function describe(
  m: DiscordApiMessage,
  threadOf: string | null,
  context: InboundContext,
  fetchOptions: { stateDir: string; maxBytes: number; timeoutMs: number; signal: AbortSignal },
): Promise<DiscordMessage> {
  // A forward names the forwarded message in `message_reference` too; it answers no one.
  const forwarded = m.messageReference?.type === FORWARD;
  const replyId = forwarded ? null : m.messageReference?.messageId ?? null;
  const toBot = replyId !== null && (
    (context.selfId !== null && m.referencedMessage?.author.id === context.selfId) ||
    context.isOwnMessage(replyId)
  );
  const attachments: InputAttachment[] = [];
  const snapshots = forwarded ? m.messageSnapshots.map((s) => s.message) : [];
  for (const a of [...m.attachments, ...snapshots.flatMap((s) => s.attachments)]) {
    attachments.push({
      id: a.id,
      filename: a.filename,
      size: a.size,
      content_type: a.contentType ?? null,
      ...(await fetchAttachment(a, fetchOptions)),
    });
  }
  const at = Date.parse(m.timestamp);
  const text = [
    ...(m.content === "" ? [] : [m.content]),
    ...snapshots.map((s) => s.content === "" ? FORWARDED : `${FORWARDED}\n${s.content}`),
  ].join("\n");
  return {
    channelId: m.channelId,
    messageId: m.id,
    authorId: m.author.id,
    username: m.author.username,
    content: text,
    receivedAt: Number.isFinite(at) && at >= 0 ? at : Date.now(),
    body: {
      text,
      message_id: m.id,
      channel_id: m.channelId,
      guild_id: m.guildId ?? null,
      dm: m.guildId === undefined || m.guildId === null,
      mentioned: mentions(m, context.selfId),
      reply_to: replyId === null ? null : { message_id: replyId, to_bot: toBot },
      thread_of: threadOf,
      attachments,
    },
  };
}

/** What a forward's text starts with, before the forwarded message's own text. */
const FORWARDED = "[forwarded message]";

async function fetchAttachment(
  a: { url: string; size: number },
  o: { stateDir: string; maxBytes: number; timeoutMs: number; signal: AbortSignal },
): Promise<{ artifact: string | null; skipped: string | null }> {
  if (a.size > o.maxBytes) {
    return { artifact: null, skipped: `over attachment_max_bytes (${o.maxBytes} bytes)` };
  }
  try {
    const response = await fetch(a.url, {
      signal: AbortSignal.any([AbortSignal.timeout(o.timeoutMs), o.signal]),
    });
    if (!response.ok) {
      await response.body?.cancel();
      return { artifact: null, skipped: `download answered HTTP ${response.status}` };
    }
    const data = new Uint8Array(await response.arrayBuffer());
    if (data.length > o.maxBytes) {
      return { artifact: null, skipped: `over attachment_max_bytes (${o.maxBytes} bytes)` };
    }
    const ref = await keepAttachment(o.stateDir, data);
    return { artifact: ref.id, skipped: null };
  } catch (error) {
    return {
      artifact: null,
      skipped: `download failed: ${error instanceof Error ? error.message : error}`.slice(0, 200),
    };
  }
}
