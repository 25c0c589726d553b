/**
 * Turns a failed zod parse into the store's `invalid_input` error.
 *
 * @module
 */

import type { z } from "zod";
import { KlbrError } from "../../runtime/core/mod.ts";

/** Returns `cannot <action>: <field> <issue> (got <input, at most 200 characters>)`. */
export function schemaError(action: string, error: z.ZodError, input: unknown): KlbrError {
  const issue = error.issues[0];
  const field = issue.path.join(".");
  let got: unknown = input;
  if (field !== "" && typeof input === "object" && input !== null) {
    got = (input as Record<string, unknown>)[String(issue.path[0])];
  }
  let shown: string;
  try {
    shown = JSON.stringify(got)?.slice(0, 200) ?? String(got);
  } catch {
    shown = typeof got;
  }
  return new KlbrError(
    "invalid_input",
    `cannot ${action}: ${field || "the argument"} ${issue.message} (got ${shown})`,
  );
}

/** Returns whether `text` holds a C0 control character or DEL. */
export function hasControlCharacter(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code < 0x20 || code === 0x7f) return true;
  }
  return false;
}
