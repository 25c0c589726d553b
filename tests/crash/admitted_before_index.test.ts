// Crash window `admitted-before-index`: inputs are history-indexed after admission, when the
// admission queue goes idle. A daemon killed after an input's commit and before it was indexed
// loses nothing: the input is in the store behind the index's cursor, and the first search
// after the restart finds it (the search catches the index up before it reads).

import assert from "node:assert/strict";
import { startFakeOpenAI } from "../fakes/openai_server.ts";
import { startTestDaemon } from "../_helpers/daemon.ts";
import { connectLane } from "../_helpers/lane_client.ts";
import { checkStore, records, removeDirs, rows, waitRecord, withDb } from "./_checks.ts";

const SEARCH = [
  'found = await history.search("pelican")',
  'print(" ".join(sorted(h.id for h in found if h.kind == "input")))',
  "wait()",
].join("\n");

Deno.test("window admitted-before-index: an input committed but not yet indexed is found by the next search", async () => {
  const fake = startFakeOpenAI({ fallback: () => ({ toolCall: { code: "wait()" } }) });
  // The first idle pass indexes m1; the kill lands on the second, before m2 is indexed.
  let daemon = await startTestDaemon({
    modelUrl: fake.url,
    env: { KLBR_FAULTS: "admitted-before-index=kill@2" },
  });
  try {
    const client = await connectLane({ port: daemon.port, token: daemon.token });
    const first = await client.request({ kind: "input", client_msg_id: "m1", text: "pelican one" });
    assert.equal(first.kind, "ack");
    client.send({ kind: "input", request: "r2", client_msg_id: "m2", text: "pelican two" });
    const status = await daemon.exited();
    assert.equal(status.signal, "SIGKILL", `the daemon was killed (got ${JSON.stringify(status)})`);
    assert.match(daemon.logs(), /klbr-fault: admitted-before-index kill \(hit 2\)/);
    await client.closed;

    // The kill landed while the cursor was behind: m2 is committed, m1 alone is indexed.
    const state = withDb(daemon.stateDir, (db) => ({
      inputs: rows(db, "SELECT rowid, id, dedupe_key FROM inputs ORDER BY rowid"),
      cursor: rows(db, "SELECT last_rowid FROM history_cursors")[0].last_rowid,
      indexed: rows(db, "SELECT ref FROM history_fts WHERE kind = 'input'").map((r) => r.ref),
    }));
    const [m1, m2] = state.inputs;
    assert.deepEqual([m1.dedupe_key, m2.dedupe_key], ["local:test:m1", "local:test:m2"]);
    assert.equal(m1.id, (first as { input_id: string }).input_id);
    assert.equal(state.cursor, m1.rowid);
    assert.ok(Number(m2.rowid) > Number(state.cursor), "m2 is behind the cursor");
    assert.deepEqual(state.indexed, [`input:${m1.id}`]);

    fake.enqueue({ toolCall: { code: SEARCH } });
    daemon = await daemon.restart({ env: {} });
    const again = await connectLane({ port: daemon.port, token: daemon.token });
    const ack = await again.request({ kind: "input", client_msg_id: "m3", text: "search now" });
    assert.equal(ack.kind, "ack");
    // Whichever turn runs the search cell (m2's recovered turn or m3's), it ran after the restart.
    const stdoutOf = (r: { data: Record<string, unknown> }) =>
      String((r.data.result as { stdout?: string } | undefined)?.stdout ?? "");
    const cell = await waitRecord(again, "cell.finished", (r) => stdoutOf(r).includes("input:"));
    assert.deepEqual(stdoutOf(cell).trim().split(" "), [`input:${m1.id}`, `input:${m2.id}`].sort());
    assert.equal(records(again, "cell.finished").filter((r) => stdoutOf(r) !== "").length, 1);
    await again.close();
    assert.equal(await daemon.stop(), 0);
    // Every input is indexed exactly once, and the cursor is past the last.
    withDb(daemon.stateDir, (db) => {
      const refs = rows(db, "SELECT ref FROM history_fts WHERE kind = 'input'").map((r) => r.ref);
      const ids = rows(db, "SELECT id FROM inputs").map((r) => `input:${r.id}`);
      assert.deepEqual([...refs].sort(), [...ids].sort());
      const [{ behind }] = rows(
        db,
        "SELECT (SELECT max(rowid) FROM inputs) - last_rowid AS behind FROM history_cursors",
      );
      assert.equal(behind, 0);
    });
    checkStore(daemon.stateDir, [String(m1.id), String(ack.input_id)]);
  } finally {
    await daemon.stop().catch(() => {});
    await fake.close();
    await removeDirs(daemon);
  }
});
