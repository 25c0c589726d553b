// `/health` counts a hook call that runs past `KLBR_HOOK_SLOW_MS` as a backlog: `degraded`,
// naming the hook and its age, while the call still runs (long before its timeout ends it),
// and `ok` again once it returned.

import assert from "node:assert/strict";
import { join } from "node:path";
import { prepareBlockedState } from "../../bench/blocked_release.ts";
import { startFakeOpenAI } from "../fakes/openai_server.ts";
import { healthUntil, REPO_ROOT, startTestDaemon, type TestDaemon } from "../_helpers/daemon.ts";
import { connectLane } from "../_helpers/lane_client.ts";
import { waitRecord } from "./_checks.ts";

/** The checkout's `attention.plan`, slowed by 3 s when an input's text asks for it. */
const SLOW_ATTENTION = `${Deno.readTextFileSync(join(REPO_ROOT, "behavior", "attention.py"))}

import time as _time

_plan = plan


def plan(inputs: list[dict], session: dict) -> dict:
    """The checkout's plan, after 3 s when an input asks to be planned slowly."""
    if any("plan slowly" in str(item.get("body")) for item in inputs):
        _time.sleep(3)
    return _plan(inputs, session)
`;

Deno.test("window health-slow-hook: an attention.plan running past the threshold makes /health degraded, naming it and its age, then ok", async () => {
  const stateDir = await Deno.makeTempDir({ prefix: "klbr-slow-hook-state-" });
  const workspace = await Deno.makeTempDir({ prefix: "klbr-slow-hook-ws-" });
  const scratch = await Deno.makeTempDir({ prefix: "klbr-slow-hook-src-" });
  const fake = startFakeOpenAI({ fallback: () => ({ text: "done" }) });
  let daemon: TestDaemon | undefined;
  try {
    await prepareBlockedState({ stateDir, workspace, scratch, attention: SLOW_ATTENTION });
    daemon = await startTestDaemon({
      stateDir,
      workspace,
      modelUrl: fake.url,
      env: { KLBR_HOOK_SLOW_MS: "300" },
    });
    const before = await (await fetch(`${daemon.url}/health`)).json();
    assert.equal(before.status, "ok");
    const client = await connectLane({ port: daemon.port, token: daemon.token });
    await client.request({ kind: "input", client_msg_id: "slow", text: "plan slowly" });
    // A degraded answer naming the hook is only given while the call runs: it is seen within
    // the hook's 3 s, far before the hook's own timeout.
    const slow = await healthUntil(daemon, (h) => h.status !== "ok");
    assert.equal(slow.status, "degraded");
    assert.equal(slow.ok, true);
    const hooks = slow.slow_hooks as { hook: string; age_ms: number }[];
    assert.equal(hooks.length, 1);
    assert.equal(hooks[0].hook, "attention.plan");
    assert.ok(hooks[0].age_ms >= 300, `age ${hooks[0].age_ms} ms`);
    assert.ok(Number(slow.hook_backlog) >= 1);
    assert.ok(
      (slow.reasons as string[]).some((r) =>
        /^the hook attention\.plan has run for \d+ ms/.test(r)
      ),
      JSON.stringify(slow.reasons),
    );
    await waitRecord(client, "frame.accepted");
    const after = await healthUntil(daemon, (h) => h.status === "ok");
    assert.deepEqual(after.slow_hooks, []);
    assert.equal(after.hook_backlog, 0);
    await client.close();
  } finally {
    await daemon?.stop();
    await fake.close();
    await Deno.remove(stateDir, { recursive: true }).catch(() => {});
    await Deno.remove(workspace, { recursive: true }).catch(() => {});
    await Deno.remove(scratch, { recursive: true });
  }
});
