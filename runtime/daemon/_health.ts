/**
 * `/health`: whether the daemon can admit input now, whether its default session is degraded (a
 * hook failing, retries exhausted), and its unattended work: jobs running and pending, timers
 * pending and due, and the budgets that are spent.
 *
 * @module
 */

import { DEFAULT_SESSION } from "../../store/sessions.ts";
import type { Store } from "../../store/store.ts";
import type { Logger } from "../core/mod.ts";
import type { Coordinator } from "./_coordinator.ts";

/** The daemon's version, as `/health` and `welcome` report it. */
export const VERSION = "0.1.0";

/**
 * The `/health` report. `ok` is false (HTTP 503, status `failing`) when admission is closed or
 * the store refuses a write transaction now.
 */
export function healthReport(
  deps: { coordinator: Coordinator; store: Store; log: Logger },
): Record<string, unknown> & { ok: boolean } {
  const status = deps.coordinator.status();
  const sessions = status.sessions as Record<string, Record<string, unknown>>;
  const session = sessions[DEFAULT_SESSION] ?? {};
  // Admission works only if the store takes a write lock now; check it, do not assume it.
  let writable = true;
  try {
    deps.store.transaction(() => {});
  } catch (error) {
    writable = false;
    deps.log.error(
      "health.store_unwritable",
      `health: the store refused a write transaction: ${error}`,
    );
  }
  const ok = status.admitting === true && writable;
  const degraded = session.last_hook_failure != null || session.stalled === true;
  return {
    ok,
    status: !ok ? "failing" : degraded ? "degraded" : "ok",
    admitting: status.admitting,
    store_writable: writable,
    stalled: session.stalled ?? false,
    oldest_pending_age_ms: session.oldest_pending_age_ms ?? null,
    pending_inputs: session.pending_inputs ?? 0,
    hook_backlog: session.hook_backlog ?? 0,
    last_hook_failure: session.last_hook_failure ?? null,
    running_jobs: session.running_jobs ?? 0,
    pending_jobs: session.pending_jobs ?? 0,
    pending_timers: session.pending_timers ?? 0,
    due_timers: session.due_timers ?? 0,
    over_budget: (status.budget as { over_budget?: unknown[] } | undefined)?.over_budget ?? [],
    recovered_release: status.recovered_release,
    version: VERSION,
  };
}
