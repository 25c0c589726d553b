/**
 * The kernel generations and cells tables: a cell is recorded before it runs and finished once.
 *
 * Every test runs against real SQLite files in a fresh temporary directory.
 *
 * @module
 */

import assert from "node:assert/strict";
import { finishCell, getCell, interruptOpenCells, startCell } from "../../store/tables/cells.ts";
import { readEvents } from "../../store/tables/events.ts";
import { admitInput } from "../../store/tables/inputs.ts";
import { currentGeneration, startGeneration } from "../../store/tables/kernel_generations.ts";
import { type Store } from "../../store/store.ts";
import { frameOf } from "../_helpers/store.ts";
import { count, local, RELEASE_A, throwsKlbr, withStore } from "./_store_support.ts";

function generation(store: Store, reason = "startup") {
  return startGeneration(store, {
    session: "default",
    reason,
    skillsRevision: "skills-1",
    behaviorRevision: RELEASE_A,
  });
}

Deno.test("`startGeneration()` numbers generations and records kernel.reset", async () => {
  await withStore((store, _dir, time) => {
    const first = generation(store);
    time.now += 7;
    const second = startGeneration(store, {
      session: "default",
      reason: "framing_failure",
      skillsRevision: "skills-2",
      behaviorRevision: null,
    });
    assert.deepEqual([first.generation, second.generation], [1, 2]);
    const current = currentGeneration(store, "default")!;
    assert.deepEqual([current.generation, current.endedAt, current.skillsRevision], [
      2,
      null,
      "skills-2",
    ]);
    const ended = store.statement(
      "SELECT ended_at FROM kernel_generations WHERE generation = 1",
    ).get() as { ended_at: number };
    assert.equal(ended.ended_at, time.now);
    const event = readEvents(store, "default").at(-1)!;
    assert.deepEqual([event.seq, event.kind, event.body], [second.seq, "kernel.reset", {
      generation: 2,
      reason: "framing_failure",
      skills_revision: "skills-2",
      behavior_revision: null,
      heap_restored: false,
    }]);
    throwsKlbr(
      () =>
        startGeneration(store, {
          session: "default",
          reason: "",
          skillsRevision: "s",
          behaviorRevision: null,
        }),
      "invalid_input",
      /^cannot start kernel generation: reason /,
    );
  });
});

Deno.test("`startCell()` refuses a generation that is not the current one", async () => {
  await withStore((store) => {
    const code = "print(1)";
    throwsKlbr(
      () => startCell(store, { session: "default", generation: 1, code }),
      "invalid_input",
      "cannot start cell: generation 1 is not the running kernel of default (got current none)",
    );
    generation(store);
    generation(store, "reset");
    throwsKlbr(
      () => startCell(store, { session: "default", generation: 1, code }),
      "invalid_input",
      "cannot start cell: generation 1 is not the running kernel of default (got current 2)",
    );
    throwsKlbr(
      () => startCell(store, { session: "default", generation: 2, code, frameId: "fr_NOPE" }),
      "not_found",
      "cannot start cell: no frame fr_NOPE in default",
    );
    assert.equal(count(store, "SELECT COUNT(*) AS n FROM cells"), 0);
  });
});

Deno.test("`startCell()` records a cell before it runs and `finishCell()` writes its outcome", async () => {
  await withStore((store, _dir, time) => {
    const { frameId } = frameOf(store, [admitInput(store, local(1)).inputId]);
    generation(store);
    const { cellId, seq } = startCell(store, {
      session: "default",
      generation: 1,
      frameId,
      toolCallId: "call_1",
      code: "x = 1",
    });
    assert.match(cellId, /^cell_[0-9A-Z]{26}$/);
    assert.deepEqual(readEvents(store, "default", { since: seq - 1 })[0].body, {
      cell_id: cellId,
      generation: 1,
      frame_id: frameId,
      tool_call_id: "call_1",
      code: "x = 1",
    });
    assert.equal(getCell(store, cellId)?.outcome, null);
    time.now += 3;
    const done = finishCell(store, cellId, { outcome: "ok", result: { value: "1" } });
    const cell = getCell(store, cellId)!;
    assert.deepEqual([cell.outcome, cell.result, cell.endedAt], ["ok", { value: "1" }, time.now]);
    const event = readEvents(store, "default", { since: done - 1 })[0];
    assert.deepEqual([event.kind, event.body], ["cell.finished", {
      cell_id: cellId,
      tool_call_id: "call_1",
      outcome: "ok",
      result: { value: "1" },
    }]);
  });
});

Deno.test("`finishCell()` refuses to overwrite a finished cell", async () => {
  await withStore((store) => {
    generation(store);
    const { cellId } = startCell(store, { session: "default", generation: 1, code: "1" });
    finishCell(store, cellId, { outcome: "error", result: { type: "ValueError" } });
    throwsKlbr(
      () => finishCell(store, cellId, { outcome: "ok", result: null }),
      "invalid_input",
      `cannot finish cell ${cellId}: it already finished (got outcome error)`,
    );
    assert.deepEqual(getCell(store, cellId)?.result, { type: "ValueError" });
    assert.throws(
      () => store.statement("UPDATE cells SET outcome = 'ok' WHERE id = ?").run(cellId),
      /a finished cell is final/,
    );
  });
});

Deno.test("`finishCell()` refuses an unknown cell, an unknown outcome and a non-JSON result", async () => {
  await withStore((store) => {
    generation(store);
    const { cellId } = startCell(store, { session: "default", generation: 1, code: "1" });
    throwsKlbr(
      () => finishCell(store, "cell_NOPE", { outcome: "ok", result: null }),
      "not_found",
      "cannot finish cell cell_NOPE: no such cell (got cell_NOPE)",
    );
    throwsKlbr(
      () => finishCell(store, cellId, { outcome: "exploded" as "ok", result: null }),
      "invalid_input",
      `cannot finish cell ${cellId}: outcome must be one of ok, error, cancelled, timed_out, killed, interrupted (got "exploded")`,
    );
    throwsKlbr(
      () => finishCell(store, cellId, { outcome: "ok", result: undefined }),
      "invalid_input",
      `cannot finish cell ${cellId}: result is not JSON (got undefined)`,
    );
    assert.equal(getCell(store, cellId)?.outcome, null);
  });
});

Deno.test("`interruptOpenCells()` closes open cells and leaves finished ones alone", async () => {
  await withStore((store) => {
    generation(store);
    const finished = startCell(store, { session: "default", generation: 1, code: "a" }).cellId;
    finishCell(store, finished, { outcome: "ok", result: 1 });
    const open1 = startCell(store, { session: "default", generation: 1, code: "b" }).cellId;
    const open2 = startCell(store, { session: "default", generation: 1, code: "c" }).cellId;
    assert.deepEqual(interruptOpenCells(store, "default", "restart"), [open1, open2]);
    assert.deepEqual(
      [open1, open2].map((id) => [getCell(store, id)?.outcome, getCell(store, id)?.result]),
      [["interrupted", { interrupted: "restart" }], ["interrupted", { interrupted: "restart" }]],
    );
    assert.deepEqual([getCell(store, finished)?.outcome, getCell(store, finished)?.result], [
      "ok",
      1,
    ]);
    assert.deepEqual(interruptOpenCells(store, "default", "restart"), [], "nothing is open now");
    throwsKlbr(() => interruptOpenCells(store, "default", ""), "invalid_input", /reason must be/);
  });
});
