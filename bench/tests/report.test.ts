// Unit tests of the report's rows and their printed table.

import assert from "node:assert/strict";
import { below, belowPeer, failedRows, makeRow, sortRows, withinPeer } from "../row.ts";
import { ratioGoal } from "../peers/admission_rows.ts";
import { type BenchReport, formatRatio, formatTable, formatValue } from "../table.ts";
import type { MachineInfo } from "../machine.ts";

const MACHINE: MachineInfo = {
  deno: "2.9.6",
  v8: "15.0",
  typescript: "6.0.3",
  sqlite: "3.53.2",
  python: "Python 3.11.7 (/usr/bin/python3)",
  cpus: 2,
  cpuModel: "Test CPU",
  memoryBytes: 24e9,
  os: "linux x86_64 6.1",
};

Deno.test("`makeRow()` computes the ratio to the peer and judges the goal", () => {
  const row = makeRow({
    id: "1a",
    figure: "admission",
    unit: "inputs/s",
    value: 3_000,
    peer: { label: "raw", value: 4_000 },
    goal: ratioGoal({ min: 0.5 }, "within 2x"),
  });
  assert.equal(row.ratio, 0.75);
  assert.equal(row.met, true);
  assert.equal(row.goal, "within 2x");
  const missed = makeRow({
    id: "1b",
    figure: "admission",
    unit: "inputs/s",
    value: 1_000,
    peer: { label: "raw", value: 4_000 },
    goal: ratioGoal({ min: 0.5 }, "within 2x"),
  });
  assert.equal(missed.met, false);
});

Deno.test("`makeRow()` refuses an id that is not a figure number and a letter", () => {
  for (const id of ["1", "a1", "0a", "1A", "1ab", ""]) {
    assert.throws(() => makeRow({ id, figure: "x", unit: "ms", value: 1 }), {
      code: "invalid_input",
      message: `cannot make row: id must be a figure number and a letter (got ${
        JSON.stringify(id)
      })`,
    });
  }
});

Deno.test("`makeRow()` refuses a negative or non-finite value or peer value", () => {
  for (const value of [-1, Number.NaN, Infinity]) {
    assert.throws(() => makeRow({ id: "2a", figure: "x", unit: "ms", value }), {
      code: "invalid_input",
      message: `cannot make row 2a: value must be a finite number >= 0 (got ${value})`,
    });
    assert.throws(
      () => makeRow({ id: "2a", figure: "x", unit: "ms", value: 1, peer: { label: "p", value } }),
      {
        code: "invalid_input",
        message: `cannot make row 2a: peer value must be a finite number >= 0 (got ${value})`,
      },
    );
  }
});

Deno.test("`makeRow()` cannot judge a goal against a missing peer", () => {
  const row = makeRow({
    id: "3c",
    figure: "cell",
    unit: "ms",
    value: 0.3,
    peer: { label: "Jupyter kernel", value: null },
    goal: belowPeer("below Jupyter's"),
  });
  assert.equal(row.ratio, null);
  assert.equal(row.met, null);
});

Deno.test("`makeRow()` gives no ratio against a zero peer and no verdict without a value", () => {
  const zero = makeRow({
    id: "4a",
    figure: "x",
    unit: "ms",
    value: 1,
    peer: { label: "p", value: 0 },
  });
  assert.equal(zero.ratio, null);
  const none = makeRow({
    id: "5a",
    figure: "x",
    unit: "s",
    value: null,
    goal: below(1.5, "< 1.5 s"),
  });
  assert.equal(none.met, null);
  assert.equal(none.goal, "< 1.5 s");
});

Deno.test("`below()` and `belowPeer()` are strict", () => {
  assert.equal(below(2, "").test(2, null), false);
  assert.equal(below(2, "").test(1.99, null), true);
  assert.equal(belowPeer("").test(50_000, 50_000), false);
  assert.equal(belowPeer("").test(49_999, 50_000), true);
  assert.equal(belowPeer("", 2).test(100, 50), false);
});

Deno.test("`withinPeer()` includes its bound and cannot judge without a peer", () => {
  assert.equal(withinPeer(2, "").test(100, 50), true);
  assert.equal(withinPeer(2, "").test(100.5, 50), false);
  assert.equal(withinPeer(2, "").test(1, null), null);
});

Deno.test("`failedRows()` keeps each figure without a value and names the failure", () => {
  const rows = failedRows([
    { id: "2a", figure: "latency p50", unit: "ms" },
    { id: "2b", figure: "latency p99", unit: "ms", goal: below(5, "< 5 ms") },
  ], new Error("daemon did not start"));
  assert.deepEqual(rows.map((r) => [r.id, r.value, r.met, r.note]), [
    ["2a", null, null, "failed: daemon did not start"],
    ["2b", null, null, "failed: daemon did not start"],
  ]);
  assert.equal(rows[1].goal, "< 5 ms");
});

Deno.test("`sortRows()` orders by figure number, then letter", () => {
  const rows = ["10a", "2b", "1b", "2a", "1a"].map((id) =>
    makeRow({ id, figure: id, unit: "ms", value: 1 })
  );
  assert.deepEqual(sortRows(rows).map((r) => r.id), ["1a", "1b", "2a", "2b", "10a"]);
});

Deno.test("`formatValue()` prints rates whole, times and sizes to three digits, null as a dash", () => {
  assert.equal(formatValue(4102.7, "inputs/s"), "4,103 inputs/s");
  assert.equal(formatValue(208_612.4, "records/s"), "208,612 records/s");
  assert.equal(formatValue(0.41234, "ms"), "0.412 ms");
  assert.equal(formatValue(1104.2, "ms"), "1,104 ms");
  assert.equal(formatValue(0.2716, "s"), "0.272 s");
  assert.equal(formatValue(85.31, "MB"), "85.3 MB");
  assert.equal(formatValue(0, "ms"), "0 ms");
  assert.equal(formatValue(null, "MB"), "—");
});

Deno.test("`formatRatio()` prints a multiple, or a dash without one", () => {
  assert.equal(formatRatio(0.8333), "0.83×");
  assert.equal(formatRatio(14.93), "14.9×");
  assert.equal(formatRatio(null), "—");
});

Deno.test("`formatTable()` prints one header, one line per row in figure order, then notes", () => {
  const report: BenchReport = {
    generatedAt: "2026-01-01T00:00:00.000Z",
    machine: MACHINE,
    quick: true,
    counts: { cells: 5 },
    rows: [
      makeRow({
        id: "3a",
        figure: "cell | p50",
        unit: "ms",
        value: 0.25,
        peer: { label: "raw echo", value: 0.05 },
        goal: below(2, "< 2 ms"),
        note: "five cells",
      }),
      makeRow({
        id: "1a",
        figure: "admission",
        unit: "inputs/s",
        value: null,
        peer: null,
        goal: ratioGoal({ min: 0.5 }, "within 2x"),
      }),
    ],
  };
  const lines = formatTable(report).split("\n");
  assert.equal(lines[0], "| figure | value | ceiling/peer | ratio | goal | met? |");
  assert.equal(lines[2], "| 1a admission | — | — | — | within 2x | n/a |");
  assert.equal(
    lines[3],
    "| 3a cell \\| p50 | 0.25 ms | 0.05 ms raw echo | 5.00× | < 2 ms | yes |",
  );
  assert.match(lines[5], /^quick run, 2026-01-01T00:00:00\.000Z: deno 2\.9\.6 .*Test CPU/);
  assert.deepEqual(lines.slice(7), ["Notes:", "- 3a: five cells"]);
});
