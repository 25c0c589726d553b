/**
 * The frames table: a frame consumes its inputs, ends once, and an abandoned frame gives them back.
 *
 * Every test runs against real SQLite files in a fresh temporary directory.
 *
 * @module
 */

import assert from "node:assert/strict";
import { readEvents } from "../../store/tables/events.ts";
import { adoptFrame, finishFrame, getFrame, openFrames } from "../../store/tables/frames.ts";
import { admitInput, getInput, pendingInputs } from "../../store/tables/inputs.ts";
import { ensureSession } from "../../store/tables/sessions.ts";
import { frameOf } from "../_helpers/store.ts";
import { count, local, throwsKlbr, withStore } from "./_store_support.ts";

Deno.test("`acceptFrame()` consumes its inputs and appends frame.accepted", async () => {
  await withStore((store) => {
    const a = admitInput(store, local(1)).inputId;
    const b = admitInput(store, local(2)).inputId;
    const c = admitInput(store, local(3)).inputId;
    const frame = frameOf(store, [a, b], { contextEpoch: 4, policyRevision: "rev-9" });
    assert.equal(frame.number, 1);
    assert.equal(frame.seq, 4);
    assert.deepEqual(pendingInputs(store, "default").map((i) => i.id), [c]);
    for (const id of [a, b]) {
      assert.deepEqual(
        [getInput(store, id)?.status, getInput(store, id)?.frameId],
        ["consumed", frame.frameId],
      );
    }
    const stored = getFrame(store, frame.frameId)!;
    assert.deepEqual(
      [stored.inputIds, stored.routing, stored.contextEpoch, stored.policyRevision, stored.state],
      [[a, b], { reply_to: "local:main" }, 4, "rev-9", "open"],
    );
    const event = readEvents(store, "default", { since: 3 })[0];
    assert.equal(event.kind, "frame.accepted");
    assert.deepEqual(event.body, {
      frame_id: frame.frameId,
      number: 1,
      input_ids: [a, b],
      routing: { reply_to: "local:main" },
      context_epoch: 4,
      policy_revision: "rev-9",
    });
    assert.equal(frameOf(store, [c]).number, 2);
  });
});

Deno.test("`acceptFrame()` writes nothing when one input is not pending", async () => {
  await withStore((store) => {
    const a = admitInput(store, local(1)).inputId;
    const b = admitInput(store, local(2)).inputId;
    frameOf(store, [a]);
    const eventsBefore = count(store, "SELECT COUNT(*) AS n FROM events");
    throwsKlbr(
      () => frameOf(store, [b, a]),
      "invalid_input",
      new RegExp(
        `^cannot accept frame: input ${a} is not pending \\(got status consumed\\)$`,
      ),
    );
    assert.equal(getInput(store, b)?.status, "pending", "b was not consumed by the refused frame");
    assert.equal(count(store, "SELECT COUNT(*) AS n FROM frames"), 1);
    assert.equal(count(store, "SELECT COUNT(*) AS n FROM events"), eventsBefore);
  });
});

Deno.test("`acceptFrame()` refuses a missing input and an input of another session", async () => {
  await withStore((store) => {
    ensureSession(store, "other");
    const mine = admitInput(store, local(1)).inputId;
    const theirs = admitInput(store, local(2, "other")).inputId;
    throwsKlbr(
      () => frameOf(store, [mine, theirs]),
      "invalid_input",
      new RegExp(`input ${theirs} belongs to session other, not default \\(got ${theirs}\\)$`),
    );
    throwsKlbr(
      () => frameOf(store, [mine, "in_NOPE"]),
      "invalid_input",
      /: input in_NOPE does not exist \(got in_NOPE\)$/,
    );
    throwsKlbr(() => frameOf(store, [mine], { session: "ghost" }), "not_found");
    assert.equal(count(store, "SELECT COUNT(*) AS n FROM frames"), 0);
    assert.equal(getInput(store, mine)?.status, "pending");
  });
});

Deno.test("`acceptFrame()` refuses an empty or repeated input list and a bad epoch", async () => {
  await withStore((store) => {
    const a = admitInput(store, local(1)).inputId;
    throwsKlbr(() => frameOf(store, []), "invalid_input", /^cannot accept frame: inputIds /);
    throwsKlbr(
      () => frameOf(store, [a, a]),
      "invalid_input",
      /^cannot accept frame: inputIds has a repeated id/,
    );
    throwsKlbr(() => frameOf(store, [a], { contextEpoch: -1 }), "invalid_input", /contextEpoch/);
    assert.equal(count(store, "SELECT COUNT(*) AS n FROM frames"), 0);
  });
});

