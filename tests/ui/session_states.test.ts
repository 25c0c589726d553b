// The states the page says, from /health read by the daemon's schema: each with its fix, a button
// where the fix is an operator command, and why a message sent now waits.

import assert from "node:assert/strict";
import { HealthReport } from "../../runtime/core/mod.ts";
import { sessionStates, waitReason } from "../../ui/src/session_states.ts";
import type { HealthInfo } from "../../ui/src/lane_client.ts";

/** A healthy /health body; `over` replaces fields. */
function health(over: Record<string, unknown> = {}): HealthInfo {
  const body = {
    ok: true,
    status: "ok",
    reasons: [],
    admitting: true,
    store: { state: "ok", error: null, since: null },
    store_writable: true,
    model: { state: "ok", error: null, since: null },
    artifacts: { state: "ok", error: null, since: null },
    discord: null,
    session_state: "running",
    waiting_reason: null,
    stalled: false,
    oldest_pending_age_ms: null,
    pending_inputs: 0,
    waiting_inputs: 0,
    hook_backlog: 0,
    last_hook_failure: null,
    running_jobs: 0,
    pending_jobs: 0,
    pending_timers: 0,
    due_timers: 0,
    routes_adapted: [],
    over_budget: [],
    sandbox: "bwrap",
    sandbox_reason: null,
    version: "0.1.0",
    ...over,
  };
  const report = HealthReport.parse(body);
  return {
    sandbox: { mode: report.sandbox, reason: report.sandbox_reason, network: false },
    status: report.status,
    reasons: report.reasons,
    model: undefined,
    report,
  };
}

const calm = { stalled: false };
/** The default session's page, before any `op.status`: its state is `/health`'s. */
const onDefault = { session: "default", status: undefined };

Deno.test("`sessionStates()` says nothing while all is well", () => {
  assert.deepEqual(sessionStates(health(), calm, onDefault), []);
  assert.deepEqual(sessionStates(undefined, calm, onDefault), []);
  assert.equal(waitReason([]), undefined);
});

Deno.test("`sessionStates()` offers Resume after stop and drain, none while draining", () => {
  for (const state of ["stopped", "drained"] as const) {
    const [notice] = sessionStates(health({ session_state: state }), calm, onDefault);
    assert.equal(notice.key, state);
    assert.deepEqual(notice.action, { label: "Resume", command: { kind: "op.resume" } });
    assert.equal(
      waitReason([notice]),
      `waits: ${state} — Resume takes them up (no restart needed).`,
    );
  }
  const [draining] = sessionStates(health({ session_state: "draining" }), calm, onDefault);
  assert.deepEqual([draining.key, draining.action], ["draining", undefined]);
});

Deno.test("`sessionStates()` names a stall, a spent hour, model trouble and an unconfined sandbox with their fixes", () => {
  const notices = sessionStates(
    health({
      stalled: true,
      over_budget: [{
        what: "model_requests_per_hour",
        limit: 10,
        used: 10,
        until: "2026-12-03T20:00:00.000Z",
        frees_in_s: 60,
        effect: "turns pause",
      }],
      model: { state: "failing", route: "main", error: "HTTP 500", since: 1 },
      sandbox: "none",
      sandbox_reason: "bwrap is not installed",
    }),
    calm,
    onDefault,
  );
  assert.deepEqual(notices.map((n) => n.key), [
    "stalled",
    "over_budget",
    "model_failing",
    "sandbox_off",
  ]);
  assert.deepEqual(notices.map((n) => n.action?.command), [
    { kind: "op.reset" },
    { kind: "op.budget", reset: true },
    undefined,
    undefined,
  ]);
  assert.match(notices[1].detail, /model_requests_per_hour is spent \(10 of 10\): turns pause/);
  assert.match(notices[2].detail, /The model fails: HTTP 500/);
  assert.match(notices[3].detail, /unconfined: bwrap is not installed/);
  assert.match(notices[3].fix, /apt-get install bubblewrap/);
  // A stall found in the records counts too, without /health.
  assert.deepEqual(sessionStates(undefined, { stalled: true }, onDefault).map((n) => n.key), [
    "stalled",
  ]);
});

Deno.test("`sessionStates()` says another session's own state from op.status, never the default session's from /health", () => {
  const defaultHeld = health({ session_state: "stopped", stalled: true });
  // Before op.status answers, another session's page knows nothing of its loop.
  assert.deepEqual(sessionStates(defaultHeld, calm, { session: "b", status: undefined }), []);
  const status = {
    sessions: {
      default: { state: "stopped" as const, stalled: true },
      b: { state: "drained" as const, stalled: false },
    },
  };
  assert.deepEqual(
    sessionStates(defaultHeld, calm, { session: "b", status }).map((n) => n.key),
    ["drained"],
  );
  // The daemon's own facts still come from /health on any session's page.
  const daemonWide = health({ session_state: "stopped", sandbox: "none", sandbox_reason: "x" });
  assert.deepEqual(
    sessionStates(daemonWide, calm, { session: "b", status: undefined }).map((n) => n.key),
    ["sandbox_off"],
  );
});
