/**
 * Summary statistics of timing samples: nearest-rank percentiles and rates.
 *
 * @module
 */

import { KlbrError } from "../runtime/core/mod.ts";

/** The percentiles every latency figure reports, in the samples' unit. */
export interface LatencySummary {
  /** How many samples were summarised. */
  count: number;
  p50: number;
  p99: number;
  min: number;
  max: number;
}

/**
 * Returns the `p`-th percentile of `samples` by the nearest-rank method: the smallest sample
 * that at least `p` percent of the samples are less than or equal to.
 *
 * @throws {KlbrError} `invalid_input` when there are no samples, a sample is not finite, or
 *   `p` is not in (0, 100].
 * @example
 * ```ts
 * percentile([4, 1, 3, 2], 50); // 2
 * ```
 */
export function percentile(samples: readonly number[], p: number): number {
  if (!(p > 0 && p <= 100)) {
    throw new KlbrError(
      "invalid_input",
      `cannot compute percentile: p must be in (0, 100] (got ${p})`,
    );
  }
  return sortedChecked(samples)[Math.ceil((p / 100) * samples.length) - 1];
}

/**
 * Summarises latency samples with their count, p50, p99, minimum and maximum.
 *
 * @throws {KlbrError} `invalid_input` when there are no samples or one is not finite.
 * @example
 * ```ts
 * const { p50, p99 } = summarize(samplesMs);
 * ```
 */
export function summarize(samples: readonly number[]): LatencySummary {
  const sorted = sortedChecked(samples);
  const at = (p: number) => sorted[Math.ceil((p / 100) * sorted.length) - 1];
  return {
    count: sorted.length,
    p50: at(50),
    p99: at(99),
    min: sorted[0],
    max: sorted[sorted.length - 1],
  };
}

/**
 * Returns how many events per second `count` events in `elapsedMs` milliseconds are.
 *
 * @throws {KlbrError} `invalid_input` when `count` is negative or not an integer, or when
 *   `elapsedMs` is not a positive finite number.
 * @example
 * ```ts
 * ratePerSecond(10_000, 2_500); // 4000
 * ```
 */
export function ratePerSecond(count: number, elapsedMs: number): number {
  if (!Number.isSafeInteger(count) || count < 0) {
    throw new KlbrError(
      "invalid_input",
      `cannot compute rate: count must be a non-negative integer (got ${count})`,
    );
  }
  if (!(Number.isFinite(elapsedMs) && elapsedMs > 0)) {
    throw new KlbrError(
      "invalid_input",
      `cannot compute rate: elapsed time must be positive ms (got ${elapsedMs})`,
    );
  }
  return (count * 1000) / elapsedMs;
}

function sortedChecked(samples: readonly number[]): number[] {
  if (samples.length === 0) {
    throw new KlbrError("invalid_input", "cannot summarise samples: there are none (got 0)");
  }
  const bad = samples.find((s) => !Number.isFinite(s));
  if (bad !== undefined) {
    throw new KlbrError(
      "invalid_input",
      `cannot summarise samples: every sample must be finite (got ${bad})`,
    );
  }
  return [...samples].sort((a, b) => a - b);
}
