// End to end: one whole bench run with tiny counts against real daemons, real Python and
// real SQLite. It checks the report's shape and bookkeeping, never a speed.

import assert from "node:assert/strict";
import { type BenchCounts, runBench } from "../run_bench.ts";
import { formatTable } from "../table.ts";

const TINY: BenchCounts = {
  admissionInputs: 30,
  admissionWindow: 4,
  rawCommits: 30,
  latencyInputs: 10,
  replayRecords: 300,
  cells: 5,
  echoes: 20,
  warmup: 1,
  jupyterStarts: 1,
  spawns: 1,
  restarts: 1,
  settleMs: 200,
  outlines: 2,
  contextItems: 300,
  contextRecords: 3_000,
  loopTurns: 2,
  peerRepeats: 1,
};

Deno.test("`runBench()` measures every figure and prints one row for each", async () => {
  const lines: string[] = [];
  const { report, failures } = await runBench({
    quick: true,
    counts: TINY,
    log: (line) => lines.push(line),
  });
  assert.deepEqual(failures, []);
  const ids = report.rows.map((row) => row.id);
  const expected = [
    "1a",
    "1b",
    "1k",
    "1l",
    "1m",
    "2a",
    "2b",
    "2d",
    "3a",
    "3b",
    "3c",
    "3d",
    "3e",
    "3f",
    "4a",
    "5a",
    "5b",
    "5c",
    "5d",
    "5e",
    "6a",
    "6b",
    "7a",
    "7b",
    "8a",
    "8b",
    "8c",
    "8d",
    "8e",
    "8f",
    "8g",
    "8h",
    "8i",
    "8j",
    "9a",
    "9b",
    "9c",
    "9d",
    "9e",
    "9f",
    "10a",
    "10b",
    "10c",
    "10d",
    "10e",
    "10f",
    "10g",
    "10h",
    "10i",
    "10j",
    "12a",
    "12b",
  ];
  // 6c exists only when serve runs the daemon as a child process.
  assert.deepEqual(ids.filter((id) => id !== "6c"), expected);
  for (const row of report.rows) {
    assert.notEqual(row.value, null, `${row.id} has a value`);
    assert.ok(row.peer !== null, `${row.id} has a ceiling or peer`);
  }
  // Every row whose peer was measured has its ratio; a peer measured as zero (a CPU figure
  // below the 10 ms clock tick over a short test series) has none, as `makeRow()` says.
  for (const row of report.rows.filter((r) => r.peer?.value != null)) {
    const expected = row.peer!.value! > 0 ? row.value! / row.peer!.value! : null;
    assert.equal(row.ratio, expected, row.id);
  }
  // The replay delivered the whole seeded log, and the bookkeeping says so.
  assert.match(
    report.rows.find((r) => r.id === "4a")!.figure,
    /^cold replay to a since=0 client, \d{3},?\d* records$/,
  );
  assert.equal(report.counts.replayRecords, 300);
  assert.deepEqual(
    lines.map((line) => line.replace(/ at [\d.]+ s$/, "")),
    [
      "start-up (5a, 5b)",
      "admission (1a, 1b, 1k, 1l, 1m)",
      "blocked attention.plan (2a, 2b)",
      "replay (4a)",
      "page open (12a, 12b)",
      "cells (3a, 3b, 3c, 3d, 5c, 5d, 5e)",
      "agent loop (2d, 3e, 3f, 10a, 10b, 10c, 10d, 10e, 10f, 10g, 10h, 10i, 10j)",
      "code outline (7a, 7b)",
      "context (8a, 8b, 8c, 8d, 8e, 8f, 8g, 8h, 8i, 8j, 9a, 9b, 9c, 9d, 9e, 9f)",
    ],
  );
  const table = formatTable(report).split("\n");
  assert.equal(table.filter((l) => /^\| \d+[a-z] /.test(l)).length, report.rows.length);
});

Deno.test("`runBench()` with `only` runs those phases alone, and replay with the blocked state it needs", async () => {
  const lines: string[] = [];
  const { report, failures } = await runBench({
    quick: true,
    counts: TINY,
    only: ["replay"],
    log: (line) => lines.push(line),
  });
  assert.deepEqual(failures, []);
  assert.deepEqual(report.rows.map((row) => row.id), ["2a", "2b", "4a"]);
  assert.equal(lines.length, 2, lines.join("\n"));
  assert.match(lines[0], /^blocked attention\.plan /);
  assert.match(lines[1], /^replay /);
});
