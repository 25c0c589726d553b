/**
 * Keeps the page's view of `/health` fresh: asked after each `welcome`, every few seconds while
 * the page is visible, and soon after a record that says a turn failed, stalled or ended, so
 * the header shows model trouble as soon as `/health` does. An operator's page asks `op.status`
 * for its own session with it: `/health` says only the default session's state.
 *
 * @module
 */

import { parseOperatorResult } from "../../runtime/core/mod.ts";
import type { LaneClient } from "./lane_client.ts";
import { readHealth } from "./page_auth.ts";

/** Record types after which `/health` is likely to have changed. */
const TELLING = new Set([
  "turn.ended",
  "turn.retrying",
  "frame.abandoned",
  "frame.finished",
  "session.stalled",
  "model.reply",
  "hook.failed",
  "model.failing",
  "model.recovered",
  // An operator's stop, drain, resume or reset changes the session's state at once.
  "operator",
]);

/**
 * Starts watching `/health` for `client`; returns the function that stops it.
 *
 * @example
 * ```ts
 * const stop = watchHealth(client, { everyMs: 5000 });
 * ```
 */
export function watchHealth(client: LaneClient, options: { everyMs: number }): () => void {
  let soon: ReturnType<typeof setTimeout> | undefined;
  let lastSeq = client.log.lastSeq;
  let asking = false;
  const ask = async () => {
    if (asking) return;
    asking = true;
    try {
      await readBoth(client);
    } finally {
      asking = false;
    }
  };
  const askSoon = () => {
    if (soon !== undefined) return;
    soon = setTimeout(() => {
      soon = undefined;
      void ask();
    }, 250);
  };
  const timer = setInterval(() => {
    if (document.visibilityState === "visible") void ask();
  }, options.everyMs);
  const unsubscribe = client.subscribe(() => {
    const seq = client.log.lastSeq;
    if (seq === lastSeq) return;
    const fresh = client.log.records().filter((r) => r.seq > lastSeq);
    lastSeq = seq;
    if (fresh.some((r) => TELLING.has(r.type))) askSoon();
  });
  return () => {
    clearInterval(timer);
    if (soon !== undefined) clearTimeout(soon);
    unsubscribe();
  };
}

/** Asks `/health` (and, for the operator, `op.status`) once now (after a `welcome`). */
export function askHealth(client: LaneClient): void {
  void readBoth(client);
}

async function readBoth(client: LaneClient): Promise<void> {
  client.setHealth(await readHealth());
  const c = client.connection;
  if (c.role !== "operator" || c.phase !== "open") {
    // A page signed out (or offline) no longer knows its session's state.
    if (client.status !== undefined) client.setStatus(undefined);
    return;
  }
  try {
    const answer = await client.operate({ kind: "op.status", session: client.session });
    client.setStatus(parseOperatorResult("op.status", answer));
  } catch { /* dropped or refused: the last answer stands until the next ask */ }
}
