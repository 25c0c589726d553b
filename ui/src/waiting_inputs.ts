/**
 * The inputs an `op.status` answer says have waited longer than its threshold, in words.
 *
 * @module
 */

import type { SessionStatus } from "../../runtime/core/mod.ts";

/**
 * The session's inputs waiting longer than its threshold, in words: how many, over how long,
 * and the first ones with how long each has waited; undefined while no status is known.
 *
 * @example
 * ```ts
 * waitingLine(status.sessions[client.session])?.label; // "2 waiting over 300 s: in_a (400 s), …"
 * ```
 */
export function waitingLine(
  session: Pick<SessionStatus, "waiting_inputs" | "waiting_threshold_ms" | "waiting"> | undefined,
): { count: number; label: string } | undefined {
  if (session === undefined) return undefined;
  const count = session.waiting_inputs;
  const over = `over ${Math.round(session.waiting_threshold_ms / 1000)} s`;
  if (count === 0) return { count, label: `none ${over}` };
  const first = session.waiting.slice(0, 3).map((w) =>
    `${w.id} (${Math.round(w.waited_ms / 1000)} s)`
  );
  return { count, label: `${count} waiting ${over}${first.length ? `: ${first.join(", ")}` : ""}` };
}
