/**
 * What the conversation learns from a turn's records: a failing model against the inputs
 * waiting on it (attempts counted, the next retry, extra fields a writer adds) until the model
 * answers; the model, route and token counts (absent stays absent); unsent drafts; dates.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { LaneRecord } from "../../runtime/core/mod.ts";
import { deriveTurns, troubleText } from "../../ui/src/turn_view.ts";
import { healthWords, troubleTone } from "../../ui/src/health_words.ts";
import { tokenCount, when } from "../../ui/src/format.ts";
import { body } from "./_record_data.ts";

const FAILED = 'model failed: cannot stream from llm "main": no response from the provider';

function log(...entries: [string, Record<string, unknown>][]): LaneRecord[] {
  return entries.map(([type, data], i) => ({
    kind: "record",
    session: "default",
    seq: i + 1,
    at: 1_000_000 + i * 1000,
    type,
    data,
  }));
}

/** One failed attempt of frame `n` on input `in_1`: accepted, failed, given back. */
function failedAttempt(n: number): [string, Record<string, unknown>][] {
  const frame = { frame_id: `fr_${n}`, number: n, input_ids: ["in_1"] };
  return [
    ["frame.accepted", body("frame.accepted", frame)],
    ["turn.started", body("turn.started", { frame_id: `fr_${n}`, frame: n })],
    ["turn.ended", body("turn.ended", { frame_id: `fr_${n}`, reason: FAILED })],
    ["frame.abandoned", body("frame.abandoned", { ...frame, reason: FAILED })],
  ];
}

Deno.test("`deriveTurns()` counts failed model attempts against the waiting input and clears them when the model answers", () => {
  const records = log(
    ["input.admitted", body("input.admitted", { input_id: "in_1" })],
    ...failedAttempt(1),
    ...failedAttempt(2),
    ...failedAttempt(3),
  );
  const view = deriveTurns(records);
  const trouble = view.trouble.get("in_1");
  assert.equal(trouble?.attempt, 3);
  assert.equal(trouble?.reason, 'cannot stream from llm "main": no response from the provider');
  assert.equal(trouble?.stalled, false);
  assert.equal(troubleText(trouble!, 0), "The model is not answering (attempt 3)");
  assert.ok(view.current !== undefined);

  const answered = deriveTurns([
    ...records,
    ...log(
      [
        "frame.accepted",
        body("frame.accepted", { frame_id: "fr_4", number: 4, input_ids: ["in_1"] }),
      ],
      ["model.reply", body("model.reply", { frame_id: "fr_4" })],
    ).map((r, i) => ({ ...r, seq: records.length + i + 1 })),
  ]);
  assert.equal(answered.trouble.get("in_1"), undefined);
  assert.equal(answered.current, undefined);
});

Deno.test("`deriveTurns()` reads the fields a writer adds to a failure: url, of, next_in_ms, config_path", () => {
  const view = deriveTurns(log(
    ["input.admitted", body("input.admitted", { input_id: "in_1" })],
    ["frame.accepted", body("frame.accepted", { frame_id: "fr_1", input_ids: ["in_1"] })],
    ["turn.ended", {
      frame_id: "fr_1",
      reason: FAILED,
      url: "http://127.0.0.1:9/v1",
      attempt: 3,
      of: 6,
      next_in_ms: 4000,
      config_path: "/home/owner/.klbr/config.kdl",
    }],
  ));
  const trouble = view.trouble.get("in_1")!;
  // The record is at 1_002_000; the next attempt 4 s after it.
  assert.equal(
    troubleText(trouble, 1_002_000),
    "The model at http://127.0.0.1:9/v1 is not answering (attempt 3 of 6, next in 4 s) — see /home/owner/.klbr/config.kdl",
  );
  assert.match(troubleText(trouble, 1_006_500), /retrying now/);
});

Deno.test("`deriveTurns()` shows the session's model.failing record under its inputs, stalled when no retry is due, and model.recovered clears it", () => {
  const failing = (attempt: number, next: number | null) =>
    body("model.failing", {
      frame_id: `fr_${attempt}`,
      input_ids: ["in_1"],
      route: "main",
      url: "http://127.0.0.1:9/v1",
      model: "qwen",
      error: "connection refused",
      attempt,
      of: 7,
      next_retry_ms: next,
      config_path: "/home/owner/.klbr/config.kdl",
    });
  const records = log(
    ["input.admitted", body("input.admitted", { input_id: "in_1" })],
    ...failedAttempt(1),
    ["model.failing", failing(1, 2000)],
  );
  const first = deriveTurns(records).trouble.get("in_1")!;
  assert.equal(
    troubleText(first, records.at(-1)!.at),
    "The model at http://127.0.0.1:9/v1 is not answering (attempt 1 of 7, next in 2 s) — see /home/owner/.klbr/config.kdl",
  );
  assert.equal(first.reason, "connection refused");

  const stalled = deriveTurns(log(
    ["input.admitted", body("input.admitted", { input_id: "in_1" })],
    ...failedAttempt(7),
    ["model.failing", failing(7, null)],
  ));
  assert.equal(stalled.stalled, true);
  assert.match(troubleText(stalled.trouble.get("in_1")!, 0), /attempt 7 of 7, retries stopped/);

  const recovered = deriveTurns(log(
    ["input.admitted", body("input.admitted", { input_id: "in_1" })],
    ...failedAttempt(1),
    ["model.failing", failing(1, 2000)],
    [
      "frame.accepted",
      body("frame.accepted", { frame_id: "fr_2", number: 2, input_ids: ["in_1"] }),
    ],
    [
      "model.recovered",
      body("model.recovered", { frame_id: "fr_2", route: "main", url: "u", failed_attempts: 1 }),
    ],
  ));
  assert.equal(recovered.trouble.get("in_1"), undefined);
  assert.equal(recovered.current, undefined);
});

