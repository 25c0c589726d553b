/**
 * The page's lane derivation: which lane each record lands in, the state each input and send
 * shows, and that no record is shown twice or lost — whatever shape its `data` has.
 *
 * @module
 */

import assert from "node:assert/strict";
import fc from "fast-check";
import type { LaneRecord } from "../../runtime/core/mod.ts";
import {
  deriveLanes,
  dispositionLabel,
  type InputItem,
  type LaneView,
} from "../../ui/src/lane_view.ts";
import { rec, titleOf } from "./_record_data.ts";

let clock = 1_736_933_400_000;

function records(...items: [string, Record<string, unknown>][]): LaneRecord[] {
  return items.map(([type, data], i) => ({
    kind: "record",
    session: "default",
    seq: i + 1,
    at: clock += 1000,
    type,
    data,
  }));
}

/** Every `seq` a page would render for the view: one element per record. */
function renderedSeqs(view: LaneView): number[] {
  return [
    ...view.conversation.flatMap((item) =>
      item.lane === "send" && item.delivery !== undefined
        ? [item.seq, ...item.delivery.steps.map((step) => step.seq)]
        : [item.seq]
    ),
    ...view.scratchpad.map((item) => item.seq),
    ...view.cells.flatMap((cell) =>
      cell.finishedSeq === undefined ? [cell.seq] : [cell.seq, cell.finishedSeq]
    ),
    ...view.events.map((event) => event.seq),
  ].sort((a, b) => a - b);
}

function input(view: LaneView, id: string): InputItem {
  const item = view.inputs.get(id);
  assert.ok(item, `no input ${id}`);
  return item;
}

const ADMITTED = (id: string, body: unknown = "hi") =>
  rec("input.admitted", {
    input_id: id,
    source_kind: "local",
    dedupe_key: `local:web-1:m-${id}`,
    conversation_id: "local:default",
    author: "owner",
    body,
    client_msg_id: `m-${id}`,
  });

Deno.test("`deriveLanes()` renders every record exactly once for any mix of types and data", () => {
  // The page's "each durable record once" rests on this: one element per seq, none dropped.
  const type = fc.constantFrom(
    "input.admitted",
    "send",
    "scratchpad",
    "cell.started",
    "cell.finished",
    "frame.accepted",
    "frame.finished",
    "frame.abandoned",
    "kernel.reset",
    "activation",
    "hook.failed",
    "operator",
    "turn.started",
    "turn.ended",
    "send.state",
    "something.new",
    "outbox.pending",
    "outbox.attempting",
    "outbox.confirmed",
    "outbox.failed",
    "outbox.unknown",
    "frame.resumed",
    "recovery",
    "session.stalled",
    "release.last_good",
    "release.recovered",
  );
  const value = fc.oneof(fc.string(), fc.integer(), fc.boolean(), fc.constant(null));
  const data = fc.record({
    cell_id: fc.constantFrom("cell_a", "cell_b", "cell_c"),
    input_id: fc.constantFrom("in_a", "in_b"),
    input_ids: fc.array(fc.constantFrom("in_a", "in_b", "in_x")),
    frame_id: fc.constantFrom("fr_1", "fr_2"),
    send_id: fc.constantFrom("snd_1", "snd_2"),
    outbox_id: fc.constantFrom("ob_1", "ob_2"),
    state: fc.constantFrom("pending", "attempting", "confirmed", "failed", "unknown"),
    text: value,
    result: fc.oneof(value, fc.dictionary(fc.string(), value)),
    error: fc.oneof(value, fc.dictionary(fc.string(), value)),
  }, { requiredKeys: [] });
  fc.assert(
    fc.property(fc.array(fc.tuple(type, data), { maxLength: 60 }), (items) => {
      const list = records(...items);
      const view = deriveLanes(list);
      assert.deepEqual(renderedSeqs(view), list.map((r) => r.seq));
      // An outbox step shown inside its message is never also an event.
      const steps = view.conversation.flatMap((item) =>
        item.lane === "send" ? item.delivery?.steps.map((step) => step.seq) ?? [] : []
      );
      for (const event of view.events) assert.ok(!steps.includes(event.seq));
    }),
    { numRuns: 300 },
  );
});

