/**
 * What a request carries: the contract message, the context summary standing in for the items
 * it covers, the provider items after it, and the turn's opening message — passed through
 * `context.prepare`.
 *
 * @module
 */

import type { InputRecord } from "../../store/inputs.ts";
import { readProviderItems } from "../../store/provider_items.ts";
import { compactContext, latestSummary } from "../../store/context_summaries.ts";
import type { HookResult } from "../behavior/mod.ts";
import type { ChatMessage } from "../model/mod.ts";
import { hookOr, type TurnHookDeps } from "./_turn_hooks.ts";

/** What building a request needs. */
export interface ContextDeps extends TurnHookDeps {
  /** The contract message the model reads first. */
  system: () => string;
  /** Provider items kept in a request at most (older ones are left out whole). @default {200} */
  maxItems?: number;
  /** Uncovered provider items above which a turn compacts the context first. @default {150} */
  compactAboveItems?: number;
  /** Items a compaction keeps whole after its cut. @default {60} */
  keepItemsAfterCompaction?: number;
}

/** The message a new turn opens with: its inputs, each headed by who said it where. */
export function renderInputs(inputs: InputRecord[]): Record<string, unknown> {
  const lines = inputs.map((input) => {
    // A Discord input's body is its text and its details (mention, reply, attachments, …).
    const { text, ...details } = (input.body ?? {}) as { text?: unknown };
    const body = typeof input.body === "string"
      ? input.body
      : typeof text === "string"
      ? `${text}\n${JSON.stringify(details)}`
      : JSON.stringify(input.body);
    return `[input ${input.id} from ${input.author} in ${input.conversationId}]\n${body}`;
  });
  return { role: "user", content: lines.join("\n\n") };
}

/** Compacts a long sequence before it is sent: no model, and nothing is deleted. */
export function compactIfLong(deps: ContextDeps, session: string): void {
  const { store } = deps;
  const uncovered = readProviderItems(
    store,
    session,
    latestSummary(store, session)?.coversToIdx ?? 0,
  );
  if (uncovered.length <= (deps.compactAboveItems ?? 150)) return;
  if (compactContext(store, session, { keepItems: deps.keepItemsAfterCompaction ?? 60 })) {
    deps.bus.wake(session);
  }
}

/** The request's messages: the contract, then the provider sequence, via `context.prepare`. */
export async function prepareContext(
  deps: ContextDeps,
  session: string,
  opening: Record<string, unknown>[],
): Promise<ChatMessage[]> {
  // The summary stands in for the items it covers; the items after it follow whole.
  const summary = latestSummary(deps.store, session);
  const items = readProviderItems(deps.store, session, summary?.coversToIdx ?? 0)
    .map((item) => item.message);
  // Every stored provider item has a role: appendProviderItems refuses any other.
  const base = [
    { role: "system", content: deps.system() },
    ...(summary ? [{ role: "user", content: `[runtime] ${summary.text}` }] : []),
    ...trimItems(items, deps.maxItems ?? 200),
    ...opening,
  ] as HookResult<"context.prepare">;
  const messages = await hookOr(deps, session, "context.prepare", { messages: base }, base);
  return messages as unknown as ChatMessage[];
}

/** Keeps the last `max` items, starting at a user message so no tool group is split. */
function trimItems(items: Record<string, unknown>[], max: number): Record<string, unknown>[] {
  if (items.length <= max) return items;
  let start = items.length - max;
  while (start < items.length && items[start].role !== "user") start++;
  return items.slice(start);
}
