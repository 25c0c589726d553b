/**
 * What the context tests share: the budget their daemons run with, and the check that a chat
 * request is a valid provider sequence.
 *
 * @module
 */

import assert from "node:assert/strict";
import { isSummarizerRequest, type RecordedRequest } from "../fakes/openai_server.ts";

/** The budget of the test's routes, in the fake's own token count. */
export const CONTEXT_TOKENS = 6000;

/** The fields every context test gives the `main` route (which `long` copies). */
export const ROUTE_FIELDS =
  `    context_tokens ${CONTEXT_TOKENS}\n    compact_at 0.75\n    summary_share 0.1`;

type Message = {
  role: string;
  content: string | null;
  tool_calls?: { id: string }[];
  tool_call_id?: string;
};

/**
 * Fails unless `messages` is a valid chat-completions sequence: the system message first, then
 * a user message; every assistant tool call answered by exactly one tool message right after
 * it, and no tool message anywhere else.
 */
export function assertProviderValid(messages: Message[], where: string): void {
  assert.equal(messages[0]?.role, "system", `${where}: system first`);
  assert.equal(messages[1]?.role, "user", `${where}: a user message second`);
  for (let i = 1; i < messages.length; i++) {
    const message = messages[i];
    assert.notEqual(message.role, "tool", `${where}: tool message #${i} without its call`);
    const calls = message.tool_calls ?? [];
    if (message.role !== "assistant" || calls.length === 0) continue;
    const results = messages.slice(i + 1, i + 1 + calls.length);
    assert.deepEqual(
      results.map((m) => [m.role, m.tool_call_id]),
      calls.map((c) => ["tool", c.id]),
      `${where}: the results of #${i}`,
    );
    i += calls.length;
  }
}

/** The chat requests of the agent's turns (not the summarizer's). */
export const turnRequests = (requests: RecordedRequest[]) =>
  requests.filter((r) => r.method === "POST" && !isSummarizerRequest(r));