Deno.test("`deriveLanes()` shows an input pending, then taken up by turn N, then done", () => {
  const list = records(
    ADMITTED("in_a"),
    ADMITTED("in_b"),
    rec("frame.accepted", { frame_id: "fr_1", number: 4, input_ids: ["in_a"] }),
  );
  let view = deriveLanes(list);
  assert.equal(dispositionLabel(input(view, "in_a").disposition), "taken up by turn 4");
  assert.equal(dispositionLabel(input(view, "in_b").disposition), "pending");
  list.push(
    ...records(rec("frame.finished", {
      frame_id: "fr_1",
      number: 4,
      state: "done",
      input_ids: ["in_a"],
    })).map((r) => ({ ...r, seq: 4 })),
  );
  view = deriveLanes(list);
  assert.equal(dispositionLabel(input(view, "in_a").disposition), "taken up by turn 4 · done");
  assert.equal(view.events.map((e) => e.title).join("|"), "Turn 4 accepted|Turn 4 finished");
});

Deno.test("`deriveLanes()` gives an abandoned frame's inputs back as pending again", () => {
  const view = deriveLanes(records(
    ADMITTED("in_a"),
    rec("frame.accepted", { frame_id: "fr_1", number: 2, input_ids: ["in_a"] }),
    rec("frame.abandoned", {
      frame_id: "fr_1",
      number: 2,
      reason: "hook timed out",
      input_ids: ["in_a"],
    }),
  ));
  assert.equal(
    dispositionLabel(input(view, "in_a").disposition),
    "pending again (turn 2 gave it back)",
  );
  assert.equal(view.events[1].severity, "warning");
  assert.equal(view.events[1].detail, "hook timed out · its inputs are pending again");
});

Deno.test("`deriveLanes()` marks inputs of a failed frame as failed, not done", () => {
  const view = deriveLanes(records(
    ADMITTED("in_a"),
    rec("frame.accepted", { frame_id: "fr_1", number: 1, input_ids: ["in_a"] }),
    rec("frame.finished", {
      frame_id: "fr_1",
      number: 1,
      state: "failed",
      reason: "stopped",
      input_ids: ["in_a"],
    }),
  ));
  assert.equal(dispositionLabel(input(view, "in_a").disposition), "taken up by turn 1 · failed");
  assert.equal(view.events[1].title, "Turn 1 failed");
  assert.equal(view.events[1].severity, "error");
});

Deno.test("`deriveLanes()` keeps a later frame's disposition over an earlier abandoned one", () => {
  const view = deriveLanes(records(
    ADMITTED("in_a"),
    rec("frame.accepted", { frame_id: "fr_1", number: 1, input_ids: ["in_a"] }),
    rec("frame.abandoned", { frame_id: "fr_1", number: 1, input_ids: ["in_a"] }),
    rec("frame.accepted", { frame_id: "fr_2", number: 2, input_ids: ["in_a"] }),
    // A late end of the first frame must not overwrite the second frame's claim.
    rec("frame.finished", { frame_id: "fr_1", number: 1, state: "done", input_ids: ["in_a"] }),
    rec("frame.abandoned", { frame_id: "fr_1", number: 1, input_ids: ["in_a"] }),
  ));
  assert.equal(dispositionLabel(input(view, "in_a").disposition), "taken up by turn 2");
});

Deno.test("`deriveLanes()` joins a cell's finish and reads its result", () => {
  const view = deriveLanes(records(
    rec("cell.started", { cell_id: "cell_a", code: "print(1)" }),
    rec("cell.started", { cell_id: "cell_b", code: "1/0" }),
    rec("cell.finished", {
      cell_id: "cell_a",
      outcome: "ok",
      result: {
        stdout: "1\n",
        stderr: "",
        value: null,
        error: null,
        wait: null,
        duration_ms: 41.7,
      },
    }),
    rec("cell.finished", {
      cell_id: "cell_b",
      outcome: "error",
      result: {
        value: null,
        stdout: "",
        stderr: "warn\n",
        error: { type: "ZeroDivisionError", message: "division by zero", traceback: "tb" },
        duration_ms: 3,
        wait: { reason: "user" },
      },
    }),
  ));
  assert.equal(view.cells.length, 2);
  const [a, b] = view.cells;
  assert.deepEqual(
    [a.state, a.outcome, a.stdout, a.durationMs, a.value, a.error, a.finishedSeq],
    ["finished", "ok", "1\n", 41.7, undefined, undefined, 3],
  );
  assert.deepEqual(
    [b.outcome, b.stderr, b.error, b.wait, b.finishedSeq],
    [
      "error",
      "warn\n",
      { type: "ZeroDivisionError", message: "division by zero", traceback: "tb" },
      "user",
      4,
    ],
  );
});

