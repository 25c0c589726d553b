// Crash window `admitted-before-index`: inputs are history-indexed after admission, when the
// admission queue goes idle with a whole batch behind. A daemon killed after the inputs' commit
// and before they were indexed loses nothing: they are in the store behind the index's cursor,
// and the first search after the restart finds them (a search catches the index up first).

import assert from "node:assert/strict";
import { startFakeOpenAI } from "../fakes/openai_server.ts";
import { startTestDaemon } from "../_helpers/daemon.ts";
import { connectLane } from "../_helpers/lane_client.ts";
import { removeDirs, rows, waitRecord, withDb } from "./_checks.ts";

const SEARCH = [
  'found = await history.search("pelican")',
  'print(" ".join(sorted(h.id for h in found if h.kind == "input")))',
  "wait()",
].join("\n");

const BURST = 300;

Deno.test("window admitted-before-index: inputs committed but not yet indexed are found by the next search", async () => {
  const fake = startFakeOpenAI({ fallback: () => ({ toolCall: { code: "wait()" } }) });
  // The idle indexer runs once a whole batch (256) waits; the kill lands before it writes.
  let daemon = await startTestDaemon({
    modelUrl: fake.url,
    env: { KLBR_FAULTS: "admitted-before-index=kill@1" },
  });
  try {
    const client = await connectLane({ port: daemon.port, token: daemon.token });
    for (let n = 0; n < BURST; n++) {
      const text = n === 0 ? "pelican first" : `heron ${n}`;
      client.send({ kind: "input", request: `r${n}`, client_msg_id: `m${n}`, text });
    }
    const status = await daemon.exited();
    assert.equal(status.signal, "SIGKILL", `the daemon was killed (got ${JSON.stringify(status)})`);
    assert.match(daemon.logs(), /klbr-fault: admitted-before-index kill \(hit 1\)/);
    await client.closed;
    const acked = client.messages.filter((m) => m.kind === "ack")
      .map((m) => String((m as { input_id: string }).input_id));

    // The kill landed while the cursor was behind: a whole batch committed, none indexed.
    const state = withDb(daemon.stateDir, (db) => ({
      ids: rows(db, "SELECT id FROM inputs ORDER BY rowid").map((r) => String(r.id)),
      first: rows(db, "SELECT id FROM inputs WHERE dedupe_key = 'local:test:m0'")[0]?.id,
      cursor: rows(db, "SELECT last_rowid FROM history_cursors")[0].last_rowid,
      indexed: rows(db, "SELECT count(*) AS n FROM history_fts WHERE kind = 'input'")[0].n,
    }));
    assert.ok(state.ids.length >= 256, `a whole batch was committed (got ${state.ids.length})`);
    assert.deepEqual([state.cursor, state.indexed], [0, 0]);
    for (const id of acked) assert.ok(state.ids.includes(id), `acknowledged ${id} is stored`);
    assert.ok(state.first !== undefined, "the first input was committed");

    fake.enqueue({ toolCall: { code: SEARCH } });
    daemon = await daemon.restart({ env: {} });
    const again = await connectLane({ port: daemon.port, token: daemon.token });
    const ack = await again.request({ kind: "input", client_msg_id: "last", text: "search now" });
    assert.equal(ack.kind, "ack");
    // Whichever turn runs the search cell, it runs after the restart, on the unindexed backlog.
    const stdoutOf = (r: { data: Record<string, unknown> }) =>
      String((r.data.result as { stdout?: string } | undefined)?.stdout ?? "");
    const cell = await waitRecord(again, "cell.finished", (r) => stdoutOf(r).includes("input:"));
    assert.equal(stdoutOf(cell).trim(), `input:${state.first}`);
    await again.close();
    assert.equal(await daemon.stop(), 0);
    // The search indexed every input, each once, and the cursor is past the last.
    withDb(daemon.stateDir, (db) => {
      assert.deepEqual(rows(db, "PRAGMA integrity_check").map((r) => r.integrity_check), ["ok"]);
      const refs = rows(db, "SELECT ref FROM history_fts WHERE kind = 'input'").map((r) => r.ref);
      const ids = rows(db, "SELECT id FROM inputs").map((r) => `input:${r.id}`);
      assert.deepEqual([...refs].sort(), [...ids].sort());
      const [{ behind }] = rows(
        db,
        "SELECT (SELECT max(rowid) FROM inputs) - last_rowid AS behind FROM history_cursors",
      );
      assert.equal(behind, 0);
    });
  } finally {
    await daemon.stop().catch(() => {});
    await fake.close();
    await removeDirs(daemon);
  }
});
