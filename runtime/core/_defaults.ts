/**
 * The runtime's defaults, each declared once: every option that falls back to one of these
 * imports it, so documentation, CLI help and code cannot disagree; and the host's one limit
 * that options meet, the longest timer.
 *
 * @module
 */

/** The loopback address `serve` binds and the CLI connects to. */
export const DEFAULT_HOST = "127.0.0.1";
/** The port `serve` listens on and the operator CLI connects to. */
export const DEFAULT_PORT = 8765;
/** How long one cell may run before it is cancelled, then killed, and ends `timed_out`. */
export const DEFAULT_CELL_TIMEOUT_MS = 600_000;
/** How long one policy hook call may take before it counts as failed. */
export const DEFAULT_HOOK_TIMEOUT_MS = 10_000;
/** How long a drain lets accepted turns finish before it stops them. */
export const DEFAULT_DRAIN_GRACE_MS = 10_000;
/** How long an input may stay pending without a frame before it expires (a day). */
export const DEFAULT_INPUT_EXPIRE_MS = 86_400_000;
/** How long an input may wait before `status` and `/health` report it (five minutes). */
export const DEFAULT_INPUT_WAIT_WARN_MS = 300_000;
/** How long a model reply may go silent after its first data before `/health` says it stalled. */
export const DEFAULT_MODEL_STALL_MS = 15_000;
/** The first retry's delay after a failed plan or model request; each later one doubles. */
export const DEFAULT_RETRY_BASE_MS = 1_000;
/** How long an operator command waits for the daemon's reply. */
export const DEFAULT_OPERATOR_TIMEOUT_MS = 600_000;
/**
 * The longest delay one host timer holds, 2^31 − 1 ms (about 24.8 days): `setTimeout` fires a
 * longer one at once. A configured timeout is at most this; a longer wait is taken in steps.
 */
export const LONGEST_TIMER_MS = 2 ** 31 - 1;
