/**
 * Writes realistic turns into a real store through the writer modules, as the daemon would:
 * an input, its frame, the opening user item, an assistant item with scratchpad text and one
 * tool call, the cell that ran it, the local send the cell made, the tool result, the frame's
 * end. For compaction tests, the query-plan test and the bench.
 *
 * @module
 */

import { finishCell, startCell } from "../../store/tables/cells.ts";
import { appendEvent } from "../../store/tables/events.ts";
import { acceptFrame, finishFrame } from "../../store/tables/frames.ts";
import { admitInput } from "../../store/tables/inputs.ts";
import { currentGeneration, startGeneration } from "../../store/tables/kernel_generations.ts";
import { enqueueOutbox } from "../../store/tables/outbox.ts";
import { appendProviderItems } from "../../store/tables/provider_items.ts";
import { requireSession } from "../../store/tables/sessions.ts";
import type { Store } from "../../store/store.ts";

/** What one written turn is made of. */
export interface WrittenTurn {
  inputId: string;
  frameId: string;
  cellId: string;
  /** The refs of the messages the turn's cell sent (`send:<seq>`, `outbox:<id>`). */
  sends: string[];
}

/** Options for {@linkcode writeTurn}. */
export interface TurnOptions {
  /** The input's text. @default {`question <n>`} */
  question?: string;
  /** Local sends the cell makes. @default {1} */
  sends?: number;
  /** A Discord outbox row the cell writes too (left `pending`). */
  discord?: boolean;
  /** Padding added to the scratchpad text, to make turns larger. @default {0} */
  padding?: number;
  /** The cell's outcome and result. @default {ok, stdout `printed <n>`} */
  cell?: { outcome: "ok" | "error"; result: Record<string, unknown> };
}

function generation(store: Store, session: string): number {
  const current = currentGeneration(store, session);
  if (current !== undefined && current.endedAt === null) return current.generation;
  return startGeneration(store, {
    session,
    reason: "fixture",
    skillsRevision: "fixture",
    behaviorRevision: null,
  }).generation;
}

/**
 * Writes turn `n` of `session` in one transaction and returns its ids.
 *
 * @example
 * ```ts
 * for (let n = 1; n <= 100; n++) writeTurn(store, "default", n);
 * ```
 */
export function writeTurn(
  store: Store,
  session: string,
  n: number,
  options: TurnOptions = {},
): WrittenTurn {
  return store.transaction(() => {
    const question = options.question ?? `question ${n}`;
    const { inputId } = admitInput(store, {
      session,
      sourceKind: "local",
      dedupeKey: `local:fixture:${n}`,
      conversationId: "local:default",
      author: "owner",
      body: question,
    });
    const { frameId } = acceptFrame(store, {
      session,
      inputIds: [inputId],
      contextEpoch: requireSession(store, session).contextEpoch,
      policyRevision: "fixture",
    });
    const call = `call_fixture_${n}`;
    const code = `await local.send('answer ${n}')`;
    appendProviderItems(store, session, frameId, [
      { role: "user", content: `[input ${inputId} from owner in local:default]\n${question}` },
      {
        role: "assistant",
        content: `thinking about ${n}${" pad".repeat(options.padding ?? 0)}`,
        tool_calls: [{
          id: call,
          type: "function",
          function: { name: "python", arguments: JSON.stringify({ code }) },
        }],
      },
    ]);
    const { cellId } = startCell(store, {
      session,
      generation: generation(store, session),
      frameId,
      toolCallId: call,
      code,
    });
    const sends: string[] = [];
    for (let s = 0; s < (options.sends ?? 1); s++) {
      const text = s === 0 ? `answer ${n}` : `answer ${n}.${s}`;
      const seq = appendEvent(store, session, "send", {
        send_id: `send_fixture_${n}_${s}`,
        text,
        conversation: "local:default",
        frame_id: frameId,
        cell_id: cellId,
        state: "delivered",
      });
      sends.push(`send:${seq}`);
    }
    if (options.discord) {
      const row = enqueueOutbox(store, {
        session,
        conversation: "discord:42",
        destination: { channel_id: "42" },
        body: `discord answer ${n}`,
        frameId,
        cellId,
      });
      sends.push(`outbox:${row.id}`);
    }
    finishCell(
      store,
      cellId,
      options.cell ?? { outcome: "ok", result: { stdout: `printed ${n}\n`, value: null } },
    );
    appendProviderItems(store, session, frameId, [
      { role: "tool", tool_call_id: call, content: `outcome: ok\nstdout:\nprinted ${n}` },
    ]);
    finishFrame(store, frameId, "done", "wait");
    return { inputId, frameId, cellId, sends };
  });
}
