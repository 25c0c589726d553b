// Figure 11 end to end with tiny sizes against the real `serve`, real SQLite and a real lane
// client: a row per series and size, each against the smallest size, and a chart that draws
// one line per series through every measured point. It checks the bookkeeping, never a speed.

import assert from "node:assert/strict";
import { benchScale, SCALE_SERIES, scaleRows } from "../scale.ts";
import { scaleSvg } from "../svg.ts";

Deno.test("`benchScale()` measures every series at every size, against the smallest", async () => {
  const root = await Deno.makeTempDir({ prefix: "klbr-scale-test-" });
  try {
    const { rows, points } = await benchScale({ root, sizes: [120, 600], runs: 3, settleMs: 50 });
    assert.deepEqual(points.map((p) => p.records), [120, 600]);
    assert.equal(rows.length, SCALE_SERIES.length * 2);
    for (const point of points) {
      for (const series of SCALE_SERIES) {
        assert.ok(point[series.key] > 0, `${series.key} at ${point.records} is measured`);
      }
    }
    // Each row's peer is the smallest size's value of its series.
    rows.forEach((row, i) => {
      const series = SCALE_SERIES[Math.floor(i / 2)];
      assert.equal(row.peer?.value, points[0][series.key], row.id);
    });
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("`scaleSvg()` draws one line per series through each point, ratios to the first", () => {
  const point = (records: number, k: number) => ({
    records,
    startupS: 0.3 * k,
    rssMb: 90 * k,
    requestMs: 2 * k,
    healthMs: 0.5 * k,
    replayPerSecond: 300_000 * k,
    searchMs: 4 * k,
    seedS: 1,
  });
  const points = [point(1_000, 1), point(100_000, 1.5), point(1_000_000, 3)];
  const svg = scaleSvg(points, "test & caption");
  assert.match(svg, /^<svg xmlns="http:\/\/www.w3.org\/2000\/svg"/);
  assert.equal(svg.match(/<polyline /g)?.length, SCALE_SERIES.length);
  assert.equal(svg.match(/<circle /g)?.length, SCALE_SERIES.length * points.length);
  assert.match(svg, /\(3\.00×\)/, "the legend gives the largest size's ratio");
  assert.match(svg, /test &amp; caption/);
  const rows = scaleRows(points);
  assert.equal(rows.find((r) => r.id === "11c")?.ratio, 3);
  assert.equal(rows.find((r) => r.id === "11c")?.met, false, "3× the smallest is not flat");
  assert.equal(rows.find((r) => r.id === "11f")?.goal, "≤ 2× the smallest");
});
