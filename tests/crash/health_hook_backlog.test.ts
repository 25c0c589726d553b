// `hook_backlog` is the number of pending inputs a hook holds back: while the last hook call
// failed or a hook call runs past `KLBR_HOOK_SLOW_MS`, it is `pending_inputs`, otherwise 0. A
// slow retry of a failing `attention.plan` is one hold on the same inputs, not one more item;
// `/health` and `op.status` say the same number.

import assert from "node:assert/strict";
import { prepareBlockedState } from "../../bench/blocked_release.ts";
import type { ServerMessage } from "../../runtime/core/mod.ts";
import { startFakeOpenAI } from "../fakes/openai_server.ts";
import { healthUntil, startTestDaemon, type TestDaemon } from "../_helpers/daemon.ts";
import { connectLane, type LaneClient } from "../_helpers/lane_client.ts";

/** An `attention.plan` that runs 3 s, then fails: every retry is slow and fails again. */
const SLOW_FAILING_ATTENTION = `"""attention.plan that is slow, then fails."""

import time


def plan(inputs: list[dict], session: dict) -> dict:
    """Fails after 3 s, every time."""
    time.sleep(3)
    raise RuntimeError("slow and broken policy")
`;

/** The default session's `hook_backlog` as `op.status` reports it. */
async function statusBacklog(client: LaneClient): Promise<unknown> {
  const reply = await client.request({ kind: "op.status" });
  const sessions = (reply as Extract<ServerMessage, { kind: "op.result" }>).result
    .sessions as Record<string, Record<string, unknown>>;
  return sessions.default.hook_backlog;
}

Deno.test("window health-hook-backlog: a slow retry of a failing attention.plan counts its one pending input once, in /health and op.status alike", async () => {
  const stateDir = await Deno.makeTempDir({ prefix: "klbr-backlog-state-" });
  const workspace = await Deno.makeTempDir({ prefix: "klbr-backlog-ws-" });
  const scratch = await Deno.makeTempDir({ prefix: "klbr-backlog-src-" });
  const fake = startFakeOpenAI({ fallback: () => ({ text: "done" }) });
  let daemon: TestDaemon | undefined;
  try {
    await prepareBlockedState({ stateDir, workspace, scratch, attention: SLOW_FAILING_ATTENTION });
    daemon = await startTestDaemon({
      stateDir,
      workspace,
      modelUrl: fake.url,
      env: { KLBR_HOOK_SLOW_MS: "300", KLBR_RETRY_BASE_MS: "100" },
    });
    const client = await connectLane({ port: daemon.port, token: daemon.token });
    await client.request({ kind: "input", client_msg_id: "one", text: "hello" });
    // The first call failed and its retry is running past the threshold.
    const health = await healthUntil(
      daemon,
      (h) => h.last_hook_failure !== null && (h.slow_hooks as unknown[]).length === 1,
    );
    assert.equal(health.pending_inputs, 1);
    assert.equal(health.hook_backlog, 1, JSON.stringify(health));
    // Read within the same slow call (3 s, against a 300 ms threshold): the same count.
    assert.equal(await statusBacklog(client), health.hook_backlog);
    await client.close();
  } finally {
    await daemon?.stop();
    await fake.close();
    await Deno.remove(stateDir, { recursive: true }).catch(() => {});
    await Deno.remove(workspace, { recursive: true }).catch(() => {});
    await Deno.remove(scratch, { recursive: true });
  }
});
