// Crash windows, repeatedly: SIGKILL of the daemon in the middle of bursts and turns, then a
// restart, three times over. Afterwards the store is checked directly: integrity, every
// acknowledged input exactly once, no cell run twice, every consumed input held by a live frame.

import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { join } from "node:path";
import { startFakeOpenAI } from "../fakes/openai_server.ts";
import { startTestDaemon, type TestDaemon } from "../_helpers/daemon.ts";
import { connectLane } from "../_helpers/lane_client.ts";

Deno.test("three SIGKILLs mid-burst and mid-turn leave a clean store with nothing lost or repeated", async () => {
  // Every turn runs a short cell that speaks, so kills land inside cells as well as bursts.
  const fake = startFakeOpenAI({
    fallback: () => ({
      toolCall: {
        code: "import asyncio\nawait asyncio.sleep(0.05)\nawait local.send('seen')\nwait()",
      },
    }),
  });
  let daemon: TestDaemon = await startTestDaemon({ modelUrl: fake.url });
  const acked = new Map<string, string>(); // client_msg_id → input id
  try {
    for (let round = 0; round < 3; round++) {
      const client = await connectLane({ port: daemon.port, token: daemon.token });
      for (let i = 0; i < 40; i++) {
        client.send({
          kind: "input",
          request: `r${round}-${i}`,
          client_msg_id: `m${round}-${i}`,
          text: `n${i}`,
        });
      }
      await client.waitFor((m) => m.kind === "ack" && m.request === `r${round}-15`);
      // Let a turn of this round start a cell, so the kill lands inside it (a replayed record
      // of an earlier round does not count).
      const replayed = client.messages.find((m) => m.kind === "replayed");
      const head = replayed?.kind === "replayed" ? replayed.head : 0;
      await client.waitFor(
        (m) => m.kind === "record" && m.type === "cell.started" && m.seq > head,
        20_000,
      ).catch(() => {});
      await daemon.kill();
      await client.closed;
      for (const m of client.messages) {
        if (m.kind === "ack") acked.set(m.request.replace(/^r/, "m"), m.input_id);
      }
      daemon = await daemon.restart();
    }
    // Let the last daemon settle its recovery, then stop it cleanly.
    const last = await connectLane({ port: daemon.port, token: daemon.token });
    await last.waitFor((m) => m.kind === "record" && m.type === "recovery", 20_000);
    await last.close();
    assert.equal(await daemon.stop(), 0);

    const db = new DatabaseSync(join(daemon.stateDir, "runtime.sqlite"), { readOnly: true });
    try {
      const integrity = db.prepare("PRAGMA integrity_check").all().map((r) => r.integrity_check);
      assert.deepEqual(integrity, ["ok"]);
      for (const [clientMsgId, inputId] of acked) {
        const rows = db.prepare("SELECT id FROM inputs WHERE dedupe_key = ?").all(
          `local:test:${clientMsgId}`,
        );
        assert.deepEqual(rows.map((r) => r.id), [inputId], `${clientMsgId} present exactly once`);
      }
      const count = (sql: string) => Number(db.prepare(sql).get()!.n);
      console.log(
        "crash test:",
        JSON.stringify({
          acked: acked.size,
          cells: count("SELECT count(*) AS n FROM cells"),
          interrupted: count("SELECT count(*) AS n FROM cells WHERE outcome = 'interrupted'"),
          recoveries: count("SELECT count(*) AS n FROM events WHERE kind = 'recovery'"),
          resumed: count("SELECT count(*) AS n FROM events WHERE kind = 'frame.resumed'"),
          sends: count("SELECT count(*) AS n FROM events WHERE kind = 'send'"),
        }),
      );
      // A restart never runs a finished cell again: no tool call has two cells.
      const twice = db.prepare(
        "SELECT tool_call_id, count(*) AS n FROM cells WHERE tool_call_id IS NOT NULL GROUP BY tool_call_id HAVING n > 1",
      ).all();
      assert.deepEqual(twice, []);
      // A consumed input is held by a frame that was not abandoned.
      const orphans = db.prepare(
        `SELECT i.id FROM inputs i JOIN frames f ON f.id = i.frame_id
         WHERE i.status = 'consumed' AND f.state = 'abandoned'`,
      ).all();
      assert.deepEqual(orphans, []);
      // No frame is left open once the daemon has drained.
      assert.deepEqual(db.prepare("SELECT id FROM frames WHERE state = 'open'").all(), []);
      // Every tool call the model made has exactly one result in the provider sequence.
      const dangling = db.prepare(
        `SELECT j.value ->> 'id' AS id FROM provider_items p, json_each(p.message, '$.tool_calls') j
         WHERE p.role = 'assistant' AND NOT EXISTS (
           SELECT 1 FROM provider_items t WHERE t.session_id = p.session_id AND t.role = 'tool'
             AND t.tool_call_id = j.value ->> 'id')`,
      ).all();
      assert.deepEqual(dangling, []);
    } finally {
      db.close();
    }
  } finally {
    await daemon.stop().catch(() => {});
    await fake.close();
  }
});
