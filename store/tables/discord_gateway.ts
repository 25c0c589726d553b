/**
 * The Discord gateway's durable resume state and the channels' backfill cursors: the tables
 * `discord_gateway` (one row: session id, resume URL, last sequence, the bot's own user id) and
 * `discord_channels` (each configured channel and known thread, with the id of the newest
 * message admitted from it). This module is their only writer.
 *
 * The sequence is saved only after the dispatch it numbers has been admitted, and a cursor only
 * after its message has been admitted, so a resume or a backfill from here can only repeat what
 * was admitted (deduplicated at admission), never skip what was not.
 *
 * @module
 */

import type { Store } from "../store.ts";

/** What a new connection needs to resume the last session. */
export interface GatewayState {
  sessionId: string | null;
  resumeUrl: string | null;
  seq: number | null;
  selfId: string | null;
  updatedAt: number;
}

/** One channel the transport listens in: configured (`parentId` null) or a thread of one. */
export interface ChannelCursor {
  channelId: string;
  parentId: string | null;
  /** The newest message id admitted (or the anchor set when the channel was first seen). */
  lastMessageId: string | null;
}

/** Returns the saved gateway state, or `undefined` before the first `READY`. */
export function readGatewayState(store: Store): GatewayState | undefined {
  const row = store.statement("SELECT * FROM discord_gateway WHERE id = 1").get() as {
    session_id: string | null;
    resume_url: string | null;
    seq: number | null;
    self_id: string | null;
    updated_at: number;
  } | undefined;
  return row === undefined ? undefined : {
    sessionId: row.session_id,
    resumeUrl: row.resume_url,
    seq: row.seq,
    selfId: row.self_id,
    updatedAt: row.updated_at,
  };
}

/**
 * Saves a new session (after `READY`): its id, resume URL, the bot's user id and its sequence.
 * When it returns, a restart resumes this session.
 */
export function saveGatewaySession(
  store: Store,
  session: {
    sessionId: string;
    resumeUrl: string | null;
    selfId: string | null;
    seq: number | null;
  },
): void {
  store.statement(
    `INSERT INTO discord_gateway (id, session_id, resume_url, seq, self_id, updated_at)
     VALUES (1, ?, ?, ?, ?, ?)
     ON CONFLICT (id) DO UPDATE SET session_id = excluded.session_id,
       resume_url = excluded.resume_url, seq = excluded.seq,
       self_id = COALESCE(excluded.self_id, self_id), updated_at = excluded.updated_at`,
  ).run(session.sessionId, session.resumeUrl, session.seq, session.selfId, store.clock());
}

/**
 * Saves the last sequence of `sessionId`, after the dispatch it numbers was handled. A
 * sequence of another session (a stale connection) or lower than the saved one changes
 * nothing. Returns whether it was saved.
 */
export function saveGatewaySeq(store: Store, sessionId: string, seq: number): boolean {
  return store.statement(
    `UPDATE discord_gateway SET seq = ?, updated_at = ?
     WHERE id = 1 AND session_id = ? AND (seq IS NULL OR seq < ?)`,
  ).run(seq, store.clock(), sessionId, seq).changes === 1;
}

/**
 * Records a channel (or a thread of `parentId`) with `anchor` as its cursor when it has none
 * yet; an existing cursor is kept. Returns the channel's cursor.
 */
export function ensureChannel(
  store: Store,
  channelId: string,
  options: { parentId?: string | null; anchor?: string | null } = {},
): ChannelCursor {
  store.statement(
    `INSERT INTO discord_channels (channel_id, parent_id, last_message_id, updated_at)
     VALUES (?, ?, ?, ?)
     ON CONFLICT (channel_id) DO UPDATE SET
       parent_id = COALESCE(parent_id, excluded.parent_id),
       last_message_id = COALESCE(last_message_id, excluded.last_message_id)`,
  ).run(channelId, options.parentId ?? null, options.anchor ?? null, store.clock());
  return channelCursors(store).find((c) => c.channelId === channelId)!;
}

/**
 * Moves a channel's cursor forward to `messageId` (snowflakes compare as numbers: by length,
 * then by digits); an older id changes nothing. Call after `messageId` was admitted.
 */
export function advanceChannelCursor(store: Store, channelId: string, messageId: string): void {
  store.statement(
    `INSERT INTO discord_channels (channel_id, parent_id, last_message_id, updated_at)
     VALUES (?, NULL, ?, ?)
     ON CONFLICT (channel_id) DO UPDATE SET last_message_id = excluded.last_message_id,
       updated_at = excluded.updated_at
     WHERE last_message_id IS NULL
       OR length(last_message_id) < length(excluded.last_message_id)
       OR (length(last_message_id) = length(excluded.last_message_id)
           AND last_message_id < excluded.last_message_id)`,
  ).run(channelId, messageId, store.clock());
}

/** Every known channel and thread with its cursor, configured channels first. */
export function channelCursors(store: Store): ChannelCursor[] {
  const rows = store.statement(
    "SELECT * FROM discord_channels ORDER BY parent_id IS NOT NULL, channel_id",
  ).all() as unknown as {
    channel_id: string;
    parent_id: string | null;
    last_message_id: string | null;
  }[];
  return rows.map((r) => ({
    channelId: r.channel_id,
    parentId: r.parent_id,
    lastMessageId: r.last_message_id,
  }));
}
