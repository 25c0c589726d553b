/**
 * Every record type's documented example (`docs/protocol.md`) through the page's lane
 * derivation: each lands in the lane of its type, read by its schema; an unknown type and a
 * malformed body land in the events lane as `unknown record <type>`, never dropped.
 *
 * @module
 */

import assert from "node:assert/strict";
import fc from "fast-check";
import { type LaneRecord, RECORD_TYPES, type RecordType } from "../../runtime/core/mod.ts";
import { deriveLanes, type LaneView } from "../../ui/src/lane_view.ts";
import { recordExamples } from "../_helpers/record_examples.ts";

type Lane = "input" | "send" | "scratchpad" | "cells" | "events";

/** Where a record of each type lands when it is the only record. */
const EXPECTED: { [T in RecordType]: Lane } = {
  "input.admitted": "input",
  "send": "send",
  "outbox.pending": "send",
  "scratchpad": "scratchpad",
  "reasoning": "scratchpad",
  "cell.started": "cells",
  "cell.finished": "cells",
  // A step whose pending record the page never saw is an event; after it, see below.
  "outbox.attempting": "events",
  "outbox.confirmed": "events",
  "outbox.failed": "events",
  "outbox.unknown": "events",
  "outbox.rate_limited": "events",
  "input.replied": "events",
  "input.ignored": "events",
  "input.edited": "events",
  "input.deleted": "events",
  "frame.accepted": "events",
  "frame.finished": "events",
  "frame.abandoned": "events",
  "frame.resumed": "events",
  "kernel.reset": "events",
  "activation": "events",
  "release.last_good": "events",
  "release.recovered": "events",
  "hook.failed": "events",
  "role.loaded": "events",
  "candidate.failed": "events",
  "session.stalled": "events",
  "recovery": "events",
  "input.expired": "events",
  "turn.retrying": "events",
  "model.reply": "events",
  "model.failing": "events",
  "model.recovered": "events",
  "turn.reminded": "events",
  "daemon.stopping": "events",
  "operator": "events",
  "context.compacted": "events",
  "route.adapted": "events",
  "context.repaired": "events",
  "turn.started": "events",
  "turn.ended": "events",
  "code.patch": "events",
  "timer.set": "events",
  "timer.fired": "events",
  "timer.cancelled": "events",
  "job.state": "events",
  "job.queued": "events",
  "job.cell": "events",
  "model_call": "events",
  "budget.exhausted": "events",
  "maintenance.started": "events",
  "maintenance.finished": "events",
};

function record(seq: number, type: string, data: unknown): LaneRecord {
  return {
    kind: "record",
    session: "default",
    seq,
    at: 1_736_933_400_000 + seq,
    type,
    data: data as LaneRecord["data"],
  };
}

/** The lanes a view put `seq` in; a correct view gives exactly one. */
function lanesOf(view: LaneView, seq: number): Lane[] {
  const lanes: Lane[] = [];
  for (const item of view.conversation) {
    const steps = item.lane === "send" ? item.delivery?.steps ?? [] : [];
    if (item.seq === seq || steps.some((s) => s.seq === seq)) lanes.push(item.lane);
  }
  if (view.scratchpad.some((s) => s.seq === seq)) lanes.push("scratchpad");
  if (view.cells.some((c) => c.seq === seq || c.finishedSeq === seq)) lanes.push("cells");
  if (view.events.some((e) => e.seq === seq)) lanes.push("events");
  return lanes;
}

Deno.test("`deriveLanes()` puts each documented record example in its type's lane, read by its schema", () => {
  const examples = recordExamples();
  assert.deepEqual(
    [...examples.map((e) => e.type)].sort(),
    [...RECORD_TYPES].sort(),
    "one example per type",
  );
  for (const example of examples) {
    const view = deriveLanes([record(1, example.type, example.data)]);
    const expected = EXPECTED[example.type as RecordType];
    assert.deepEqual(lanesOf(view, 1), [expected], example.type);
    for (const event of view.events) {
      assert.doesNotMatch(event.title, /^unknown record/, `${example.type}: ${event.detail}`);
    }
  }
});

