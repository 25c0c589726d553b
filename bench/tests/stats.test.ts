// Unit tests of the bench's statistics: nearest-rank percentiles, summaries and rates.

import assert from "node:assert/strict";
import fc from "fast-check";
import { percentile, ratePerSecond, summarize } from "../stats.ts";

Deno.test("`percentile()` picks the nearest rank", () => {
  const hundred = Array.from({ length: 100 }, (_, i) => 100 - i);
  assert.equal(percentile(hundred, 50), 50);
  assert.equal(percentile(hundred, 99), 99);
  assert.equal(percentile(hundred, 100), 100);
  assert.equal(percentile([4, 1, 3, 2], 50), 2);
  assert.equal(percentile([7], 1), 7);
});

Deno.test("`percentile()` returns a sample that at least p percent are at or below", () => {
  fc.assert(
    fc.property(
      fc.array(fc.double({ noNaN: true, noDefaultInfinity: true }), { minLength: 1 }),
      fc.double({ min: 0.01, max: 100, noNaN: true }),
      (samples, p) => {
        const value = percentile(samples, p);
        assert.ok(samples.includes(value));
        const atOrBelow = samples.filter((s) => s <= value).length;
        assert.ok(atOrBelow >= (p / 100) * samples.length);
      },
    ),
  );
});

Deno.test("`percentile()` refuses no samples", () => {
  assert.throws(() => percentile([], 50), {
    name: "KlbrError",
    code: "invalid_input",
    message: "cannot summarise samples: there are none (got 0)",
  });
});

Deno.test("`percentile()` refuses p outside (0, 100]", () => {
  for (const p of [0, -1, 100.5, Number.NaN]) {
    assert.throws(() => percentile([1, 2, 3], p), {
      code: "invalid_input",
      message: `cannot compute percentile: p must be in (0, 100] (got ${p})`,
    });
  }
});

Deno.test("`summarize()` refuses a sample that is not finite", () => {
  for (const bad of [Number.NaN, Infinity, -Infinity]) {
    assert.throws(() => summarize([1, bad, 3]), {
      code: "invalid_input",
      message: `cannot summarise samples: every sample must be finite (got ${bad})`,
    });
  }
});

Deno.test("`summarize()` gives count, p50, p99, min and max without reordering its input", () => {
  const samples = [5, 3, 9, 1, 7];
  assert.deepEqual(summarize(samples), { count: 5, p50: 5, p99: 9, min: 1, max: 9 });
  assert.deepEqual(samples, [5, 3, 9, 1, 7]);
});

Deno.test("`ratePerSecond()` refuses a non-positive or non-finite elapsed time", () => {
  for (const elapsed of [0, -5, Number.NaN, Infinity]) {
    assert.throws(() => ratePerSecond(10, elapsed), {
      code: "invalid_input",
      message: `cannot compute rate: elapsed time must be positive ms (got ${elapsed})`,
    });
  }
});

Deno.test("`ratePerSecond()` refuses a negative or fractional count", () => {
  for (const count of [-1, 1.5]) {
    assert.throws(() => ratePerSecond(count, 1000), {
      code: "invalid_input",
      message: `cannot compute rate: count must be a non-negative integer (got ${count})`,
    });
  }
});

Deno.test("`ratePerSecond()` turns a count in ms into events per second", () => {
  assert.equal(ratePerSecond(10_000, 2_500), 4_000);
  assert.equal(ratePerSecond(0, 1), 0);
});