Deno.test("`deriveTurns()` takes a retry's attempt and delay, and a stall stops the countdown", () => {
  const view = deriveTurns(log(
    ["input.admitted", body("input.admitted", { input_id: "in_1" })],
    ["frame.accepted", body("frame.accepted", { frame_id: "fr_1", input_ids: ["in_1"] })],
    [
      "turn.retrying",
      body("turn.retrying", { frame_id: "fr_1", attempt: 2, delay_ms: 2000, reason: FAILED }),
    ],
  ));
  assert.equal(
    troubleText(view.trouble.get("in_1")!, 1_002_000),
    "The model is not answering (attempt 2, next in 2 s)",
  );
  const stalled = deriveTurns(log(
    ["input.admitted", body("input.admitted", { input_id: "in_1" })],
    ...failedAttempt(1),
    ["session.stalled", body("session.stalled", { failures: 6, message: "gave up" })],
  ));
  const trouble = stalled.trouble.get("in_1")!;
  assert.equal(trouble.stalled, true);
  assert.equal(trouble.of, 6);
  assert.match(troubleText(trouble, 0), /attempt 1 of 6, retries stopped until the next message/);
  assert.equal(stalled.stalled, true);
  assert.equal(troubleTone(undefined, stalled), "amber");
  assert.equal(healthWords(undefined, stalled)?.label, "session stalled");
});

Deno.test("`deriveTurns()` sums a turn's usage over its replies; a count never reported stays absent", () => {
  const frame = { frame_id: "fr_1", number: 5, input_ids: ["in_1"] };
  const view = deriveTurns(log(
    ["frame.accepted", body("frame.accepted", frame)],
    ["model.reply", body("model.reply", { usage: { prompt_tokens: 1000, completion_tokens: 20 } })],
    [
      "model.reply",
      body("model.reply", {
        route: "long",
        model: "big",
        usage: { prompt_tokens: 204, cache_read_tokens: 512 },
      }),
    ],
  ));
  const turn = view.turns.get("fr_1")!;
  assert.equal(turn.replies, 2);
  assert.deepEqual(turn.routes, ["main", "long"]);
  assert.deepEqual(turn.models, ["qwen2.5-coder", "big"]);
  assert.deepEqual(turn.usage, {
    promptTokens: 1204,
    completionTokens: 20,
    cacheReadTokens: 512,
    cacheWriteTokens: undefined,
  });
  assert.equal(tokenCount(turn.usage.cacheWriteTokens), "not reported");
  assert.equal(tokenCount(turn.usage.promptTokens), "1,204");
});

Deno.test("`deriveTurns()` shows a turn's last draft as unsent only when the turn ended without a send", () => {
  const turn = (n: number, send: boolean): [string, Record<string, unknown>][] => [
    ["input.admitted", body("input.admitted", { input_id: `in_${n}` })],
    [
      "frame.accepted",
      body("frame.accepted", { frame_id: `fr_${n}`, number: n, input_ids: [`in_${n}`] }),
    ],
    [
      "scratchpad",
      body("scratchpad", { frame_id: `fr_${n}`, text: `answer ${n}`, partial: false }),
    ],
    ...(send
      ? [["send", body("send", { frame_id: `fr_${n}` })] as [string, Record<string, unknown>]]
      : []),
    ["turn.ended", body("turn.ended", { frame_id: `fr_${n}`, reason: "turn.next: stop" })],
  ];
  const view = deriveTurns(log(...turn(1, true), ...turn(2, false)));
  assert.deepEqual([...view.drafts.keys()], ["in_2"]);
  assert.equal(view.drafts.get("in_2")?.text, "answer 2");
  assert.equal(view.drafts.get("in_2")?.turn, 2);
  // A turn still running (no end yet) or failing on the model has no unsent draft yet.
  const running = deriveTurns(log(...turn(3, false).slice(0, 3)));
  assert.equal(running.drafts.size, 0);
});

Deno.test("`when()` gives the clock time today, the day on another day and the year in another year", () => {
  const now = new Date(2025, 5, 14, 12, 0, 0).getTime();
  assert.equal(when(new Date(2025, 5, 14, 9, 5, 7).getTime(), now), "09:05:07");
  assert.equal(when(new Date(2025, 0, 3, 23, 59, 1).getTime(), now), "3 Jan 23:59:01");
  assert.equal(when(new Date(2024, 11, 31, 8, 0, 0).getTime(), now), "31 Dec 2024 08:00:00");
});
