// `drain` then `resume` takes work again without a daemon restart: the kernel a drain shut down
// starts a new generation, and a message sent while the session was drained is answered. While
// it waits, /health says why (the session's state and the fix), so the page can name it. A
// reset does not lift the hold: a stopped session stays stopped, a drained one is refused.

import assert from "node:assert/strict";
import { cli } from "../../_helpers/cli.ts";
import { startTestDaemon } from "../../_helpers/daemon.ts";
import { connectLane, frameOf, type LaneClient, sendAndWait } from "../../_helpers/lane_client.ts";
import { startFakeOpenAI } from "../../fakes/openai_server.ts";
import type { LaneRecord } from "../../../runtime/core/mod.ts";

/** Runs one operator command on the default session and returns its result. */
async function op(client: LaneClient, kind: string): Promise<Record<string, unknown>> {
  const reply = await client.request({ kind, session: "default" });
  if (reply.kind !== "op.result") throw new Error(`${kind} failed: ${JSON.stringify(reply)}`);
  return reply.result;
}

const WAIT_CELL = { toolCall: { code: "wait()" } };

Deno.test("drain then resume answers a message sent meanwhile, with no restart; /health says why it waits", async () => {
  const fake = startFakeOpenAI({ fallback: () => WAIT_CELL });
  const daemon = await startTestDaemon({ modelUrl: fake.url });
  const client = await connectLane({ port: daemon.port, token: daemon.token });
  try {
    const base = ["--state", daemon.stateDir];
    // A first turn starts the kernel, so the drain has a live workbench to shut down.
    fake.enqueue({ toolCall: { code: "x = 1\nwait()" } });
    await sendAndWait(client, "first");

    const drained = await cli("klbr", ["drain", "default", ...base]);
    assert.equal(drained.code, 0, drained.stderr);
    const held = await (await fetch(`${daemon.url}/health`)).json();
    assert.equal(held.session_state, "drained");
    assert.equal(held.status, "degraded");
    assert.match(
      held.waiting_reason,
      /drained by the operator: new messages wait until klbr resume/,
    );
    assert.ok((held.reasons as string[]).includes(held.waiting_reason));

    const ack = await client.request({ kind: "input", client_msg_id: "m2", text: "meanwhile" });
    assert.equal(ack.kind, "ack");
    const waiting = await (await fetch(`${daemon.url}/health`)).json();
    assert.equal(waiting.pending_inputs, 1, "the message waits, taken up by no frame");

    fake.enqueue({ toolCall: { code: "await local.send('answered')\nwait()" } });
    const resumed = await cli("klbr", ["resume", "default", ...base, "--json"]);
    assert.equal(resumed.code, 0, resumed.stderr);
    const result = JSON.parse(resumed.stdout);
    assert.deepEqual([result.state, result.resumed, result.previous_state], [
      "running",
      true,
      "drained",
    ]);

    await frameOf(client, (ack as { input_id: string }).input_id);
    const send = await client.waitFor<LaneRecord>(
      (m) => m.kind === "record" && m.type === "send",
      30_000,
    );
    assert.equal(send.data.text, "answered");
    const after = await (await fetch(`${daemon.url}/health`)).json();
    assert.deepEqual([after.session_state, after.waiting_reason], ["running", null]);

    // Resuming a running session changes nothing; stop then resume works the same way.
    assert.equal((await op(client, "op.resume")).resumed, false);
    assert.equal((await op(client, "op.stop")).state, "stopped");
    assert.equal((await op(client, "op.resume")).previous_state, "stopped");
    await sendAndWait(client, "after stop");
  } finally {
    await client.close();
    await daemon.stop();
    await fake.close();
  }
});

Deno.test("reset keeps a stopped session stopped, and refuses a drained one without changing its state", async () => {
  const fake = startFakeOpenAI({ fallback: () => WAIT_CELL });
  const daemon = await startTestDaemon({ modelUrl: fake.url });
  const client = await connectLane({ port: daemon.port, token: daemon.token });
  const health = async () => await (await fetch(`${daemon.url}/health`)).json();
  try {
    fake.enqueue({ toolCall: { code: "x = 1\nwait()" } });
    await sendAndWait(client, "first");

    // The operator holds the session, then replaces its kernel: the hold stays until resume.
    assert.equal((await op(client, "op.stop")).state, "stopped");
    const ack = await client.request({ kind: "input", client_msg_id: "m2", text: "meanwhile" });
    assert.equal(ack.kind, "ack");
    const reset = await op(client, "op.reset");
    const stopped = await health();
    assert.deepEqual([stopped.session_state, stopped.pending_inputs], ["stopped", 1]);
    assert.equal(reset.generation, 2);
    assert.match(String(reset.message), /the session stays stopped: klbr resume default/);

    // A drained session's workbench is shut down: reset is refused, naming what takes the
    // session up, and the session stays drained.
    assert.equal((await op(client, "op.drain")).state, "drained");
    const refused = await client.request({ kind: "op.reset", session: "default" });
    assert.equal(refused.kind, "error");
    const error = refused as Extract<typeof refused, { kind: "error" }>;
    assert.equal(error.code, "invalid_input");
    assert.equal(
      error.message,
      "cannot reset session default: it is drained and its workbench is shut down; klbr resume default starts a new generation (got drained)",
    );
    assert.equal((await health()).session_state, "drained");

    // Stopped after the drain, its workbench is still shut down: reset starts a new one.
    assert.equal((await op(client, "op.stop")).state, "stopped");
    assert.equal((await op(client, "op.reset")).generation, 3);
    assert.equal((await health()).session_state, "stopped");

    fake.enqueue({ toolCall: { code: "await local.send('answered')\nwait()" } });
    assert.equal((await op(client, "op.resume")).previous_state, "stopped");
    await frameOf(client, (ack as { input_id: string }).input_id);
  } finally {
    await client.close();
    await daemon.stop();
    await fake.close();
  }
});
