// Crash window `wait-before-wake`: a cell has called wait() and its outcome and tool result
// are durable, an input arrived while it ran, and the daemon dies before the turn ends. After
// the restart the waiting turn ends without a model request (waiting costs nothing), and the
// input that arrived meanwhile is not lost: it wakes a new frame and is answered.

import assert from "node:assert/strict";
import { join } from "node:path";
import { startFakeOpenAI } from "../fakes/openai_server.ts";
import { connectLane } from "../_helpers/lane_client.ts";
import {
  checkStore,
  crashAt,
  nextMessageAnswered,
  records,
  removeDirs,
  rows,
  waitRecord,
  withDb,
} from "./_checks.ts";

const WAITS_FOR_GO = [
  "import asyncio, os",
  "while not os.path.exists('go'):",
  "    await asyncio.sleep(0.02)",
  "await local.send('done with A')",
  "wait('for more')",
].join("\n");

Deno.test("window wait-before-wake: a durable wait ends its turn without the model; the input that came meanwhile is answered", async () => {
  const fake = startFakeOpenAI({ fallback: () => ({ toolCall: { code: "wait()" } }) });
  fake.enqueue({ toolCall: { code: WAITS_FOR_GO } });
  const acked: string[] = [];
  let daemon = await crashAt("wait-before-wake", { modelUrl: fake.url }, async (d) => {
    const client = await connectLane({ port: d.port, token: d.token });
    const a = await client.request({ kind: "input", client_msg_id: "a", text: "task A" });
    acked.push((a as { input_id: string }).input_id);
    await waitRecord(client, "cell.started");
    // B arrives while A's cell runs; only then may the cell go on to wait().
    const b = await client.request({ kind: "input", client_msg_id: "b", text: "task B" });
    acked.push((b as { input_id: string }).input_id);
    await Deno.writeTextFile(join(d.workspace, "go"), "");
    await client.closed;
  });
  try {
    withDb(daemon.stateDir, (db) => {
      // The kill landed after the wait was durable and before the turn ended.
      const [cell] = rows(db, "SELECT outcome, result ->> '$.wait.reason' AS waited FROM cells");
      assert.deepEqual([cell.outcome, cell.waited], ["ok", "for more"]);
      assert.equal(rows(db, "SELECT 1 FROM provider_items WHERE role = 'tool'").length, 1);
      assert.equal(rows(db, "SELECT 1 FROM events WHERE kind = 'turn.ended'").length, 0);
      assert.equal(rows(db, "SELECT state FROM frames")[0].state, "open");
      assert.equal(
        rows(db, "SELECT status FROM inputs WHERE id = ?", acked[1])[0].status,
        "pending",
      );
    });
    const requestsBefore = fake.requests.filter((r) => r.method === "POST").length;
    fake.enqueue({ toolCall: { code: "await local.send('done with B')\nwait()" } });
    daemon = await daemon.restart({ env: {} });
    const client = await connectLane({ port: daemon.port, token: daemon.token });
    const recovery = await waitRecord(client, "recovery");
    assert.equal((recovery.data.finished_frames as string[]).length, 1);
    assert.deepEqual(recovery.data.resumed_frames, []);
    const ended = await waitRecord(client, "frame.finished");
    assert.equal(ended.data.state, "done");
    assert.match(String(ended.data.reason), /^wait \(recovered/);
    // B wakes a frame of its own and is answered; A's turn made no model request.
    const b = await waitRecord(
      client,
      "frame.accepted",
      (r) => (r.data.input_ids as string[]).includes(acked[1]),
    );
    await waitRecord(client, "frame.finished", (r) => r.data.frame_id === b.data.frame_id);
    assert.equal(fake.requests.filter((r) => r.method === "POST").length, requestsBefore + 1);
    assert.deepEqual(records(client, "send").map((r) => r.data.text), [
      "done with A",
      "done with B",
    ]);
    await client.close();
    const next = await nextMessageAnswered(daemon, fake, "after");
    assert.equal(await daemon.stop(), 0);
    checkStore(daemon.stateDir, [...acked, next.inputId]);
  } finally {
    await daemon.stop().catch(() => {});
    await fake.close();
    await removeDirs(daemon);
  }
});