Deno.test("`deriveLanes()` shows a cell without a finish as running", () => {
  const view = deriveLanes(records(rec("cell.started", { cell_id: "cell_a", code: "x" })));
  assert.equal(view.cells[0].state, "running");
  assert.equal(view.cells[0].finishedAt, undefined);
});

Deno.test("`deriveLanes()` marks a running cell interrupted by a kernel reset", () => {
  const view = deriveLanes(records(
    rec("cell.started", { cell_id: "cell_a", code: "x" }),
    rec("kernel.reset", {
      generation: 2,
      reason: "framing_failure",
      skills_revision: "9b0c6a3e51f2",
      heap_restored: false,
    }),
  ));
  assert.equal(view.cells[0].state, "interrupted");
  assert.equal(view.events[0].title, "Kernel reset (generation 2)");
  assert.equal(
    view.events[0].detail,
    "framing_failure · skills 9b0c6a3e51f2 · Python heap not restored",
  );
});

Deno.test("`deriveLanes()` still joins a finish that comes after the reset that interrupted it", () => {
  const view = deriveLanes(records(
    rec("cell.started", { cell_id: "cell_a", code: "x" }),
    rec("kernel.reset", { generation: 2 }),
    rec("cell.finished", { cell_id: "cell_a", outcome: "killed" }),
  ));
  assert.equal(view.cells.length, 1);
  assert.deepEqual([view.cells[0].state, view.cells[0].outcome], ["finished", "killed"]);
});

Deno.test("`deriveLanes()` gives a finish without a start its own card", () => {
  const view = deriveLanes(records(rec("cell.finished", { cell_id: "cell_z", outcome: "ok" })));
  assert.equal(view.cells.length, 1);
  assert.deepEqual(
    [view.cells[0].seq, view.cells[0].finishedSeq, view.cells[0].state],
    [1, undefined, "finished"],
  );
});

Deno.test("`deriveLanes()` gives a repeated finish of one cell its own card", () => {
  const view = deriveLanes(records(
    rec("cell.started", { cell_id: "cell_a", code: "x" }),
    rec("cell.finished", { cell_id: "cell_a", outcome: "ok" }),
    rec("cell.finished", { cell_id: "cell_a", outcome: "ok" }),
  ));
  assert.deepEqual(renderedSeqs(view), [1, 2, 3]);
});

Deno.test("`deriveLanes()` marks partial scratchpad drafts and keeps complete ones unmarked", () => {
  const view = deriveLanes(records(
    rec("scratchpad", { text: "thinking", partial: false, frame_id: "fr_1" }),
    rec("scratchpad", { text: "cut off", partial: true, frame_id: "fr_2" }),
    ["scratchpad", { text: "no flag" }],
  ));
  assert.deepEqual(
    view.scratchpad.map((s) => [s.text, s.partial, s.turn]),
    [["thinking", false, "fr_1"], ["cut off", true, "fr_2"]],
  );
  // A draft without its frame and flag is no body the runtime writes: shown, but as unknown.
  assert.deepEqual(view.events.map((e) => [e.seq, e.title, e.severity]), [
    [3, "unknown record scratchpad", "warning"],
  ]);
});

