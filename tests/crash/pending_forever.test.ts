// Window "work pending forever": every input ends with a recorded disposition. One a plan
// ignores is taken by a frame that records the plan's reason and runs no turn; one no plan
// takes is shown as waiting once it passes the threshold (`status`, `/health`) and ends
// `expired` after the configured age — by a timer, with no other wake — and the session goes
// on answering.

import assert from "node:assert/strict";
import { startFakeOpenAI } from "../fakes/openai_server.ts";
import { startTestDaemon } from "../_helpers/daemon.ts";
import { connectLane } from "../_helpers/lane_client.ts";
import { activateVariant } from "../_helpers/releases.ts";
import type { ServerMessage } from "../../runtime/core/mod.ts";
import {
  checkStore,
  nextMessageAnswered,
  removeDirs,
  rows,
  waitRecord,
  withDb,
} from "./_checks.ts";

const CHOOSY_PLAN = [
  "def plan(inputs, session):",
  "    text = lambda i: str(i.get('body'))",
  "    ignore = [{'id': i['id'], 'reason': 'not for me'} for i in inputs if 'ignore me' in text(i)]",
  "    consume = [i['id'] for i in inputs if 'ignore me' not in text(i) and 'hold' not in text(i)]",
  "    return {'consume': consume, 'routing': {}, 'ignore': ignore}",
  "",
].join("\n");

Deno.test("window pending-forever: an ignored input and an expired one each end with their disposition recorded", async () => {
  const fake = startFakeOpenAI({ fallback: () => ({ toolCall: { code: "wait()" } }) });
  const env = { KLBR_INPUT_EXPIRE_MS: "1500", KLBR_INPUT_WAIT_WARN_MS: "300" };
  let daemon = await startTestDaemon({ modelUrl: fake.url, env });
  try {
    assert.equal(await daemon.stop(), 0);
    await activateVariant(daemon.stateDir, { "attention.py": CHOOSY_PLAN });
    daemon = await daemon.restart();
    const client = await connectLane({ port: daemon.port, token: daemon.token });
    const ignored = await client.request({
      kind: "input",
      client_msg_id: "i",
      text: "ignore me please",
    });
    const ignoredId = (ignored as { input_id: string }).input_id;
    const frame = await waitRecord(client, "frame.accepted");
    assert.deepEqual(frame.data.input_ids, [ignoredId]);
    assert.deepEqual((frame.data.routing as { ignored: unknown }).ignored, [
      { input_id: ignoredId, reason: "not for me" },
    ]);
    const finished = await waitRecord(client, "frame.finished");
    assert.deepEqual([finished.data.state, finished.data.reason], [
      "done",
      "every input ignored; no turn",
    ]);
    assert.equal(fake.requests.filter((r) => r.method === "POST").length, 0, "no model request");

    const held = await client.request({ kind: "input", client_msg_id: "h", text: "hold this" });
    const heldId = (held as { input_id: string }).input_id;
    // Once it has waited past the threshold, status and /health say so, naming it.
    let status: Record<string, unknown> = {};
    for (let i = 0; i < 200; i++) {
      const reply = await client.request({ kind: "op.status" });
      status = ((reply as Extract<ServerMessage, { kind: "op.result" }>).result.sessions as Record<
        string,
        Record<string, unknown>
      >).default;
      if (Number(status.waiting_inputs) > 0) break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    assert.equal(status.waiting_inputs, 1);
    assert.equal((status.waiting as { id: string }[])[0].id, heldId);
    const health = await (await fetch(`${daemon.url}/health`)).json();
    assert.equal(health.status, "degraded");
    assert.ok((health.reasons as string[]).some((r) => /1 input\(s\) waiting over 300 ms/.test(r)));

    // With nothing else waking the session, the expiry timer ends it.
    const expired = await waitRecord(client, "input.expired");
    assert.equal(expired.data.input_id, heldId);
    assert.match(String(expired.data.reason), /^pending for more than 1500 ms without a frame$/);
    const after = await (await fetch(`${daemon.url}/health`)).json();
    assert.equal(after.waiting_inputs, 0);
    await client.close();
    const next = await nextMessageAnswered(daemon, fake, "after");
    assert.equal(await daemon.stop(), 0);
    withDb(daemon.stateDir, (db) => {
      const dispositions = rows(
        db,
        "SELECT id, status, disposition FROM inputs WHERE id IN (?, ?) ORDER BY admitted_seq",
        ignoredId,
        heldId,
      );
      assert.deepEqual(dispositions.map((r) => [r.id, r.status, r.disposition]), [
        [ignoredId, "consumed", null],
        [heldId, "dismissed", "expired"],
      ]);
    });
    checkStore(daemon.stateDir, [ignoredId, heldId, next.inputId]);
  } finally {
    await daemon.stop().catch(() => {});
    await fake.close();
    await removeDirs(daemon);
  }
});
