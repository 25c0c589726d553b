/**
 * The daemon's logger: every line carries a timestamp, a level, a stable event name and a
 * sentence, as text for people or one JSON object a line for machines.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createLogger } from "../../../runtime/core/mod.ts";

const AT = Date.UTC(2026, 11, 2, 20, 5, 58, 123);

Deno.test("createLogger() writes text lines with time, level, event, sentence and fields", () => {
  const lines: string[] = [];
  const log = createLogger({ write: (line) => lines.push(line), clock: () => AT });
  log.info("behavior.release", "behaviour release 3fa2 at epoch 2", { epoch: 2, id: "3fa2" });
  log.warn("lane.refused", "refused operator access: wrong token");
  log.error("http.internal", "unexpected error", { detail: "two words", gone: undefined });
  assert.deepEqual(lines, [
    "2026-12-02T20:05:58.123Z INFO  behavior.release behaviour release 3fa2 at epoch 2 (epoch=2 id=3fa2)",
    "2026-12-02T20:05:58.123Z WARN  lane.refused refused operator access: wrong token",
    '2026-12-02T20:05:58.123Z ERROR http.internal unexpected error (detail="two words")',
  ]);
});

Deno.test("createLogger() in json writes one parseable object a line", () => {
  const lines: string[] = [];
  const log = createLogger({ format: "json", write: (line) => lines.push(line), clock: () => AT });
  log.warn("outbox.unknown", "outbox: 2 send(s) now unknown", { count: 2 });
  log.info("daemon.draining", "SIGTERM: draining\nnext line");
  assert.equal(lines.length, 2);
  assert.deepEqual(JSON.parse(lines[0]), {
    at: "2026-12-02T20:05:58.123Z",
    level: "warn",
    event: "outbox.unknown",
    message: "outbox: 2 send(s) now unknown",
    count: 2,
  });
  // A newline inside a message never splits a JSON line.
  assert.equal(JSON.parse(lines[1]).message, "SIGTERM: draining\nnext line");
});
