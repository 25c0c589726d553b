/**
 * Recovery of one session at start-up, before its loop runs and without any hook: the dead
 * owner's open frames are continued or given back, cells left without an outcome are
 * recorded `interrupted`, every tool call gets a result, and Discord sends that were in
 * flight become `unknown`.
 *
 * @module
 */

import { appendEvent } from "../../store/events.ts";
import { recoverOutbox } from "../../store/outbox.ts";
import { closeDanglingToolCalls } from "../../store/provider_items.ts";
import { frameHasCells, interruptOpenCells } from "../../store/cells.ts";
import { adoptFrame, finishFrame, type FrameRecord, openFrames } from "../../store/frames.ts";
import type { Store } from "../../store/store.ts";
import type { Logger } from "../core/mod.ts";

/** Options for {@linkcode recoverSession}. */
export interface RecoveryOptions {
  log: Logger;
}

/**
 * Recovers a session after a restart. The caller holds the owner lock, so every open frame
 * belongs to a dead owner: a turn that had not run a cell gives its inputs back (the frame
 * is `abandoned`); one that had is adopted, to be continued so it can finish (and speak)
 * without repeating what it did.
 *
 * On return every tool call of the session has exactly one result and no cell is open.
 *
 * @returns the adopted frames, for the session loop to continue
 */
export function recoverSession(
  store: Store,
  session: string,
  options: RecoveryOptions,
): FrameRecord[] {
  const abandoned: string[] = [];
  const resumed: FrameRecord[] = [];
  for (const frame of openFrames(store, session)) {
    if (frameHasCells(store, frame.id)) {
      adoptFrame(store, frame.id);
      resumed.push(frame);
    } else {
      finishFrame(store, frame.id, "abandoned", "the daemon restarted before the turn had effects");
      abandoned.push(frame.id);
    }
  }
  const interrupted = interruptOpenCells(store, session, "the daemon restarted while it ran");
  const closed = closeDanglingToolCalls(store, session, "the daemon restarted");
  // Nobody knows whether a send that was in flight reached Discord: say so; the sender
  // reconciles it by its nonce and never blindly resends it.
  const unknownSends = recoverOutbox(store, session);
  if (unknownSends.length) {
    options.log.warn(
      "outbox.unknown",
      `outbox: ${unknownSends.length} send(s) now unknown; they are reconciled, never blindly resent`,
      { count: unknownSends.length },
    );
  }
  if (abandoned.length || resumed.length || interrupted.length || closed.length) {
    appendEvent(store, session, "recovery", {
      abandoned_frames: abandoned,
      resumed_frames: resumed.map((frame) => frame.id),
      interrupted_cells: interrupted,
      closed_tool_calls: closed,
    });
  }
  return resumed;
}
