/**
 * The configuration's blocks beside the routes: `sandbox` (how child processes are
 * confined) and `lanes` (per-client bounds and the read-only view). Their defaults live here.
 *
 * @module
 */

import { z } from "zod";
import type { RawRoute } from "./_kdl.ts";

const show = (value: unknown): string =>
  typeof value === "string" ? JSON.stringify(value) : String(value);
const expected = (what: string) => ({
  error: (issue: { input?: unknown }) => `expected ${what} (got ${show(issue.input)})`,
});
const timeoutMs = () => z.int(expected("whole milliseconds")).min(1, expected("at least 1 ms"));

/**
 * The `sandbox` node: how the workbench, the hook workers and `workspace.run` are confined.
 * `auto` confines them with bubblewrap where it works and says so where it cannot;
 * `required` refuses to start instead.
 */
export const SandboxSchema = z.strictObject({
  mode: z.enum(["auto", "required"], expected("auto or required")).default("auto"),
  /** Whether confined processes may use the network (a new, empty network namespace if not). */
  network: z.boolean(expected("#true or #false")).default(false),
});

/** The `lanes` node: per-client bounds of the lane server and the read-only view. */
export const LanesSchema = z.strictObject({
  /** Whether a connection without the token or a session cookie may watch, read-only. */
  view_without_token: z.boolean(expected("#true or #false")).default(false),
  /** Lanes (sockets that said hello) at once; past it a viewer is refused, never the operator. */
  max_connections: z.int(expected("a whole number")).min(1, expected("at least 1"))
    .max(100_000, expected("at most 100000")).default(64),
  /** Sockets waiting for hello at once, apart from the lanes; past it the oldest is closed. */
  max_pending_hello: z.int(expected("a whole number")).min(1, expected("at least 1"))
    .max(100_000, expected("at most 100000")).default(256),
  /** How long a socket may stay open without saying hello. */
  hello_timeout_ms: timeoutMs().default(3_000),
});

const BLOCK_FIELD_NAMES = {
  sandbox: Object.keys(SandboxSchema.shape),
  lanes: Object.keys(LanesSchema.shape),
};

/**
 * Locates one issue of a `sandbox` or `lanes` block: its line and a sentence.
 */
export function blockIssue(
  block: "sandbox" | "lanes",
  raw: RawRoute | undefined,
  issue: z.core.$ZodIssue,
  order: number,
): { line: number; order: number; text: string } {
  const keys = issue.code === "unrecognized_keys" ? issue.keys : [];
  const field = keys.length > 0 ? keys.join(", ") : String(issue.path[1] ?? "");
  const message = keys.length > 0
    ? `unknown field, expected one of ${BLOCK_FIELD_NAMES[block].join(", ")} (got ${
      keys.join(", ")
    })`
    : issue.message;
  const line = raw?.lines.get(keys[0] ?? field) ?? raw?.line ?? 1;
  return { line, order, text: `${block} ${field}: ${message}` };
}