Deno.test("`finishFrame()` ends a frame and keeps its inputs consumed", async () => {
  await withStore((store, _dir, time) => {
    const a = admitInput(store, local(1)).inputId;
    const { frameId } = frameOf(store, [a]);
    time.now += 10;
    const seq = finishFrame(store, frameId, "done", "turn ended");
    const frame = getFrame(store, frameId)!;
    assert.deepEqual(
      [frame.state, frame.endedAt, frame.endedReason],
      ["done", time.now, "turn ended"],
    );
    assert.equal(getInput(store, a)?.status, "consumed");
    const event = readEvents(store, "default", { since: seq - 1 })[0];
    assert.deepEqual([event.kind, event.body], [
      "frame.finished",
      { frame_id: frameId, number: 1, state: "done", reason: "turn ended", input_ids: [a] },
    ]);
  });
});

Deno.test("`finishFrame()` with abandoned returns the inputs to pending", async () => {
  await withStore((store) => {
    const a = admitInput(store, local(1)).inputId;
    const { frameId } = frameOf(store, [a]);
    finishFrame(store, frameId, "abandoned", "operator stop before the turn began");
    assert.deepEqual(pendingInputs(store, "default").map((i) => [i.id, i.frameId]), [[a, null]]);
    assert.equal(readEvents(store, "default").at(-1)?.kind, "frame.abandoned");
  });
});

Deno.test("`finishFrame()` refuses a frame that has already ended", async () => {
  await withStore((store) => {
    const a = admitInput(store, local(1)).inputId;
    const { frameId } = frameOf(store, [a]);
    finishFrame(store, frameId, "failed", "model error");
    const events = count(store, "SELECT COUNT(*) AS n FROM events");
    throwsKlbr(
      () => finishFrame(store, frameId, "done", "again"),
      "invalid_input",
      `cannot finish frame ${frameId}: the frame has ended (got state failed)`,
    );
    throwsKlbr(() => finishFrame(store, frameId, "abandoned", "again"), "invalid_input");
    assert.equal(getInput(store, a)?.status, "consumed");
    assert.equal(count(store, "SELECT COUNT(*) AS n FROM events"), events);
    // The table itself refuses reopening an ended frame.
    assert.throws(
      () => store.statement("UPDATE frames SET state = 'open', ended_at = NULL").run(),
      /a finished frame is final/,
    );
  });
});

Deno.test("`finishFrame()` refuses an unknown frame, state or empty reason", async () => {
  await withStore((store) => {
    throwsKlbr(
      () => finishFrame(store, "fr_NOPE", "done", "x"),
      "not_found",
      "cannot finish frame fr_NOPE: no such frame (got fr_NOPE)",
    );
    throwsKlbr(
      () => finishFrame(store, "fr_NOPE", "open" as "done", "x"),
      "invalid_input",
      "cannot finish frame fr_NOPE: state must be done, failed or abandoned (got open)",
    );
    throwsKlbr(() => finishFrame(store, "fr_NOPE", "done", ""), "invalid_input", /reason must be/);
  });
});

Deno.test("`adoptFrame()` records that an open frame is continued", async () => {
  await withStore((store) => {
    const a = admitInput(store, local(1)).inputId;
    const open = frameOf(store, [a]);
    const ended = frameOf(store, [admitInput(store, local(2)).inputId]);
    finishFrame(store, ended.frameId, "done", "finished");
    assert.deepEqual(openFrames(store, "default").map((f) => f.id), [open.frameId]);
    adoptFrame(store, open.frameId);
    assert.equal(getFrame(store, open.frameId)!.state, "open");
    // Its inputs stay consumed by it: adopting is not re-offering.
    assert.deepEqual(pendingInputs(store, "default"), []);
    const event = readEvents(store, "default").at(-1)!;
    assert.deepEqual([event.kind, event.body], ["frame.resumed", {
      frame_id: open.frameId,
      number: 1,
    }]);
    throwsKlbr(
      () => adoptFrame(store, ended.frameId),
      "invalid_input",
      `cannot adopt frame ${ended.frameId}: the frame has ended (got state done)`,
    );
  });
});
