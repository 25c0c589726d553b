/**
 * How the page shows an input that ends without a frame (ignored by a plan, expired) and the
 * inputs the status says have waited too long.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { LaneRecord } from "../../runtime/core/mod.ts";
import { deriveLanes, dispositionLabel } from "../../ui/src/lane_view.ts";
import { waitingLine } from "../../ui/src/waiting_inputs.ts";

const record = (seq: number, type: string, data: Record<string, unknown>): LaneRecord => ({
  kind: "record",
  session: "default",
  seq,
  at: 1_736_933_400_000 + seq,
  type,
  data,
});

const admitted = (seq: number, id: string) =>
  record(seq, "input.admitted", {
    input_id: id,
    source_kind: "local",
    dedupe_key: `local:cl_test:${id}`,
    conversation_id: "local:default",
    author: "owner",
    received_at: 1_736_933_400_000,
    body: "hi",
  });

Deno.test("`deriveLanes()` shows an ignored and an expired input with their reason", () => {
  const view = deriveLanes([
    admitted(1, "in_a"),
    admitted(2, "in_b"),
    admitted(3, "in_c"),
    record(4, "input.ignored", {
      input_id: "in_a",
      frame_id: "fr_1",
      reason: "small talk",
      by: "agent",
    }),
    record(5, "input.expired", {
      input_id: "in_b",
      reason: "pending for more than 1000 ms",
      waited_ms: 1200,
    }),
  ]);
  const a = view.inputs.get("in_a")!;
  const b = view.inputs.get("in_b")!;
  assert.equal(dispositionLabel(a.disposition), "ignored: small talk");
  assert.equal(dispositionLabel(b.disposition), "expired: pending for more than 1000 ms");
  assert.equal(dispositionLabel(view.inputs.get("in_c")!.disposition), "pending");
  // The records are runtime events too: nothing is dropped.
  assert.deepEqual(view.events.map((e) => e.type), ["input.ignored", "input.expired"]);
});

Deno.test("`waitingLine()` says how many of the session's inputs wait over the threshold, and which", () => {
  const session = {
    waiting_inputs: 2,
    waiting_threshold_ms: 300_000,
    waiting: [{ id: "in_a", waited_ms: 400_000 }, { id: "in_b", waited_ms: 360_000 }],
  };
  assert.deepEqual(waitingLine(session), {
    count: 2,
    label: "2 waiting over 300 s: in_a (400 s), in_b (360 s)",
  });
  assert.deepEqual(
    waitingLine({ waiting_inputs: 0, waiting_threshold_ms: 300_000, waiting: [] }),
    { count: 0, label: "none over 300 s" },
  );
  assert.equal(waitingLine(undefined), undefined);
});
