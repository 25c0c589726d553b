/**
 * `local.send`: the only speech to the local conversation, a durable publication committed
 * before the cell hears that it succeeded.
 *
 * @module
 */

import { appendEvent } from "../../store/events.ts";
import type { Store } from "../../store/store.ts";
import { KlbrError, newId, SendParams } from "../core/mod.ts";
import { routedConversations } from "../behavior/mod.ts";

/** The frame whose turn is running, as a send needs it. */
export interface RunningFrame {
  id: string;
  routing: unknown;
}

/**
 * Publishes one message to the local conversation the running frame answers. On return the
 * `send` record is committed; it is what the conversation shows.
 *
 * @throws {KlbrError} `invalid_input` when the text is missing or empty.
 * @example
 * ```ts
 * const { send_id, seq } = localSend(store, "default", frame, { text: "done" }, cellId);
 * ```
 */
export function localSend(
  store: Store,
  session: string,
  frame: RunningFrame | null,
  params: Record<string, unknown>,
  cell: string | null,
): { send_id: string; seq: number } {
  const parsed = SendParams.safeParse(params);
  if (!parsed.success) {
    throw new KlbrError("invalid_input", "cannot send: text must be a non-empty string");
  }
  // local.send speaks to the local conversation the turn answers, never to a remote one.
  const conversation = routedConversations(frame?.routing)
    .find((c) => c.startsWith("local:")) ?? "local:default";
  const sendId = newId("send");
  const seq = appendEvent(store, session, "send", {
    send_id: sendId,
    text: parsed.data.text,
    conversation,
    frame_id: frame?.id ?? null,
    cell_id: cell,
    state: "delivered",
  });
  return { send_id: sendId, seq };
}
