/**
 * `context.prepare`'s messages as a delta: a worker keeps the last messages it was given, so
 * each request sends only what changed (the new items, the new opening) and names the rest
 * as runs of the kept list; and a hook that hands its messages back unchanged is answered
 * `{unchanged: true}` instead of the whole list.
 *
 * Who can corrupt what: the host's messages never leave the host process (the worker gets
 * JSON), so nothing a hook does reaches them. The worker keeps each message as its JSON text
 * and gives the hook a fresh parse of it each call, so a hook that edits its argument in place
 * edits only its own copy. The host reuses a kept message only when it cannot have changed:
 * the same frozen object (the provider-item cache freezes what it returns, deeply), or a flat
 * object of equal primitive fields. Any failed request forgets what the worker keeps, and a
 * worker that keeps another base answers `invalid_request`: the call is then sent again whole.
 *
 * @module
 */

import { KlbrError, newId } from "../core/mod.ts";

/** A run of the kept list (`copy`, start inclusive, end exclusive) or new messages (`add`). */
export type MessagesPart = { copy: [number, number] } | { add: unknown[] };

/** The `messages` field of a `context.prepare` hook request. */
export interface MessagesDelta {
  /** Names this list: the next request's `base`. */
  id: string;
  /** The list the parts copy from; null when the parts are all new. */
  base: string | null;
  parts: MessagesPart[];
}

/** What one worker process keeps of `context.prepare`'s messages, seen from the host. */
export class PreparedMessages {
  #kept: { id: string; messages: readonly unknown[] } | null = null;

  /** The delta that turns the kept list into `messages`; the worker keeps `messages` after it. */
  next(messages: readonly unknown[]): MessagesDelta {
    const kept = this.#kept;
    const delta = { id: newId("request"), base: kept?.id ?? null, parts: partsOf(kept, messages) };
    // What was sent, as it was: a frozen message cannot change, a flat one is copied, and any
    // other is never reused (it matches nothing).
    this.#kept = { id: delta.id, messages: messages.map(snapshot) };
    return delta;
  }

  /** After a failed request: the worker may keep anything, so the next delta is whole. */
  forget(): void {
    this.#kept = null;
  }
}

const KEPT = new WeakMap<object, PreparedMessages>();

/** What the worker behind `handle` keeps; one for each worker process, gone with it. */
export function preparedOf(handle: object): PreparedMessages {
  let kept = KEPT.get(handle);
  if (kept === undefined) KEPT.set(handle, kept = new PreparedMessages());
  return kept;
}

/** `context.prepare`'s arguments: the messages and the rest. */
export type PrepareArgs = Record<string, unknown> & { messages: unknown[] };

/** Objects known to be deeply frozen (checked once each). */
const FROZEN = new WeakSet<object>();

function deeplyFrozen(value: unknown): boolean {
  if (typeof value !== "object" || value === null) return true;
  if (FROZEN.has(value)) return true;
  if (!Object.isFrozen(value) || !Object.values(value).every(deeplyFrozen)) return false;
  FROZEN.add(value);
  return true;
}

function snapshot(message: unknown): unknown {
  if (deeplyFrozen(message)) return message;
  return sameFlat(message, message) ? { ...(message as object) } : null;
}

/** Whether `a` and `b` are flat objects with the same keys and equal primitive values. */
function sameFlat(a: unknown, b: unknown): boolean {
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  const keys = Object.keys(a);
  if (keys.length !== Object.keys(b).length) return false;
  return keys.every((key) => {
    const x = (a as Record<string, unknown>)[key];
    return (typeof x !== "object" || x === null) && x === (b as Record<string, unknown>)[key];
  });
}

function partsOf(
  kept: { messages: readonly unknown[] } | null,
  messages: readonly unknown[],
): MessagesPart[] {
  if (kept === null) return [{ add: [...messages] }];
  const base = kept.messages;
  const at = new Map<unknown, number>();
  base.forEach((m, i) => {
    if (!at.has(m) && deeplyFrozen(m)) at.set(m, i);
  });
  const parts: MessagesPart[] = [];
  messages.forEach((message, k) => {
    const last = parts.at(-1);
    const next = last !== undefined && "copy" in last ? last.copy[1] : -1;
    let found = deeplyFrozen(message) ? at.get(message) : undefined;
    if (found === undefined && next >= 0 && sameFlat(base[next], message)) found = next;
    if (found === undefined && sameFlat(base[k], message)) found = k;
    if (found === undefined) {
      if (last !== undefined && "add" in last) last.add.push(message);
      else parts.push({ add: [message] });
    } else if (found === next) (last as { copy: [number, number] }).copy[1]++;
    else parts.push({ copy: [found, found + 1] });
  });
  return parts;
}

/**
 * Runs `context.prepare` through `send` with its messages as a delta of what the worker keeps,
 * and returns the hook's value: `args.messages` itself when the hook handed them back unchanged.
 * A worker that keeps another base (`invalid_request`) is asked once more with the whole list.
 *
 * @throws {KlbrError} whatever `send` throws; `hook_failed` for a reply outside the protocol.
 */
export async function prepareWithDelta(
  kept: PreparedMessages,
  args: PrepareArgs,
  send: (fields: { args: Record<string, unknown>; messages: MessagesDelta }) => Promise<unknown>,
): Promise<unknown> {
  const { messages, ...rest } = args;
  for (let attempt = 0;; attempt++) {
    const delta = kept.next(messages);
    let reply: unknown;
    try {
      reply = await send({ args: rest, messages: delta });
    } catch (error) {
      kept.forget();
      const code = (error as { cause?: { code?: unknown } }).cause?.code;
      if (attempt === 0 && delta.base !== null && code === "invalid_request") continue;
      throw error;
    }
    const answer = reply as { unchanged?: unknown; value?: unknown } | null;
    if (answer?.unchanged === true) return messages;
    if (answer !== null && typeof answer === "object" && "value" in answer) return answer.value;
    kept.forget();
    throw new KlbrError(
      "hook_failed",
      `cannot run hook context.prepare: the worker answered outside the protocol (got ${
        JSON.stringify(reply)?.slice(0, 200)
      })`,
    );
  }
}
