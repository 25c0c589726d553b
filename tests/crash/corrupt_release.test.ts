// Crash window "corrupt active release": the active release is damaged on disk while the
// daemon is down. Start-up recovers to a release that verifies without running any hook of the
// broken one — proven by a hook that leaves a mark in the workspace whenever it is imported or
// called, which does leave it while its release is intact — and SIGTERM then drains, exit 0.

import assert from "node:assert/strict";
import { join } from "node:path";
import { startFakeOpenAI } from "../fakes/openai_server.ts";
import { startTestDaemon } from "../_helpers/daemon.ts";
import { connectLane } from "../_helpers/lane_client.ts";
import { activateVariant } from "../_helpers/releases.ts";
import {
  checkStore,
  inputIds,
  nextMessageAnswered,
  records,
  removeDirs,
  rows,
  waitRecord,
  withDb,
} from "./_checks.ts";

const MARKING_PLAN = [
  "from pathlib import Path",
  "Path('broken-release-ran').open('a').write('imported\\n')",
  "def plan(inputs, session):",
  "    Path('broken-release-ran').open('a').write('planned\\n')",
  "    return {'consume': [i['id'] for i in inputs], 'routing': {}}",
  "",
].join("\n");

Deno.test("window corrupt-active-release: start-up falls back without running a hook of the broken release; SIGTERM drains and exits 0", async () => {
  const fake = startFakeOpenAI({ fallback: () => ({ toolCall: { code: "wait()" } }) });
  let daemon = await startTestDaemon({ modelUrl: fake.url });
  const marker = join(daemon.workspace, "broken-release-ran");
  try {
    assert.equal(await daemon.stop(), 0);
    const published = await activateVariant(daemon.stateDir, {
      "attention.py": MARKING_PLAN,
      "extra.py": "# another revision\n",
    });
    // Control: while the release is intact, its hook runs and leaves its mark.
    daemon = await daemon.restart();
    await nextMessageAnswered(daemon, fake, "control");
    assert.equal(await daemon.stop(), 0);
    assert.match(await Deno.readTextFile(marker), /planned/);
    await Deno.remove(marker);

    // While the daemon is down, damage the active release in place.
    await Deno.chmod(`${published.path}/extra.py`, 0o644);
    await Deno.writeTextFile(`${published.path}/extra.py`, "raise SystemExit('tampered')\n");
    daemon = await daemon.restart();
    const health = await (await fetch(`${daemon.url}/health`)).json();
    assert.match(String(health.recovered_release), /does not verify; restored/);
    const operator = await connectLane({ port: daemon.port, token: daemon.token });
    const recovered = await waitRecord(operator, "release.recovered");
    assert.equal(recovered.data.broken, published.id);
    const restored = String(recovered.data.restored);
    assert.notEqual(restored, published.id);
    await operator.close();
    const next = await nextMessageAnswered(daemon, fake, "after");
    // No hook of the broken release ran: not at start, not for the frame that followed.
    assert.equal(
      await Deno.stat(marker).catch(() => null),
      null,
      "the broken release's hook never ran",
    );
    const policy = withDb(
      daemon.stateDir,
      (db) =>
        rows(db, "SELECT policy_revision FROM frames WHERE input_ids LIKE ?", `%${next.inputId}%`),
    );
    assert.deepEqual(policy, [{ policy_revision: restored }]);
    const again = await connectLane({ port: daemon.port, token: daemon.token });
    assert.deepEqual(records(again, "hook.failed"), []);
    await again.close();
    assert.equal(await daemon.stop(), 0);
    const acked = inputIds(daemon.stateDir);
    checkStore(daemon.stateDir, acked);
  } finally {
    await daemon.stop().catch(() => {});
    await fake.close();
    await removeDirs(daemon);
  }
});