Deno.test("`deriveLanes()` shows a local send delivered and a remote one by its outbox state", () => {
  const view = deriveLanes(records(
    rec("send", { send_id: "snd_1", text: "done", conversation: "local:default" }),
    rec("outbox.pending", { outbox_id: "ob_2", body: "hey", conversation: "discord:1" }),
    rec("outbox.attempting", { outbox_id: "ob_2" }),
    rec("outbox.failed", { outbox_id: "ob_2", error: "HTTP 403: Missing Access" }),
    // No writer has a `send.state` record: it moves nothing and is shown as unknown.
    ["send.state", { send_id: "snd_1", state: "failed", error: "403" }],
  ));
  const states = view.conversation.map((item) => item.lane === "send" ? item.state : "");
  assert.deepEqual(states, ["delivered", "failed"]);
  assert.deepEqual(view.events.map((e) => [e.title, e.severity]), [
    ["unknown record send.state", "info"],
  ]);
});

Deno.test("`deriveLanes()` reads an input's text from a plain or a JSON body", () => {
  const view = deriveLanes(records(
    ADMITTED("in_a", "plain"),
    ["input.admitted", { input_id: "in_b", text: "from text" }],
    ADMITTED("in_c", { text: "nested" }),
    ADMITTED("in_d", { attachment: 1 }),
  ));
  assert.deepEqual(
    view.conversation.map((item) => item.text),
    ["plain", "nested", '{\n  "attachment": 1\n}'],
  );
  assert.equal(input(view, "in_a").clientMsgId, "m-in_a");
  // An input record without the fields the runtime writes is not guessed at: shown as unknown.
  assert.equal(view.inputs.has("in_b"), false);
  assert.deepEqual(view.events.map((e) => [e.seq, e.title]), [
    [2, "unknown record input.admitted"],
  ]);
  assert.match(view.events[0].detail, /^its data does not match the type: source_kind: /);
});

Deno.test("`deriveLanes()` shows records of unknown types as such in the events lane", () => {
  const view = deriveLanes(records(
    ["job.started", { job_id: "3fa2" }],
    ["job.failed", { error: "out of budget" }],
  ));
  const unknown = "a type this page does not know; its data is shown as it is";
  assert.deepEqual(
    view.events.map((e) => [e.type, e.title, e.detail, e.severity, e.data]),
    [
      ["job.started", "unknown record job.started", unknown, "info", { job_id: "3fa2" }],
      ["job.failed", "unknown record job.failed", unknown, "info", { error: "out of budget" }],
    ],
  );
});

Deno.test("`deriveLanes()` never throws on records whose data has unexpected types", () => {
  const data = fc.dictionary(
    fc.constantFrom(
      "input_id",
      "input_ids",
      "cell_id",
      "number",
      "text",
      "body",
      "partial",
      "result",
      "error",
      "state",
      "send_id",
      "generation",
      "epoch",
      "outbox_id",
      "stdout_artifact",
      "abandoned_frames",
      "failures",
    ),
    fc.anything(),
  );
  const type = fc.constantFrom(
    "input.admitted",
    "send",
    "scratchpad",
    "cell.started",
    "cell.finished",
    "frame.accepted",
    "frame.finished",
    "kernel.reset",
    "activation",
    "hook.failed",
    "send.state",
    "outbox.pending",
    "outbox.unknown",
    "frame.resumed",
    "recovery",
    "session.stalled",
    "release.recovered",
  );
  fc.assert(
    fc.property(fc.array(fc.tuple(type, data), { maxLength: 30 }), (items) => {
      const view = deriveLanes(records(...items));
      for (const item of view.conversation) assert.equal(typeof item.text, "string");
      for (const event of view.events) assert.equal(typeof event.title, "string");
    }),
    { numRuns: 300 },
  );
});

Deno.test("`describeReading()` titles a failed hook as an error with its message", () => {
  const [record] = records(rec("hook.failed", {
    hook: "attention.plan",
    error: "KeyError: 'pending'",
  }));
  assert.deepEqual(titleOf(record), {
    title: "Hook attention.plan failed",
    detail: "KeyError: 'pending'",
    severity: "error",
  });
});

Deno.test("`describeReading()` titles an activation with its release and epoch", () => {
  const [record] = records(["activation", {
    epoch: 8,
    release_id: "3fa2c41d9e8b7a6f5e4d3c2b1a0f9e8d",
    previous_release: "aa",
    reason: "operator",
  }]);
  assert.deepEqual(titleOf(record), {
    title: "Activated release 3fa2c41d9e8b…",
    detail: "behaviour version 8 · previous aa · operator",
    severity: "info",
  });
});
