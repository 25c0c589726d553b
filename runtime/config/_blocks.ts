/**
 * The configuration's blocks beside the routes: `sandbox` (how child processes are confined
 * and limited), `workspace` (whether cells may change klbr's own code) and `lanes`
 * (per-client bounds and the read-only view). Their defaults live here.
 *
 * @module
 */

import { z } from "zod";
import { expected, show, timeoutMs, whole } from "./_fields.ts";

const UNITS: Record<string, number> = {
  "": 1,
  B: 1,
  KiB: 2 ** 10,
  MiB: 2 ** 20,
  GiB: 2 ** 30,
  TiB: 2 ** 40,
};

/** A size: whole bytes, or a string such as `"512MiB"` or `"1GiB"`; at least `min` bytes. */
const byteSize = (min: number) =>
  z.union([z.int(), z.string()], expected('bytes, or a size such as "1GiB"')).transform(
    (value, ctx) => {
      const match = typeof value === "number"
        ? [String(value), String(value), ""]
        : /^\s*(\d+)\s*(B|KiB|MiB|GiB|TiB)?\s*$/.exec(value);
      const bytes = match === null ? NaN : Number(match[1]) * UNITS[match[2] ?? ""];
      if (!Number.isSafeInteger(bytes) || bytes < min) {
        ctx.addIssue({
          code: "custom",
          message: `expected a size of at least ${min} bytes, such as "1GiB" (got ${show(value)})`,
        });
        return z.NEVER;
      }
      return bytes;
    },
  );

/**
 * The `sandbox` node: how the workbench, the hook workers, `workspace.run` and job workbenches
 * are confined, and the limits of each of their process trees. `auto` confines them with
 * bubblewrap where it works and says so where it cannot; `required` refuses to start instead.
 */
export const SandboxSchema = z.strictObject({
  mode: z.enum(["auto", "required"], expected("auto or required")).default("auto"),
  /** Whether confined processes may use the network (a new, empty network namespace if not). */
  network: z.boolean(expected("#true or #false")).default(false),
  /** Processes and threads of one tree at once; a fork past it fails and ends the cell. */
  max_processes: whole("a whole number", 16, 100_000).default(256),
  /** Memory of one tree (cgroups), or address space of each process (rlimits). */
  memory: byteSize(64 * 2 ** 20).default(2 ** 30),
  /** CPU weight of one tree against the daemon's 100 (cgroups only). */
  cpu_weight: whole("a whole number", 1, 10_000).default(50),
  /** The largest file a confined process may write (RLIMIT_FSIZE). */
  max_file_size: byteSize(2 ** 20).default(4 * 2 ** 30),
});

/**
 * The `workspace` node: `self_edit #true` lets cells change klbr's own code when the workspace
 * holds its checkout (the agent working on klbr); the git hooks and config stay read-only.
 */
export const WorkspaceSchema = z.strictObject({
  self_edit: z.boolean(expected("#true or #false")).default(false),
});

/** The `lanes` node: per-client bounds of the lane server and the read-only view. */
export const LanesSchema = z.strictObject({
  /** Whether a connection without the token or a session cookie may watch, read-only. */
  view_without_token: z.boolean(expected("#true or #false")).default(false),
  /** Lanes (sockets that said hello) at once; past it a viewer is refused, never the operator. */
  max_connections: whole("a whole number", 1, 100_000).default(64),
  /** Sockets waiting for hello at once, apart from the lanes; past it the oldest is closed. */
  max_pending_hello: whole("a whole number", 1, 100_000).default(256),
  /** How long a socket may stay open without saying hello. */
  hello_timeout_ms: timeoutMs().default(3_000),
  /**
   * Inputs one connection may have received and not yet acknowledged; past it the daemon
   * handles none of that connection's messages until its acknowledgements drain.
   */
  max_unacked_inputs: whole("a whole number", 1, 100_000).default(256),
  /** The largest file the page may attach to a message (`POST /attachments`); 0 refuses all. */
  attachment_max_bytes: z.int(expected("whole bytes")).min(0, expected("0 or more bytes"))
    .max(1 << 28, expected("at most 268435456 bytes")).default(8 * 1024 * 1024),
});

/** The field names of each block node, for "unknown field" errors. */
export const BLOCK_FIELD_NAMES = {
  sandbox: Object.keys(SandboxSchema.shape),
  workspace: Object.keys(WorkspaceSchema.shape),
  lanes: Object.keys(LanesSchema.shape),
};
