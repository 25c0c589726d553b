/**
 * `local.send`: the only speech to the local conversation, a durable publication committed
 * before the cell hears that it succeeded.
 *
 * @module
 */

import {
  derivedEffectKey,
  effectByKey,
  nextEffectOrdinal,
  recordEffect,
} from "../../store/tables/effects.ts";
import { insertEvent } from "../../store/tables/events.ts";
import type { Store } from "../../store/store.ts";
import { z } from "zod";
import { faultPoint, KlbrError, newId, SendParams } from "../core/mod.ts";
import { defineRpc, type RpcCall } from "../kernel/mod.ts";
import { routedConversations } from "../behavior/mod.ts";

/** The frame whose turn is running, as a send needs it. */
export interface RunningFrame {
  id: string;
  routing: unknown;
}

/** What a send answers: the send record, its place among the cell's effects, and whether it was new. */
export interface SendReceipt {
  send_id: string;
  seq: number;
  /** The send's ordinal among its cell's effects (1, 2, …). */
  ordinal: number;
  /** True when a send with the same key was published before: nothing was sent this time. */
  duplicate: boolean;
}

/**
 * Publishes one message to the local conversation the running frame answers. On return the
 * `send` record and its entry among the cell's effects are committed; they are what the
 * conversation shows and what a recovered cell's result lists.
 *
 * Every send carries an idempotency key: `key` when given (it holds across the session),
 * else one derived from the frame, the conversation and the text ({@linkcode derivedEffectKey}),
 * so the same text sent again in the same turn — a re-run cell, a turn continued after a
 * crash — publishes nothing and answers the first send's receipt with `duplicate: true`.
 *
 * Proven by "`localSend()` is idempotent on its key within a session", "`localSend()` sends the
 * same text once per frame without a key" in `tests/runtime/session/local_send.test.ts` and
 * "a SIGKILL after the sends commit, then the same cell again: one message locally and on
 * Discord" in `tests/crash/send_once.test.ts`.
 *
 * @throws {KlbrError} `invalid_input` when the text is missing or empty, or the key malformed.
 * @example
 * ```ts
 * const { send_id, seq } = localSend(store, "default", frame, { text: "done", key: "k1" }, cellId);
 * ```
 */
export function localSend(
  store: Store,
  session: string,
  frame: RunningFrame | null,
  params: Record<string, unknown>,
  cell: string | null,
): SendReceipt {
  const parsed = SendParams.safeParse(params);
  if (!parsed.success) {
    throw new KlbrError(
      "invalid_input",
      "cannot send: text must be a non-empty string and key, if given, 1-200 characters",
    );
  }
  const { text } = parsed.data;
  // local.send speaks to the local conversation the turn answers, never to a remote one.
  const conversation = routedConversations(frame?.routing)
    .find((c) => c.startsWith("local:")) ?? "local:default";
  const key = parsed.data.key ??
    derivedEffectKey({ frameId: frame?.id ?? null, cellId: cell }, [conversation, text]);
  const receipt = store.transaction((): SendReceipt => {
    const first = key === undefined ? undefined : effectByKey(store, session, "local.send", key);
    if (first !== undefined) {
      return { send_id: first.refId, seq: first.seq ?? 0, ordinal: first.ordinal, duplicate: true };
    }
    const sendId = newId("send");
    const ordinal = nextEffectOrdinal(store, cell);
    const seq = insertEvent(store, session, "send", {
      send_id: sendId,
      text,
      conversation,
      frame_id: frame?.id ?? null,
      cell_id: cell,
      ordinal,
      key: key ?? null,
      state: "delivered",
    });
    recordEffect(store, {
      session,
      cellId: cell,
      kind: "local.send",
      refId: sendId,
      key,
      summary: text,
      seq,
    });
    return { send_id: sendId, seq, ordinal, duplicate: false };
  });
  // The window between the commit and the cell hearing of it: a crash here must not send twice.
  faultPoint("publish-before-reply");
  return receipt;
}

/** What `local.send` is bound to: the session, its running frame, and who hears of a send. */
export interface LocalSendDeps {
  store: Store;
  session: string;
  /** The frame whose turn is running; null outside a turn. */
  frame: () => RunningFrame | null;
}

/** `local.send` as a host RPC of a session's cells: {@linkcode localSend} (the commit wakes the lanes). */
export const localSendRpc = defineRpc({
  name: "local.send",
  summary: "Publishes a message to the local conversation the frame answers, committed before " +
    "the answer; once per `key` (or per text in a frame without one).",
  roles: ["workbench"],
  refusal: "a job never speaks to a conversation; return a value and the agent is woken with it",
  action: "send",
  args: SendParams,
  reply: z.strictObject({
    send_id: z.string(),
    seq: z.int(),
    ordinal: z.int(),
    duplicate: z.boolean(),
  }),
  handler: (p, call: RpcCall<LocalSendDeps>) => {
    const { deps } = call;
    return localSend(deps.store, deps.session, deps.frame(), p, call.cell);
  },
});
