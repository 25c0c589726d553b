/**
 * Run by `test_daemon_cgroups.test.ts` as a test process of its own: starts a daemon on the
 * state directory `KLBR_TEST_STATE`, checks it made its cgroups, and SIGKILLs it; what is left
 * is for the helpers to remove when this process ends.
 *
 * @module
 */

import assert from "node:assert/strict";
import { startTestDaemon } from "../../_helpers/daemon.ts";
import { cgroupDirsOf } from "../../_helpers/cgroups.ts";

Deno.test("a daemon SIGKILLed by its test leaves its cgroups", async () => {
  const stateDir = Deno.env.get("KLBR_TEST_STATE")!;
  const daemon = await startTestDaemon({ stateDir });
  const health = await (await fetch(`${daemon.url}/health`)).json();
  assert.match(health.sandbox_limits, /^cgroup[12]$/, health.sandbox_limits_reason);
  await daemon.kill();
  const left = await cgroupDirsOf(stateDir);
  assert.ok(left.length > 0, "the kill leaves the daemon's cgroups");
  await Deno.remove(daemon.workspace, { recursive: true });
});
