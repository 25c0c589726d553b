/**
 * The HTTP side of the lane server answers errors through the same mapping as the socket.
 *
 * @module
 */

import assert from "node:assert/strict";
import { KlbrError, type Logger } from "../../../runtime/core/mod.ts";
import { createApp, type LaneHost } from "../../../runtime/lanes/mod.ts";

function keptLog(): { lines: string[]; log: Logger } {
  const lines: string[] = [];
  const line = (event: string, message: string) => lines.push(`${event}: ${message}`);
  return { lines, log: { info: line, warn: line, error: line } };
}

const NO_LANES = {} as LaneHost;

Deno.test("`createApp()` answers a KlbrError with its code, message and status", async () => {
  const { lines, log } = keptLog();
  const app = createApp({
    lanes: NO_LANES,
    log,
    health: () => {
      throw new KlbrError("shutting_down", "cannot answer: the daemon is shutting down", {
        status: 503,
      });
    },
  });
  const response = await app.request("/health");
  assert.equal(response.status, 503);
  assert.deepEqual(await response.json(), {
    code: "shutting_down",
    message: "cannot answer: the daemon is shutting down",
  });
  assert.deepEqual(lines, [], "a refusal is not a bug");
});

Deno.test("`createApp()` answers an unexpected error `internal` and logs its stack", async () => {
  const { lines, log } = keptLog();
  const app = createApp({
    lanes: NO_LANES,
    log,
    health: () => {
      throw new RangeError("secret detail");
    },
  });
  const response = await app.request("/health");
  assert.equal(response.status, 500);
  const body = await response.json();
  assert.deepEqual(body, { code: "internal", message: "internal error" });
  assert.equal(lines.length, 1);
  assert.match(lines[0], /^internal: unexpected error: RangeError: secret detail\n\s+at /);
});
