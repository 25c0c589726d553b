/**
 * The `token_calibration` table: per session and route, how many tokens the provider counts
 * for one raw estimated token. This module is the table's only writer.
 *
 * The raw estimate (`estimateTokens`, UTF-8 bytes / 4) knows nothing of a model's tokenizer;
 * each reply's reported `prompt_tokens` against the estimate of the request it answered gives
 * a sample. The ratio follows a larger sample at once (a request must never pass the budget
 * because the estimate lagged) and a smaller one slowly (a fifth of the way per sample).
 *
 * @module
 */

import { KlbrError } from "../../runtime/core/mod.ts";
import type { Store } from "../store.ts";
import { fromRow } from "./_rows.ts";

/** A route's calibration. */
export interface Calibration {
  /** Provider tokens per raw estimated token. */
  ratio: number;
  /** How many replies it was measured from. */
  samples: number;
  updatedAt: number;
}

/** The ratio assumed before a route has reported anything: a quarter more than raw. */
export const UNCALIBRATED_RATIO = 1.25;

const MIN_RATIO = 0.05;
const MAX_RATIO = 20;

/** Returns the calibration of `route` in `session`, or `undefined` before its first sample. */
export function readCalibration(
  store: Store,
  session: string,
  route: string,
): Calibration | undefined {
  const row = store.statement(
    "SELECT ratio, samples, updated_at FROM token_calibration WHERE session_id = ? AND route = ?",
  ).get(session, route);
  return row && fromRow<Calibration>(row);
}

/**
 * Folds one sample (the raw estimate of a request and the `prompt_tokens` the provider
 * reported for it) into the route's calibration and returns the new one.
 *
 * When it returns the new ratio is committed. Proven by "`recordCalibration()` follows a larger
 * sample at once and a smaller one slowly".
 *
 * @throws {KlbrError} `invalid_input` when either count is not a positive integer.
 */
export function recordCalibration(
  store: Store,
  session: string,
  sample: { route: string; estimated: number; reported: number },
): Calibration {
  const { route, estimated, reported } = sample;
  for (const [name, value] of [["estimated", estimated], ["reported", reported]] as const) {
    if (!Number.isSafeInteger(value) || value < 1) {
      throw new KlbrError(
        "invalid_input",
        `cannot calibrate token counts: ${name} must be a positive integer (got ${value})`,
      );
    }
  }
  return store.transaction(() => {
    const previous = readCalibration(store, session, route);
    const measured = Math.min(MAX_RATIO, Math.max(MIN_RATIO, reported / estimated));
    const ratio = previous === undefined || measured > previous.ratio
      ? measured
      : previous.ratio * 0.8 + measured * 0.2;
    const now = store.clock();
    store.statement(
      `INSERT INTO token_calibration (session_id, route, ratio, samples, updated_at)
       VALUES (?, ?, ?, 1, ?)
       ON CONFLICT (session_id, route) DO UPDATE SET ratio = excluded.ratio,
         samples = samples + 1, updated_at = excluded.updated_at`,
    ).run(session, route, ratio, now);
    return readCalibration(store, session, route)!;
  });
}
