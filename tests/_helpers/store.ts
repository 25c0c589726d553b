/**
 * A fresh store for one test: opened in its own temp directory with the `default` session,
 * closed and removed after the test body, whatever it did.
 *
 * @module
 */

import { type AcceptedFrame, acceptFrame } from "../../store/tables/frames.ts";
import { getModelCall, type ModelCallRecord } from "../../store/tables/model_calls.ts";
import { admitInputs } from "../../store/tables/inputs.ts";
import { ensureSession } from "../../store/tables/sessions.ts";
import {
  lastItemIdx,
  type ProviderItem,
  readProviderRange,
} from "../../store/tables/provider_items.ts";
import { openStore, type Store } from "../../store/store.ts";

/** Options for {@linkcode withStore}. */
export interface WithStoreOptions {
  /** A clock that counts 1,000, 1,001, … (one ms a call), so record times are exact. */
  countingClock?: boolean;
}

/**
 * Runs `fn` on a fresh store with the `default` session, then closes it and removes its
 * directory.
 *
 * @example
 * ```ts
 * Deno.test("an input is pending once admitted", () =>
 *   withStore((store) => {
 *     admitInput(store, input);
 *     assert.equal(pendingInputs(store, "default").length, 1);
 *   }));
 * ```
 */
export async function withStore(
  fn: (store: Store, dir: string) => void | Promise<void>,
  options: WithStoreOptions = {},
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "klbr-store-" });
  let now = 1_000;
  const store = openStore(dir, options.countingClock ? { clock: () => now++ } : {});
  try {
    ensureSession(store, "default");
    await fn(store, dir);
  } finally {
    store.close();
    await Deno.remove(dir, { recursive: true });
  }
}

/**
 * Wraps `store` so that every SQL text asked of `statement()` is recorded in `seen`, and how
 * many times it was asked in `asked`: a test can then check the query plan of exactly what a
 * function ran, or that it ran a statement once rather than once per row.
 *
 * @example
 * ```ts
 * const { store: watched, seen } = recordingStatements(store);
 * runMaintenance(watched, options);
 * for (const sql of seen) assertUsesIndex(store, sql);
 * ```
 */
export function recordingStatements(
  store: Store,
): { store: Store; seen: Set<string>; asked: Map<string, number> } {
  const seen = new Set<string>();
  const asked = new Map<string, number>();
  const proxy = new Proxy(store, {
    get(target, prop) {
      if (prop === "statement") {
        return (sql: string) => {
          seen.add(sql);
          asked.set(sql, (asked.get(sql) ?? 0) + 1);
          return target.statement(sql);
        };
      }
      const value = Reflect.get(target, prop, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  return { store: proxy, seen, asked };
}

/**
 * Accepts a frame of `inputIds` in the `default` session, as a test's turn would: routed to
 * `local:main`, context epoch 0, the `builtin` release; `extra` overrides any field.
 *
 * @example
 * ```ts
 * const { frameId } = frameOf(store, [admitInput(store, input).inputId]);
 * ```
 */
export function frameOf(
  store: Store,
  inputIds: string[],
  extra: Record<string, unknown> = {},
): AcceptedFrame {
  return acceptFrame(store, {
    session: "default",
    inputIds,
    routing: { reply_to: "local:main" },
    contextEpoch: 0,
    policyRevision: "builtin",
    ...extra,
  });
}

/**
 * The model calls a cell made directly, or a job made, oldest first: a test's view of the
 * `model_calls` table (the runtime reads calls by id and by usage window only).
 */
export function modelCallsOf(
  store: Store,
  owner: { cellId: string } | { jobId: string },
): ModelCallRecord[] {
  const [column, id] = "cellId" in owner ? ["cell_id", owner.cellId] : ["job_id", owner.jobId];
  const rows = store.statement(
    `SELECT id FROM model_calls WHERE ${column} = ? ORDER BY created_at, id`,
  ).all(id) as { id: string }[];
  return rows.map((row) => getModelCall(store, row.id)!);
}

/** A session's provider items after `after` (default 0: all of them), in order. */
export function providerItems(store: Store, session: string, after = 0): ProviderItem[] {
  return readProviderRange(store, session, { after, through: lastItemIdx(store, session) });
}

/**
 * Admits one Discord message of the `default` session (message `m1` in channel 42) with its
 * whole body as the receiver records it; returns its input id.
 */
export function admitDiscordMessage(
  store: Store,
  message: { text: string; attachments?: unknown[] },
): string {
  const [outcome] = admitInputs(store, [{
    session: "default",
    sourceKind: "discord",
    dedupeKey: "discord:m1",
    conversationId: "discord:42",
    author: "owner",
    body: {
      text: message.text,
      message_id: "m1",
      channel_id: "42",
      guild_id: "7",
      dm: false,
      mentioned: true,
      reply_to: null,
      thread_of: null,
      attachments: message.attachments ?? [],
    },
  }]);
  return (outcome as { inputId: string }).inputId;
}
