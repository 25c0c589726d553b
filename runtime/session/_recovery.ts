/**
 * Recovery of one session at start-up (or after its loop met a store failure), before its
 * loop runs and without any hook: cells left without an outcome are recorded `interrupted`,
 * every tool call gets a result that says what its cell had done, the dead owner's open frames
 * are finished, continued or given back, and Discord sends that were in flight become
 * `unknown`.
 *
 * @module
 */

import { effectsOfCell } from "../../store/tables/effects.ts";
import { appendEvent } from "../../store/tables/events.ts";
import { recoverOutbox } from "../../store/tables/outbox.ts";
import {
  appendProviderItems,
  closeDanglingToolCalls,
  type DanglingCall,
  frameHasItems,
  getProviderItem,
  lastItemIdx,
} from "../../store/tables/provider_items.ts";
import { interruptOpenCells, lastCellOfFrame } from "../../store/tables/cells.ts";
import {
  adoptFrame,
  finishFrame,
  type FrameRecord,
  openFrames,
} from "../../store/tables/frames.ts";
import { pendingSummary } from "../../store/tables/inputs.ts";
import type { Store } from "../../store/store.ts";
import type { Logger } from "../core/mod.ts";
import { renderEffects } from "./_cell_output.ts";

/** Options for {@linkcode recoverSession}. */
export interface RecoveryOptions {
  log: Logger;
  /** Why the work stopped, for the records and the model. @default {"the daemon restarted"} */
  reason?: string;
}

/**
 * What a continued turn's model reads at the end of each tool result recovery writes: the
 * notice of the restart belongs to the interrupted call, never to a new user message that
 * would read like a new request.
 */
export function resumedNote(reason: string): string {
  return `[runtime] ${reason} during this turn; this is not a new request. The effects ` +
    "listed above happened and must not be repeated (a send repeated in this turn is not " +
    "sent again). Continue the turn from here.";
}

/** What a continued turn whose last reply was text only is told, so it has a message to answer. */
export function resumedAfterText(reason: string): string {
  return `[runtime] ${reason} after your last reply; this is not a new request. Continue ` +
    "this turn: call the python tool, or wait() when you are done.";
}

/**
 * Recovers a session. The caller holds the owner lock and no turn of the session runs, so
 * every open frame and open cell belongs to work that stopped: a cell without an outcome is
 * `interrupted`; a tool call without a result gets one that lists the effects its cell
 * committed and says it did not finish, then that the daemon restarted during the turn (the
 * notice is part of the interrupted call's result, not a user message); a frame whose model
 * never answered gives its inputs back (`abandoned`); one whose last cell called `wait()` is
 * finished `done` without a model request; any other is adopted and returned to be continued
 * (a frame whose last item is a text-only reply gets a runtime note to answer).
 *
 * On return every tool call of the session has exactly one result and no cell is open.
 * Proven by the crash windows in `tests/crash/` (`publish-before-reply`, `wait-before-wake`,
 * "three SIGKILLs mid-burst and mid-turn …").
 *
 * @returns the adopted frames, for the session loop to continue
 */
export function recoverSession(
  store: Store,
  session: string,
  options: RecoveryOptions,
): FrameRecord[] {
  const reason = options.reason ?? "the daemon restarted";
  const interrupted = interruptOpenCells(store, session, `${reason} while it ran`);
  const closed = closeDanglingToolCalls(store, session, {
    resultOf: (call) => recoveredResult(store, call, reason),
  });
  const abandoned: string[] = [];
  const finished: string[] = [];
  const resumed: FrameRecord[] = [];
  let abandonedInputs = 0;
  for (const frame of openFrames(store, session)) {
    if (!frameHasItems(store, frame.id)) {
      finishFrame(store, frame.id, "abandoned", `${reason} before the model answered`);
      abandoned.push(frame.id);
      abandonedInputs += frame.inputIds.length;
      continue;
    }
    const last = lastCellOfFrame(store, frame.id);
    const waited = (last?.result as { wait?: unknown } | null)?.wait;
    if (last?.outcome === "ok" && waited !== null && waited !== undefined) {
      // The turn had ended with wait(): finishing it needs no model request.
      appendEvent(store, session, "turn.ended", {
        frame_id: frame.id,
        reason: "wait",
        recovered: true,
      });
      finishFrame(store, frame.id, "done", `wait (recovered: ${reason} after the cell waited)`);
      finished.push(frame.id);
      continue;
    }
    adoptFrame(store, frame.id);
    const newest = getProviderItem(store, session, lastItemIdx(store, session));
    if (newest?.frameId === frame.id && newest.role === "assistant") {
      // A reply of text only: the continued request must not end with the model's own words.
      appendProviderItems(store, session, frame.id, [{
        role: "user",
        content: resumedAfterText(reason),
      }]);
    }
    resumed.push(frame);
  }
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
  const pending = pendingSummary(store, session).count;
  logRecovery(options.log, session, {
    reason,
    resumed: resumed.length,
    abandoned: abandoned.length,
    reoffered: abandonedInputs,
    finished: finished.length,
    interrupted: interrupted.length,
    closed: closed.length,
    pending,
  });
  if (
    abandoned.length || resumed.length || finished.length || interrupted.length || closed.length
  ) {
    appendEvent(store, session, "recovery", {
      reason,
      abandoned_frames: abandoned,
      resumed_frames: resumed.map((frame) => frame.id),
      finished_frames: finished,
      interrupted_cells: interrupted,
      closed_tool_calls: closed,
    });
  }
  return resumed;
}

/** What one recovery did, counted. */
interface RecoveryCounts {
  reason: string;
  resumed: number;
  abandoned: number;
  /** Inputs the abandoned frames gave back. */
  reoffered: number;
  finished: number;
  interrupted: number;
  closed: number;
  /** Inputs pending once recovered: offered to the next turn. */
  pending: number;
}

/**
 * One `recovery.session` line when there was anything to recover or to offer again: frames
 * resumed, abandoned (their inputs given back) or finished, cells interrupted, inputs pending.
 */
function logRecovery(log: Logger, session: string, counts: RecoveryCounts): void {
  const { reason, resumed, abandoned, reoffered, finished, interrupted, closed, pending } = counts;
  if (resumed + abandoned + finished + interrupted + closed + pending === 0) return;
  const parts = [
    `${resumed} frame(s) resumed`,
    `${abandoned} abandoned (${reoffered} input(s) given back)`,
    `${finished} finished (they had waited)`,
    `${interrupted} cell(s) interrupted and not run again`,
    `${pending} input(s) pending, offered to the next turn`,
  ];
  log.info("recovery.session", `session ${session} after ${reason}: ${parts.join(", ")}`, {
    session,
    reason,
    resumed_frames: resumed,
    abandoned_frames: abandoned,
    reoffered_inputs: reoffered,
    finished_frames: finished,
    interrupted_cells: interrupted,
    closed_tool_calls: closed,
    pending_inputs: pending,
  });
}

/**
 * The result a tool call gets at recovery: what its cell did. A cell's outcome commits with its
 * call's result, so a call left without one either started no cell or ran one that was cut off
 * (recorded `interrupted` just before).
 */
function recoveredResult(store: Store, call: DanglingCall, reason: string): string {
  const cell = call.cell;
  if (cell === undefined) {
    return `[not run: ${reason} before this cell started; it was not run and did nothing]\n${
      resumedNote(reason)
    }`;
  }
  return `[interrupted: ${reason} while this cell ran; it did not finish and was not run ` +
    `again]\n${renderEffects(effectsOfCell(store, cell.id))}\n${resumedNote(reason)}`;
}
