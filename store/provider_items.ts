/**
 * The `provider_items` table: a session's provider sequence (user, assistant and tool
 * messages in the chat-completions shape). This module is the table's only writer.
 *
 * The sequence is kept valid across crashes: an assistant message with tool calls is written
 * before any of its cells run, and {@linkcode closeDanglingToolCalls} gives every tool call
 * without a result either its finished cell's result or a recorded interruption.
 *
 * @module
 */

import { KlbrError } from "../runtime/core/mod.ts";
import type { Store } from "./store.ts";

/** One stored provider message. */
export interface ProviderItem {
  idx: number;
  frameId: string | null;
  role: "user" | "assistant" | "tool";
  toolCallId: string | null;
  /** The message in the chat-completions shape. */
  message: Record<string, unknown>;
  at: number;
}

interface ItemRow {
  idx: number;
  frame_id: string | null;
  role: ProviderItem["role"];
  tool_call_id: string | null;
  message: string;
  at: number;
}

/**
 * Appends messages to a session's provider sequence in one transaction; returns their indexes.
 *
 * When it returns every message is committed, in order.
 *
 * @throws {KlbrError} `invalid_input` for a message without a known role, or a tool message
 * without `tool_call_id`, or a second result for the same tool call.
 */
export function appendProviderItems(
  store: Store,
  session: string,
  frameId: string | null,
  messages: Record<string, unknown>[],
): number[] {
  return store.transaction(() => {
    const last = store.statement(
      "SELECT COALESCE(MAX(idx), 0) AS idx FROM provider_items WHERE session_id = ?",
    ).get(session) as { idx: number };
    let idx = last.idx;
    const now = store.clock();
    return messages.map((message) => {
      const role = message.role;
      if (role !== "user" && role !== "assistant" && role !== "tool") {
        throw new KlbrError(
          "invalid_input",
          `cannot append provider item: role must be user, assistant or tool (got ${
            JSON.stringify(role)
          })`,
        );
      }
      const toolCallId = role === "tool" ? message.tool_call_id : null;
      if (role === "tool" && typeof toolCallId !== "string") {
        throw new KlbrError(
          "invalid_input",
          "cannot append provider item: a tool message needs tool_call_id (got none)",
        );
      }
      if (
        role === "tool" &&
        store.statement(
            "SELECT 1 FROM provider_items WHERE session_id = ? AND role = 'tool' AND tool_call_id = ?",
          ).get(session, toolCallId as string) !== undefined
      ) {
        throw new KlbrError(
          "invalid_input",
          `cannot append provider item: tool call ${toolCallId} already has its result`,
        );
      }
      idx++;
      store.statement(
        `INSERT INTO provider_items (session_id, idx, frame_id, role, tool_call_id, message, at)
         VALUES (?, ?, ?, ?, ?, ?, ?)`,
      ).run(session, idx, frameId, role, toolCallId as string | null, JSON.stringify(message), now);
      return idx;
    });
  });
}

/** Returns a session's provider items with `idx > since`, in order. */
export function readProviderItems(store: Store, session: string, since = 0): ProviderItem[] {
  const rows = store.statement(
    "SELECT idx, frame_id, role, tool_call_id, message, at FROM provider_items WHERE session_id = ? AND idx > ? ORDER BY idx",
  ).all(session, since) as unknown as ItemRow[];
  return rows.map((row) => ({
    idx: row.idx,
    frameId: row.frame_id,
    role: row.role,
    toolCallId: row.tool_call_id,
    message: JSON.parse(row.message),
    at: row.at,
  }));
}

/**
 * Gives every tool call that has no result one, so the next request is a valid sequence.
 *
 * A call whose cell finished gets that cell's recorded result (the cell is never run again);
 * any other gets an interruption naming `reason`. Returns the tool call ids it closed. When it
 * returns, every assistant tool call in the session has exactly one tool message.
 */
export function closeDanglingToolCalls(store: Store, session: string, reason: string): string[] {
  return store.transaction(() => {
    const answered = new Set(
      (store.statement(
        "SELECT tool_call_id FROM provider_items WHERE session_id = ? AND role = 'tool'",
      ).all(session) as { tool_call_id: string }[]).map((row) => row.tool_call_id),
    );
    const closed: string[] = [];
    const messages: Record<string, unknown>[] = [];
    let frameId: string | null = null;
    for (const item of readProviderItems(store, session)) {
      if (item.role !== "assistant") continue;
      const calls = (item.message.tool_calls ?? []) as { id: string }[];
      for (const call of calls) {
        if (answered.has(call.id)) continue;
        const cell = store.statement(
          "SELECT outcome, result FROM cells WHERE session_id = ? AND tool_call_id = ? AND outcome IS NOT NULL",
        ).get(session, call.id) as { outcome: string; result: string } | undefined;
        const content = cell === undefined
          ? `[interrupted: ${reason}; this cell did not finish and was not run again]`
          : `[recovered result, outcome ${cell.outcome}]\n${cell.result}`;
        messages.push({ role: "tool", tool_call_id: call.id, content });
        closed.push(call.id);
        frameId = item.frameId;
      }
    }
    if (messages.length) appendProviderItems(store, session, frameId, messages);
    return closed;
  });
}
