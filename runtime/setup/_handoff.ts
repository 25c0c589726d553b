/**
 * The launcher's hand-over to the daemon it started: the real interpreter and what the
 * launcher's bubblewrap probe found, one JSON line on the daemon's stdin. The launcher starts
 * the daemon as soon as the configuration gives its permission set, and finds the interpreter
 * and probes bubblewrap while the daemon loads its modules; the daemon waits for this line
 * before it touches the state directory, and uses the probe's outcome instead of probing again.
 *
 * @module
 */

import { z } from "zod";
import { KlbrError } from "../core/mod.ts";

/** What the launcher hands over. */
export const LauncherHandoff = z.object({
  /** The real interpreter (never a shim) and its home. */
  python: z.object({ executable: z.string().min(1), home: z.string().min(1) }).strict(),
  /** The launcher's probe: whether children can be confined here, and if not why. */
  sandbox: z.object({
    mode: z.enum(["bwrap", "none"]),
    reason: z.string().nullable(),
    network: z.boolean(),
    userns: z.boolean(),
    usernsReason: z.string().nullable(),
  }).strict(),
}).strict();
/** What the launcher hands over. */
export type LauncherHandoff = z.infer<typeof LauncherHandoff>;

/** The hand-over as the one line the launcher writes. */
export function encodeHandoff(handoff: LauncherHandoff): Uint8Array {
  return new TextEncoder().encode(`${JSON.stringify(LauncherHandoff.parse(handoff))}\n`);
}

/** The most a hand-over line may hold. */
const MAX_HANDOFF_BYTES = 64 * 1024;

/**
 * Reads the launcher's one line from `stream` (the daemon's stdin) and validates it; the rest
 * of the stream is left unread.
 *
 * @throws {KlbrError} `invalid_input` when the stream ends before a line, or the line is too
 * long, not JSON or not a hand-over.
 * @example
 * ```ts
 * const { python, sandbox } = await readHandoff(Deno.stdin.readable);
 * ```
 */
export async function readHandoff(stream: ReadableStream<Uint8Array>): Promise<LauncherHandoff> {
  const reader = stream.getReader();
  const decoder = new TextDecoder();
  let text = "";
  let size = 0;
  try {
    while (size <= MAX_HANDOFF_BYTES) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
      size += value.length;
      if (value.includes(10)) break;
    }
  } finally {
    reader.releaseLock();
  }
  text += decoder.decode();
  const end = text.indexOf("\n");
  if (end < 0) {
    throw new KlbrError(
      "invalid_input",
      `cannot start the daemon: the launcher's hand-over ended before one whole line of at most 64 KiB (got ${size} bytes)`,
    );
  }
  let json: unknown;
  try {
    json = JSON.parse(text.slice(0, end));
  } catch (cause) {
    throw new KlbrError(
      "invalid_input",
      `cannot start the daemon: the launcher's hand-over is not JSON (got ${
        JSON.stringify(text.slice(0, 80))
      })`,
      { cause },
    );
  }
  const parsed = LauncherHandoff.safeParse(json);
  if (!parsed.success) {
    throw new KlbrError(
      "invalid_input",
      `cannot start the daemon: the launcher's hand-over is not one (got ${
        JSON.stringify(text.slice(0, 80))
      })`,
    );
  }
  return parsed.data;
}
