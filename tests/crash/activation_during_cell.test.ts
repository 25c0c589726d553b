// Crash window `activation-during-cell`: a running cell activates a new behaviour release; the
// epoch swap commits and the daemon dies before the hook worker is switched. After the restart
// the new release is the active one and its hooks plan the next frame, the interrupted cell
// is not run again, and its result lists what it had done before it activated.

import assert from "node:assert/strict";
import { startFakeOpenAI } from "../fakes/openai_server.ts";
import { connectLane } from "../_helpers/lane_client.ts";
import {
  checkStore,
  crashAt,
  inputIds,
  nextMessageAnswered,
  records,
  removeDirs,
  rows,
  waitRecord,
  withDb,
} from "./_checks.ts";

const ACTIVATES = [
  "d = await behavior.draft()",
  "await d.write('model.py', (await d.read('model.py')) + '\\n# v2\\n')",
  "await local.send('switching my behaviour')",
  "print(await d.activate())",
].join("\n");

Deno.test("window activation-during-cell: an activation committed under a running cell survives the crash; the next frame runs the new release", async () => {
  const fake = startFakeOpenAI({ fallback: () => ({ toolCall: { code: "wait()" } }) });
  fake.enqueue({ toolCall: { code: ACTIVATES } });
  let first = "";
  let daemon = await crashAt("activation-during-cell", { modelUrl: fake.url }, async (d) => {
    const client = await connectLane({ port: d.port, token: d.token });
    first = String((await waitRecord(client, "activation")).data.release_id);
    await client.request({ kind: "input", client_msg_id: "v2", text: "improve yourself" });
    await client.closed;
  });
  try {
    const v2 = withDb(daemon.stateDir, (db) => {
      // The kill landed inside the cell, after the epoch swap committed.
      assert.deepEqual(rows(db, "SELECT outcome FROM cells"), [{ outcome: null }]);
      const [session] = rows(db, "SELECT active_release, behavior_epoch FROM sessions");
      assert.notEqual(session.active_release, first);
      return String(session.active_release);
    });
    daemon = await daemon.restart({ env: {} });
    const client = await connectLane({ port: daemon.port, token: daemon.token });
    const recovery = await waitRecord(client, "recovery");
    assert.equal((recovery.data.interrupted_cells as string[]).length, 1);
    const [frame] = recovery.data.resumed_frames as string[];
    await waitRecord(client, "frame.finished", (r) => r.data.frame_id === frame);
    // The restart kept the activation: no start-up activation moved the session back.
    const activations = records(client, "activation");
    assert.equal(activations.at(-1)!.data.release_id, v2);
    const tool = fake.requests.filter((r) => r.method === "POST").at(-1)!.body.messages
      .filter((m: { role: string }) => m.role === "tool").at(-1).content as string;
    assert.match(tool, /did not finish/);
    assert.match(tool, /local\.send snd_\w+ \(record \d+\): "switching my behaviour"/);
    assert.equal(
      records(client, "cell.started").filter((r) => String(r.data.code).includes("draft")).length,
      1,
    );
    await client.close();
    const next = await nextMessageAnswered(daemon, fake, "after");
    const policy = withDb(
      daemon.stateDir,
      (db) =>
        rows(db, "SELECT policy_revision FROM frames WHERE input_ids LIKE ?", `%${next.inputId}%`),
    );
    assert.deepEqual(
      policy,
      [{ policy_revision: v2 }],
      "the next frame is planned by the new release",
    );
    assert.equal(await daemon.stop(), 0);
    const acked = inputIds(daemon.stateDir);
    checkStore(daemon.stateDir, acked);
  } finally {
    await daemon.stop().catch(() => {});
    await fake.close();
    await removeDirs(daemon);
  }
});