Deno.test("`deriveLanes()` reads each documented example's fields, not a guess", () => {
  const byType = new Map(recordExamples().map((e) => [e.type, e.data]));
  const view = deriveLanes(
    ["input.admitted", "cell.started", "cell.finished", "scratchpad", "send", "outbox.pending"]
      .map((type, i) => record(i + 1, type, byType.get(type))),
  );
  const [input, send, outbox] = view.conversation;
  assert.ok(input.lane === "input" && send.lane === "send" && outbox.lane === "send");
  assert.deepEqual(
    [input.inputId, input.text, input.clientMsgId, input.sourceKind, input.conversation],
    ["in_01JHMMRR878CS2QQ58HYY0RD74", "Is the build green?", "m-0001", "local", "local:default"],
  );
  assert.deepEqual([send.text, send.state], ["Build is green; pushed nothing.", "delivered"]);
  assert.deepEqual([outbox.conversation, outbox.text, outbox.state], [
    "discord:555",
    "Build is green.",
    "pending",
  ]);
  const [cell] = view.cells;
  assert.deepEqual(
    [cell.state, cell.outcome, cell.stdout, cell.durationMs, cell.finishedSeq],
    ["finished", "ok", "runtime/lanes/_server.ts:12: TODO\n", 42, 3],
  );
  assert.deepEqual(view.scratchpad.map((s) => [s.text, s.partial]), [[
    "I will check the build first.",
    false,
  ]]);
});

Deno.test("`deriveLanes()` shows every documented example once when they come as one log", () => {
  // In document order the outbox steps follow their pending row, so they join its message.
  const list = recordExamples().map((e, i) => record(i + 1, e.type, e.data));
  const view = deriveLanes(list);
  for (const r of list) assert.equal(lanesOf(view, r.seq).length, 1, `${r.type} #${r.seq}`);
  const outbox = view.conversation.find((item) => item.lane === "send" && item.delivery);
  assert.deepEqual(
    outbox?.lane === "send" ? outbox.delivery?.steps.map((s) => s.state) : [],
    // `outbox.rate_limited` moves the row back to pending.
    ["attempting", "confirmed", "failed", "unknown", "pending"],
  );
  assert.deepEqual(view.events.filter((e) => e.title.startsWith("unknown record")), []);
});

Deno.test("`deriveLanes()` shows an unknown type and a malformed body in the events lane as unknown records", () => {
  const view = deriveLanes([
    record(1, "job.started", { job_id: "job_01JHMMRR878CS2QQ58HYY0RD73" }),
    record(2, "send", { text: "no ids, no conversation" }),
    record(3, "cell.started", "print(1)"),
  ]);
  assert.deepEqual(view.conversation, []);
  assert.deepEqual(view.cells, []);
  assert.deepEqual(view.events.map((e) => [e.seq, e.type, e.title, e.severity]), [
    [1, "job.started", "unknown record job.started", "info"],
    [2, "send", "unknown record send", "warning"],
    [3, "cell.started", "unknown record cell.started", "warning"],
  ]);
  assert.equal(
    view.events[1].detail,
    "its data does not match the type: send_id: Invalid input: expected string, received undefined; " +
      "conversation: Invalid input: expected string, received undefined; " +
      "frame_id: Invalid input: expected string, received undefined; " +
      "cell_id: Invalid input: expected string, received undefined; " +
      'state: Invalid input: expected "delivered"',
  );
  // The data is kept as it came, for the events lane to show.
  assert.deepEqual(view.events.map((e) => e.data), [
    { job_id: "job_01JHMMRR878CS2QQ58HYY0RD73" },
    { text: "no ids, no conversation" },
    "print(1)",
  ]);
});

Deno.test("`deriveLanes()` keeps fields a type does not name and still reads the record", () => {
  const [example] = recordExamples().filter((e) => e.type === "send");
  const view = deriveLanes([
    record(1, "send", { ...(example.data as object), added_later: { by: "a newer writer" } }),
  ]);
  assert.deepEqual(lanesOf(view, 1), ["send"]);
});

Deno.test("`deriveLanes()` shows each record once for any mix of valid records", () => {
  // Valid bodies with a few shared ids, so finishes join cells, steps join outbox rows and
  // frames move inputs in every order.
  const examples = recordExamples();
  const pick = fc.record({
    example: fc.integer({ min: 0, max: examples.length - 1 }),
    id: fc.constantFrom("a", "b"),
  });
  fc.assert(
    fc.property(fc.array(pick, { maxLength: 60 }), (picks) => {
      const list = picks.map(({ example, id }, i) => {
        const data = { ...(examples[example].data as Record<string, unknown>) };
        for (const key of ["cell_id", "outbox_id", "input_id", "frame_id"]) {
          if (key in data) data[key] = `${key}_${id}`;
        }
        if ("input_ids" in data) data.input_ids = [`input_id_${id}`];
        return record(i + 1, examples[example].type, data);
      });
      const view = deriveLanes(list);
      for (const r of list) assert.equal(lanesOf(view, r.seq).length, 1, `${r.type} #${r.seq}`);
      assert.deepEqual(view.events.filter((e) => e.title.startsWith("unknown record")), []);
    }),
    { numRuns: 300 },
  );
});
