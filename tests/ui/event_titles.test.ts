/**
 * The runtime-events lane's words for resumed turns, restart recovery, a stalled session and
 * release recovery, and spooled cell output in the cells lane.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { LaneRecord } from "../../runtime/core/mod.ts";
import { byteSize, spooledLabel } from "../../ui/src/format.ts";
import { deriveLanes, dispositionLabel } from "../../ui/src/lane_view.ts";
import { body, titleOf } from "./_record_data.ts";

function record(type: string, data: Record<string, unknown>, seq = 1): LaneRecord {
  return { kind: "record", session: "default", seq, at: 1_736_933_400_000 + seq, type, data };
}

Deno.test("`describeReading()` titles a resumed frame as its turn continued after a restart", () => {
  assert.deepEqual(
    titleOf(record("frame.resumed", {
      frame_id: "fr_1",
      number: 7,
      previous_owner: "own_01JHMMRR878CS2QQ58HYY0RD73",
    })),
    {
      title: "Turn 7 continued after a restart",
      detail: "previous owner own_01JHMMRR…",
      severity: "info",
    },
  );
});

Deno.test("`describeReading()` shows a resumed frame without its number as an unknown record", () => {
  assert.deepEqual(titleOf(record("frame.resumed", { frame_id: "FR_Upper" })), {
    title: "unknown record frame.resumed",
    detail: "its data does not match the type: " +
      "number: Invalid input: expected number, received undefined",
    severity: "warning",
  });
  assert.equal(
    titleOf(record("frame.resumed", body("frame.resumed", { number: 7 }))).detail,
    "",
    "no previous owner, no detail",
  );
});

Deno.test("`deriveLanes()` keeps a resumed frame's inputs consumed and running", () => {
  // `frame.resumed` is no end: the inputs must not read as done before the frame finishes.
  const view = deriveLanes([
    record("input.admitted", body("input.admitted", { input_id: "in_a", body: "hi" }), 1),
    record(
      "frame.accepted",
      body("frame.accepted", { frame_id: "fr_1", number: 3, input_ids: ["in_a"] }),
      2,
    ),
    record("frame.resumed", body("frame.resumed", { frame_id: "fr_1", number: 3 }), 3),
  ]);
  assert.equal(dispositionLabel(view.inputs.get("in_a")!.disposition), "taken up by turn 3");
  assert.equal(view.events[1].title, "Turn 3 continued after a restart");
});

Deno.test("`describeReading()` counts what a recovery abandoned, resumed, interrupted and closed", () => {
  assert.deepEqual(
    titleOf(record("recovery", {
      abandoned_frames: ["fr_1"],
      resumed_frames: ["fr_2", "fr_3"],
      interrupted_cells: ["cell_1"],
      closed_tool_calls: ["call_1", "call_2", "call_3"],
    })),
    {
      title: "Recovered after a restart",
      detail: "1 frame abandoned · 2 frames resumed · 1 cell interrupted · 3 tool calls closed",
      severity: "warning",
    },
  );
});

Deno.test("`describeReading()` shows a recovery whose lists are missing or counts as unknown", () => {
  assert.deepEqual(
    titleOf(record("recovery", { resumed_frames: "fr_2", interrupted_cells: 2 })).title,
    "unknown record recovery",
  );
  assert.equal(
    titleOf(record("recovery", body("recovery"))).detail,
    "0 frames abandoned · 0 frames resumed · 0 cells interrupted · 0 tool calls closed",
  );
});

Deno.test("`describeReading()` says how a route adapted to its server, and why", () => {
  const reason = "the server refused a request past its context: request (7740 tokens) exceeds …";
  assert.deepEqual(
    titleOf(record("route.adapted", {
      route: "main",
      setting: "context_tokens",
      to: "6000",
      reason,
      configured: 32768,
    })),
    {
      title: "Route main adapted: requests within 6000 tokens",
      detail: reason,
      severity: "warning",
    },
  );
  assert.equal(
    titleOf(record("route.adapted", { route: "main", setting: "tool_calls", to: "text", reason }))
      .title,
    "Route main adapted: tool calls text",
  );
});

Deno.test("`describeReading()` warns of a stalled session with its message", () => {
  assert.deepEqual(
    titleOf(record("session.stalled", {
      failures: 5,
      message: "gave up retrying after 5 failed attempts; the inputs stay pending",
    })),
    {
      title: "Session stalled after 5 failed attempts",
      detail: "gave up retrying after 5 failed attempts; the inputs stay pending",
      severity: "warning",
    },
  );
  assert.deepEqual(titleOf(record("session.stalled", { failures: "x" })), {
    title: "unknown record session.stalled",
    detail: "its data does not match the type: " +
      "failures: Invalid input: expected number, received string; " +
      "message: Invalid input: expected string, received undefined",
    severity: "warning",
  });
});

Deno.test("`describeReading()` titles a last good release and warns of a recovered one", () => {
  assert.deepEqual(
    titleOf(record("release.last_good", { release_id: "3fa2c41d9e8b7a6f5e4d3c2b1a0f9e8d" })),
    { title: "Release 3fa2c41d9e8b… marked last good", detail: "", severity: "info" },
  );
  assert.deepEqual(
    titleOf(record("release.recovered", { broken: "bad1", restored: "good2" })),
    { title: "Release bad1 does not verify; restored good2", detail: "", severity: "warning" },
  );
  assert.equal(
    titleOf(record("release.recovered", {})).title,
    "unknown record release.recovered",
  );
});

Deno.test("`describeReading()` names a started process role and warns of a failed candidate", () => {
  assert.deepEqual(titleOf(record("role.loaded", body("role.loaded"))), {
    title: "Hook worker started (generation 2)",
    detail: "behaviour activated · python 3.11.7 · package pppppppppppp… · release 3fa2c41d9e8b…",
    severity: "info",
  });
  assert.deepEqual(titleOf(record("candidate.failed", body("candidate.failed"))), {
    title: "Behaviour candidate failed its publish: turn.next",
    detail: "turn.next: returned 42",
    severity: "warning",
  });
});

Deno.test("`deriveLanes()` reads spooled stdout and stderr artifacts from a cell's result", () => {
  const view = deriveLanes([
    record(
      "cell.started",
      body("cell.started", { cell_id: "cell_a", code: "print('x' * 100000)" }),
      1,
    ),
    record(
      "cell.finished",
      body("cell.finished", {
        cell_id: "cell_a",
        outcome: "ok",
        result: {
          stdout: "xxxx\n[… 94000 characters not shown …]\nxxxx",
          stderr: "",
          stdout_artifact: { id: "art_01JHMMRR878CS2QQ58HYY0RD73", bytes: 100001 },
          stderr_artifact: { id: "art_2", bytes: "many" },
        },
      }),
      2,
    ),
  ]);
  const [cell] = view.cells;
  assert.deepEqual(cell.stdoutArtifact, { id: "art_01JHMMRR878CS2QQ58HYY0RD73", bytes: 100001 });
  // A reference whose size is not a byte count is no reference the runtime writes.
  assert.equal(cell.stderrArtifact, undefined);
  assert.match(cell.stdout, /characters not shown/);
  assert.equal(
    spooledLabel("stdout", cell.stdoutArtifact!),
    "stdout spooled: 97.7 KiB in artifact art_01JHMMRR878CS2QQ58HYY0RD73; an excerpt is shown",
  );
  assert.equal(
    spooledLabel("stderr", { id: "art_2" }),
    "stderr spooled: in artifact art_2; an excerpt is shown",
  );
});

Deno.test("`deriveLanes()` ignores artifact refs without an id", () => {
  const view = deriveLanes([
    record(
      "cell.finished",
      body("cell.finished", {
        cell_id: "cell_a",
        outcome: "ok",
        result: { stdout: "short", stdout_artifact: { bytes: 10 }, stderr_artifact: "art_3" },
      }),
    ),
  ]);
  assert.deepEqual([view.cells[0].stdoutArtifact, view.cells[0].stderrArtifact], [
    undefined,
    undefined,
  ]);
});

Deno.test("`byteSize()` says bytes, KiB and MiB and refuses nonsense", () => {
  assert.deepEqual(
    [0, 1, 1023, 1024, 121_140, 2 * 1024 * 1024].map(byteSize),
    ["0 bytes", "1 byte", "1023 bytes", "1.0 KiB", "118.3 KiB", "2.0 MiB"],
  );
  assert.deepEqual([-1, NaN, Infinity].map(byteSize), ["?", "?", "?"]);
});

Deno.test("`describeReading()` names the failing model's address, the attempt and the next retry, and its recovery", () => {
  const failing = (next: number | null) =>
    record("model.failing", {
      frame_id: "fr_1",
      input_ids: ["in_1"],
      route: "main",
      url: "http://127.0.0.1:9/v1",
      model: "qwen",
      error: "connection refused",
      attempt: 2,
      of: 7,
      next_retry_ms: next,
      config_path: null,
    });
  assert.deepEqual(titleOf(failing(4000)), {
    title: "Model at http://127.0.0.1:9/v1 not answering (attempt 2 of 7)",
    detail: "connection refused · next in 4 s",
    severity: "warning",
  });
  assert.match(titleOf(failing(null)).detail, /no further retry by itself/);
  assert.deepEqual(
    titleOf(record("model.recovered", {
      frame_id: "fr_2",
      route: "main",
      url: "http://127.0.0.1:9/v1",
      failed_attempts: 2,
    })),
    {
      title: "Model at http://127.0.0.1:9/v1 answers again",
      detail: "after 2 failed attempts",
      severity: "info",
    },
  );
});
