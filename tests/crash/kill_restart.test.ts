// Crash windows, repeatedly: SIGKILL of the daemon in the middle of bursts and inside running
// cells, then a restart, three times over. Each round asserts its kill landed inside a cell (a
// cell without an outcome is in the store before the restart). Afterwards the store is checked
// directly: integrity, every acknowledged input exactly once and at a final disposition, no
// cell run twice, every tool call with one result, nothing left open.

import assert from "node:assert/strict";
import { startFakeOpenAI } from "../fakes/openai_server.ts";
import { startTestDaemon, type TestDaemon } from "../_helpers/daemon.ts";
import { connectLane } from "../_helpers/lane_client.ts";
import { checkStore, removeDirs, rows, waitRecord, withDb } from "./_checks.ts";

Deno.test("window sigkill-mid-burst-and-cell: three SIGKILLs mid-burst and mid-turn leave a clean store with nothing lost or repeated", async () => {
  // While the rounds run, every turn runs a cell that holds long enough for the kill to land
  // inside it; afterwards the cells answer at once.
  let holding = true;
  const fake = startFakeOpenAI({
    fallback: () => ({
      toolCall: {
        code: `import asyncio\nawait asyncio.sleep(${
          holding ? 60 : 0
        })\nawait local.send('seen')\nwait()`,
      },
    }),
  });
  let daemon: TestDaemon = await startTestDaemon({ modelUrl: fake.url });
  const acked = new Map<string, string>(); // client_msg_id → input id
  try {
    for (let round = 0; round < 3; round++) {
      const client = await connectLane({ port: daemon.port, token: daemon.token });
      const replayed = client.messages.find((m) => m.kind === "replayed");
      const head = replayed?.kind === "replayed" ? replayed.head : 0;
      for (let i = 0; i < 40; i++) {
        client.send({
          kind: "input",
          request: `r${round}-${i}`,
          client_msg_id: `m${round}-${i}`,
          text: `n${i}`,
        });
      }
      await client.waitFor((m) => m.kind === "ack" && m.request === `r${round}-15`);
      // A cell of this round has started (a replayed record of an earlier round does not count).
      await waitRecord(client, "cell.started", (r) => r.seq > head);
      await daemon.kill();
      await client.closed;
      for (const m of client.messages) {
        if (m.kind === "ack") acked.set(m.request.replace(/^r/, "m"), m.input_id);
      }
      // The kill landed inside a running cell: it has no outcome yet.
      const open = withDb(
        daemon.stateDir,
        (db) => rows(db, "SELECT id FROM cells WHERE outcome IS NULL"),
      );
      assert.equal(open.length, 1, `round ${round}: the kill landed inside a cell`);
      if (round === 2) holding = false;
      daemon = await daemon.restart();
    }
    // The last daemon continues the interrupted turn and answers what is pending; then it
    // stops cleanly once every acknowledged input reached its frame.
    const last = await connectLane({ port: daemon.port, token: daemon.token });
    await waitRecord(last, "recovery");
    for (const id of acked.values()) {
      await waitRecord(
        last,
        "frame.finished",
        (r) => (r.data.input_ids as string[]).includes(id),
        120_000,
      );
    }
    await last.close();
    assert.equal(await daemon.stop(), 0);

    checkStore(daemon.stateDir, acked.values());
    withDb(daemon.stateDir, (db) => {
      for (const [clientMsgId, inputId] of acked) {
        const found = rows(
          db,
          "SELECT id FROM inputs WHERE dedupe_key = ?",
          `local:test:${clientMsgId}`,
        );
        assert.deepEqual(found.map((r) => r.id), [inputId], `${clientMsgId} present exactly once`);
      }
      const interrupted = rows(db, "SELECT id FROM cells WHERE outcome = 'interrupted'");
      assert.equal(interrupted.length, 3, "each of the three kills interrupted one cell");
    });
  } finally {
    await daemon.stop().catch(() => {});
    await fake.close();
    await removeDirs(daemon);
  }
});
