// Crash window `commit-before-notify`: admission has committed an input and the daemon dies
// before the client hears its ack. The input is durable and is one input when the client sends
// it again; it is answered once.

import assert from "node:assert/strict";
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

Deno.test("window commit-before-notify: an input committed but never acknowledged is kept once and answered", async () => {
  const fake = startFakeOpenAI({ fallback: () => ({ toolCall: { code: "wait()" } }) });
  let daemon = await crashAt("commit-before-notify", { modelUrl: fake.url }, async (d) => {
    const client = await connectLane({ port: d.port, token: d.token });
    client.send({ kind: "input", request: "r1", client_msg_id: "m1", text: "are you there?" });
    await client.closed;
    assert.deepEqual(client.messages.filter((m) => m.kind === "ack"), [], "no ack was sent");
  });
  try {
    // The kill landed between the commit and the notification: the input is in the store.
    const [stored] = withDb(
      daemon.stateDir,
      (db) => rows(db, "SELECT id, status FROM inputs WHERE dedupe_key = 'local:test:m1'"),
    );
    assert.equal(stored.status, "pending");
    fake.enqueue({ toolCall: { code: "await local.send('yes, here')\nwait()" } });
    daemon = await daemon.restart({ env: {} });
    const client = await connectLane({ port: daemon.port, token: daemon.token });
    // The client never heard an ack, so it sends the same message again: one input.
    const again = await client.request({
      kind: "input",
      client_msg_id: "m1",
      text: "are you there?",
    });
    assert.equal(again.kind, "ack");
    assert.equal((again as { input_id: string }).input_id, stored.id);
    assert.equal((again as { duplicate: boolean }).duplicate, true);
    const accepted = await waitRecord(
      client,
      "frame.accepted",
      (r) => (r.data.input_ids as string[]).includes(String(stored.id)),
    );
    await waitRecord(client, "frame.finished", (r) => r.data.frame_id === accepted.data.frame_id);
    assert.deepEqual(records(client, "send").map((r) => r.data.text), ["yes, here"]);
    await client.close();
    const next = await nextMessageAnswered(daemon, fake, "after");
    assert.equal(await daemon.stop(), 0);
    checkStore(daemon.stateDir, [String(stored.id), next.inputId]);
  } finally {
    await daemon.stop().catch(() => {});
    await fake.close();
    await removeDirs(daemon);
  }
});
