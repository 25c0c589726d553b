// What a cell's result tells the model about what the cell did: every outcome names the
// effects the cell committed (sends, outbox rows, timers, jobs), so a model that fixes and
// re-runs a failing cell knows what already happened; a re-run sends nothing new. A call of
// klbr's API that the cell never awaited is the cell's error, naming the call. End to end
// through the real daemon, the real workbench and the scripted fake model; the rendering of
// each outcome against the renderer itself.

import assert from "node:assert/strict";
import { renderCellResult } from "../../../runtime/session/mod.ts";
import type { CellResult } from "../../../runtime/kernel/mod.ts";
import type { EffectRecord } from "../../../store/tables/effects.ts";
import { startTestDaemon } from "../../_helpers/daemon.ts";
import { connectLane, type LaneClient } from "../../_helpers/lane_client.ts";
import { type FakeResponse, startFakeOpenAI } from "../../fakes/openai_server.ts";
import type { LaneRecord } from "../../../runtime/core/mod.ts";

type Message = { role: string; content: string };

const records = (client: LaneClient, type: string) =>
  client.messages.filter((m): m is LaneRecord => m.kind === "record" && m.type === type);

/** Runs one turn of `cells` (then `wait()`) and returns the tool results the model read. */
async function turnOf(cells: string[]): Promise<{ results: string[]; client: LaneClient }> {
  const fake = startFakeOpenAI({ fallback: () => ({ toolCall: { code: "wait()" } }) });
  fake.enqueue(...cells.map((code): FakeResponse => ({ toolCall: { code } })));
  const daemon = await startTestDaemon({ modelUrl: fake.url });
  try {
    const client = await connectLane({ port: daemon.port, token: daemon.token });
    await client.request({ kind: "input", client_msg_id: "q", text: "go" });
    await client.waitFor<LaneRecord>(
      (m) => m.kind === "record" && m.type === "frame.finished",
      60_000,
    );
    await client.close();
    // The request after each cell ends with that cell's result.
    const posts = fake.requests.filter((r) => r.method === "POST");
    const results = posts.slice(1, cells.length + 1).map((r) =>
      (r.body.messages as Message[]).at(-1)!.content
    );
    return { results, client };
  } finally {
    await daemon.stop();
    await fake.close();
    await Deno.remove(daemon.stateDir, { recursive: true }).catch(() => {});
    await Deno.remove(daemon.workspace, { recursive: true }).catch(() => {});
  }
}

Deno.test("a cell that sends then raises lists its send and timer; run again fixed, it sends nothing new", async () => {
  const failing = [
    "await local.send('step one done')",
    "await timers.after(3600, 'check the build')",
    "raise RuntimeError('boom')",
  ].join("\n");
  const fixed = "r = await local.send('step one done')\nprint('duplicate:', r['duplicate'])";
  const { results: [first, again], client } = await turnOf([failing, fixed]);
  assert.match(
    first,
    new RegExp(
      "^outcome: error\neffects this cell committed \\(they happened; do not repeat them\\):\n" +
        '1\\. local\\.send snd_\\w+ \\(record \\d+\\): "step one done"\n' +
        '2\\. timer tm_\\w+: "due \\d{4}-\\d\\d-\\d\\dT[\\d:.]+Z: check the build"\n' +
        "error:\nTraceback",
    ),
  );
  assert.match(first, /RuntimeError: boom/);
  // The duplicate publishes nothing and records no effect: the re-run lists none.
  assert.equal(again, "outcome: ok\nstdout:\nduplicate: True\n");
  assert.deepEqual(records(client, "send").map((r) => r.data.text), ["step one done"]);
});

Deno.test("a cell calling local.send without await gets an error result naming it", async () => {
  const { results: [result], client } = await turnOf(['local.send("x")']);
  assert.match(
    result,
    new RegExp(
      "^outcome: error\neffects this cell committed: none \\(it sent nothing and started nothing\\)\n" +
        'error:\n<cell cell_\\w+>, line 1: local\\.send was not awaited: nothing was sent; write "await local\\.send\\(\\.\\.\\.\\)"\n$',
    ),
  );
  const [finished] = records(client, "cell.finished");
  assert.equal(finished.data.outcome, "error");
  const error = (finished.data.result as { error: { type: string; message: string } }).error;
  assert.deepEqual([error.type, error.message], [
    "NotAwaited",
    "local.send was not awaited: nothing was sent",
  ]);
  assert.deepEqual(records(client, "send"), [], "nothing was sent");
});

const SEND: EffectRecord = {
  session: "default",
  cellId: "c1",
  ordinal: 1,
  kind: "local.send",
  refId: "snd_1",
  key: null,
  summary: "hello",
  seq: 7,
  at: 0,
};
const ROW: EffectRecord = {
  ...SEND,
  ordinal: 2,
  kind: "discord.send",
  refId: "ob_1",
  summary: "to discord:123: hello",
  seq: null,
};
const JOB: EffectRecord = { ...ROW, ordinal: 3, kind: "job", refId: "job_1", summary: "build: 1" };

function result(outcome: CellResult["outcome"], more: Partial<CellResult> = {}): CellResult {
  return {
    outcome,
    value: null,
    stdout: "",
    stderr: "",
    error: null,
    wait: null,
    duration_ms: 1,
    ...more,
  };
}

Deno.test("every cell result lists the effects its cell committed", () => {
  const listed = "effects this cell committed (they happened; do not repeat them):\n" +
    '1. local.send snd_1 (record 7): "hello"\n2. discord.send ob_1: "to discord:123: hello"\n' +
    '3. job job_1: "build: 1"';
  const none = "effects this cell committed: none (it sent nothing and started nothing)";
  const effects = [SEND, ROW, JOB];
  assert.equal(renderCellResult(result("ok"), effects), `outcome: ok\n${listed}`);
  assert.equal(renderCellResult(result("ok", { value: "1" }), []), "outcome: ok\nvalue: 1");
  const error = { type: "E", message: "m", traceback: "E: m" };
  assert.equal(
    renderCellResult(result("error", { error }), effects),
    `outcome: error\n${listed}\nerror:\nE: m`,
  );
  assert.equal(
    renderCellResult(result("error", { error }), []),
    `outcome: error\n${none}\nerror:\nE: m`,
  );
  // `interrupted` is what recovery records for a cell the daemon's death cut short.
  const unfinished = ["cancelled", "timed_out", "interrupted", "killed"] as CellResult["outcome"][];
  for (const outcome of unfinished) {
    assert.equal(
      renderCellResult(result(outcome), effects),
      `outcome: ${outcome}\nthis cell did not finish.\n${listed}`,
    );
    assert.equal(
      renderCellResult(result(outcome), []),
      `outcome: ${outcome}\nthis cell did not finish.\n${none}`,
    );
  }
});
