/**
 * `context.prepare`'s messages travel in the hook frame's own `messages` field, and a hook that
 * hands them back unchanged is answered `{unchanged: true}` instead of the whole list: the host
 * then uses its own messages without decoding or checking them.
 *
 * Who can corrupt what: the host's messages never leave the host process (the worker gets
 * JSON). The worker gives the hook its own deep copy and compares the answer with the list it
 * decoded, so a hook that edits its argument in place changes only its copy.
 *
 * @module
 */

import { KlbrError } from "../core/mod.ts";

/** `context.prepare`'s arguments: the messages and the rest. */
export type PrepareArgs = Record<string, unknown> & { messages: unknown[] };

/**
 * Runs `context.prepare` through `send`, its messages beside the other arguments, and returns
 * the hook's value: `args.messages` itself when the hook handed them back unchanged.
 *
 * @throws {KlbrError} whatever `send` throws; `hook_failed` for a reply outside the protocol.
 */
export async function prepareMessages(
  args: PrepareArgs,
  send: (fields: { args: Record<string, unknown>; messages: unknown[] }) => Promise<unknown>,
): Promise<unknown> {
  const { messages, ...rest } = args;
  const reply = await send({ args: rest, messages });
  const answer = reply as { unchanged?: unknown; value?: unknown } | null;
  if (answer?.unchanged === true) return messages;
  if (answer !== null && typeof answer === "object" && "value" in answer) return answer.value;
  throw new KlbrError(
    "hook_failed",
    `cannot run hook context.prepare: the worker answered outside the protocol (got ${
      JSON.stringify(reply)?.slice(0, 200)
    })`,
  );
}
