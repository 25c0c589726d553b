// Crash windows of a signal-driven shutdown: an accepted execution still completing (the drain
// waits for it and records its outcome), a cell that catches the cancellation, and a hook that
// catches it. Each ends with exit 0, the shutdown recorded as the signal, every outcome
// written, and a next start that finds nothing to repair and answers the next message.

import assert from "node:assert/strict";
import { join } from "node:path";
import { startFakeOpenAI } from "../fakes/openai_server.ts";
import { cli } from "../_helpers/cli.ts";
import { startTestDaemon } from "../_helpers/daemon.ts";
import { connectLane } from "../_helpers/lane_client.ts";
import { activateVariant } from "../_helpers/releases.ts";
import {
  checkStore,
  nextMessageAnswered,
  removeDirs,
  rows,
  waitRecord,
  withDb,
} from "./_checks.ts";

const FINISHES_ON_FILE = [
  "import asyncio, os",
  "while not os.path.exists('finish'):",
  "    await asyncio.sleep(0.02)",
  "await local.send('finished after the signal')",
  "wait()",
].join("\n");

const CATCHES_CANCEL = [
  "import asyncio, pathlib",
  "await local.send('started the long job')",
  "while True:",
  "    try:",
  "        await asyncio.sleep(3600)",
  "    except asyncio.CancelledError:",
  "        pathlib.Path('cell-caught-cancel').open('a').write('caught\\n')",
].join("\n");

const BLOCKING_PLAN = [
  "import asyncio, os, pathlib",
  "async def plan(inputs, session):",
  "    pathlib.Path('plan-started').touch()",
  "    while os.path.exists('block-plan'):",
  "        try:",
  "            await asyncio.sleep(0.05)",
  "        except asyncio.CancelledError:",
  "            pathlib.Path('hook-caught-cancel').open('a').write('caught\\n')",
  "    return {'consume': [i['id'] for i in inputs], 'routing': {}}",
  "",
].join("\n");

/** Waits (bounded) until `path` exists. */
async function waitForFile(path: string): Promise<void> {
  for (let i = 0; i < 1500 && !(await Deno.stat(path).catch(() => null)); i++) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  assert.ok(await Deno.stat(path), `${path} appeared`);
}

/** What every shutdown leaves: the stopping record names the signal, and the next start repairs nothing. */
function assertCleanShutdown(stateDir: string): void {
  withDb(stateDir, (db) => {
    const [stopping] = rows(
      db,
      "SELECT body ->> 'reason' AS reason FROM events WHERE kind = 'daemon.stopping'",
    );
    assert.equal(stopping.reason, "daemon shutdown (SIGTERM)", "recorded as the signal");
    assert.deepEqual(
      rows(db, "SELECT id FROM cells WHERE outcome IS NULL"),
      [],
      "every outcome written",
    );
    assert.deepEqual(
      rows(db, "SELECT id FROM frames WHERE state = 'open'"),
      [],
      "no frame left open",
    );
  });
}

Deno.test("window shutdown-with-execution: SIGTERM drains a running cell, which completes and is recorded", async () => {
  const fake = startFakeOpenAI({ fallback: () => ({ toolCall: { code: "wait()" } }) });
  fake.enqueue({ toolCall: { code: FINISHES_ON_FILE } });
  let daemon = await startTestDaemon({ modelUrl: fake.url, env: { KLBR_DRAIN_GRACE_MS: "60000" } });
  try {
    const client = await connectLane({ port: daemon.port, token: daemon.token });
    const ack = await client.request({ kind: "input", client_msg_id: "job", text: "do the job" });
    await waitRecord(client, "cell.started");
    const stopped = daemon.stop();
    await waitRecord(client, "daemon.stopping");
    // Admission is closed while draining, and says so (retriable) rather than going silent.
    const refused = await client.request({ kind: "input", client_msg_id: "late", text: "late" });
    assert.equal(refused.kind === "error" && refused.code, "shutting_down");
    assert.equal(refused.kind === "error" && refused.retriable, true);
    await Deno.writeTextFile(join(daemon.workspace, "finish"), "");
    const finished = await waitRecord(client, "cell.finished");
    assert.equal(finished.data.outcome, "ok", "the accepted execution completed");
    assert.equal(await stopped, 0);
    assertCleanShutdown(daemon.stateDir);
    const [frame] = withDb(
      daemon.stateDir,
      (db) => rows(db, "SELECT state, ended_reason FROM frames"),
    );
    assert.deepEqual(frame, { state: "done", ended_reason: "wait" });
    daemon = await daemon.restart();
    const next = await nextMessageAnswered(daemon, fake, "after");
    assert.equal(await daemon.stop(), 0);
    withDb(
      daemon.stateDir,
      (db) =>
        assert.deepEqual(
          rows(db, "SELECT 1 FROM events WHERE kind = 'recovery'"),
          [],
          "nothing to repair",
        ),
    );
    checkStore(daemon.stateDir, [(ack as { input_id: string }).input_id, next.inputId]);
  } finally {
    await daemon.stop().catch(() => {});
    await fake.close();
    await removeDirs(daemon);
  }
});

Deno.test("window cancellation-during-drain (cell): a cell that catches the cancellation is killed after the grace, recorded", async () => {
  const fake = startFakeOpenAI({ fallback: () => ({ toolCall: { code: "wait()" } }) });
  fake.enqueue({ toolCall: { code: CATCHES_CANCEL } });
  let daemon = await startTestDaemon({ modelUrl: fake.url, env: { KLBR_DRAIN_GRACE_MS: "500" } });
  try {
    const client = await connectLane({ port: daemon.port, token: daemon.token });
    const ack = await client.request({ kind: "input", client_msg_id: "long", text: "run forever" });
    await waitRecord(client, "send");
    assert.equal(await daemon.stop(), 0);
    assertCleanShutdown(daemon.stateDir);
    assert.match(await Deno.readTextFile(join(daemon.workspace, "cell-caught-cancel")), /caught/);
    withDb(daemon.stateDir, (db) => {
      assert.deepEqual(rows(db, "SELECT outcome FROM cells"), [{ outcome: "killed" }]);
      const [frame] = rows(db, "SELECT state, ended_reason FROM frames");
      assert.equal(frame.state, "failed");
      assert.match(String(frame.ended_reason), /stopped: daemon shutdown \(SIGTERM\)/);
    });
    daemon = await daemon.restart();
    const next = await nextMessageAnswered(daemon, fake, "after");
    assert.equal(await daemon.stop(), 0);
    checkStore(daemon.stateDir, [(ack as { input_id: string }).input_id, next.inputId]);
  } finally {
    await daemon.stop().catch(() => {});
    await fake.close();
    await removeDirs(daemon);
  }
});

Deno.test("window cancellation-during-drain (hook): a plan hook that catches the cancellation is killed, its inputs stay pending", async () => {
  const fake = startFakeOpenAI({ fallback: () => ({ toolCall: { code: "wait()" } }) });
  let daemon = await startTestDaemon({ modelUrl: fake.url, env: { KLBR_DRAIN_GRACE_MS: "500" } });
  try {
    assert.equal(await daemon.stop(), 0);
    await activateVariant(daemon.stateDir, { "attention.py": BLOCKING_PLAN });
    await Deno.writeTextFile(join(daemon.workspace, "block-plan"), "");
    daemon = await daemon.restart();
    const client = await connectLane({ port: daemon.port, token: daemon.token });
    const ack = await client.request({ kind: "input", client_msg_id: "held", text: "plan me" });
    const inputId = (ack as { input_id: string }).input_id;
    // The plan is running (it said so), and only then does the signal come.
    await waitForFile(join(daemon.workspace, "plan-started"));
    assert.equal(await daemon.stop(), 0);
    assertCleanShutdown(daemon.stateDir);
    assert.match(await Deno.readTextFile(join(daemon.workspace, "hook-caught-cancel")), /caught/);
    withDb(daemon.stateDir, (db) => {
      const [failed] = rows(
        db,
        "SELECT body ->> 'hook' AS hook FROM events WHERE kind = 'hook.failed'",
      );
      assert.equal(failed.hook, "attention.plan");
      assert.deepEqual(rows(db, "SELECT status FROM inputs"), [{ status: "pending" }]);
    });
    // Once the plan stops blocking, the restart plans the held input and answers it.
    await Deno.remove(join(daemon.workspace, "block-plan"));
    fake.enqueue({ toolCall: { code: "await local.send('planned at last')\nwait()" } });
    daemon = await daemon.restart();
    const again = await connectLane({ port: daemon.port, token: daemon.token });
    await waitRecord(again, "send", (r) => r.data.text === "planned at last");
    await again.close();
    const next = await nextMessageAnswered(daemon, fake, "after");
    assert.equal(await daemon.stop(), 0);
    checkStore(daemon.stateDir, [inputId, next.inputId]);
  } finally {
    await daemon.stop().catch(() => {});
    await fake.close();
    await removeDirs(daemon);
  }
});

Deno.test("window operator-during-shutdown: SIGTERM's drain refuses every operator command that changes something, and the accepted execution completes", async () => {
  const fake = startFakeOpenAI({ fallback: () => ({ toolCall: { code: "wait()" } }) });
  fake.enqueue({ toolCall: { code: FINISHES_ON_FILE } });
  const daemon = await startTestDaemon({
    modelUrl: fake.url,
    env: { KLBR_DRAIN_GRACE_MS: "60000" },
  });
  try {
    const client = await connectLane({ port: daemon.port, token: daemon.token });
    await client.request({ kind: "input", client_msg_id: "job", text: "do the job" });
    await waitRecord(client, "cell.started");
    const stopped = daemon.stop();
    await waitRecord(client, "daemon.stopping");
    // Each would cut the drained turn, or start a workbench or a supervisor the shutdown has
    // closed (a reset after a stop spawned one, killed under it: `worker_failed`).
    for (const op of ["stop", "reset", "resume", "drain", "rollback", "compact", "repair"]) {
      const refused = await client.request({ kind: `op.${op}`, session: "default" });
      assert.deepEqual(refused.kind === "error" && [refused.code, refused.retriable], [
        "shutting_down",
        true,
      ], `${op}: ${JSON.stringify(refused)}`);
      assert.equal(
        refused.kind === "error" && refused.message,
        `cannot ${op} session default: the daemon is shutting down; run it again after it restarts`,
      );
    }
    // Rotating the token is the lane server's own command, refused the same way: the token
    // file keeps the token the restart will read.
    const rotate = await client.request({ kind: "op.token_rotate" });
    assert.deepEqual(
      rotate.kind === "error" && [rotate.code, rotate.retriable, rotate.message],
      [
        "shutting_down",
        true,
        "cannot token_rotate the operator token: the daemon is shutting down; run it again after it restarts",
      ],
      `token_rotate: ${JSON.stringify(rotate)}`,
    );
    assert.equal(
      (await Deno.readTextFile(join(daemon.stateDir, "operator.token"))).trim(),
      daemon.token,
      "the token file is unchanged",
    );
    // The command line says it in one line.
    const cliStop = await cli("klbr", ["stop", "default", "--state", daemon.stateDir]);
    assert.deepEqual([cliStop.code, cliStop.stderr.trim()], [
      1,
      "klbr stop: cannot stop session default: the daemon is shutting down; run it again after it restarts",
    ]);
    const cliRotate = await cli("klbr", ["token", "rotate", "--state", daemon.stateDir]);
    assert.deepEqual([cliRotate.code, cliRotate.stderr.trim()], [
      1,
      "klbr token rotate: cannot token_rotate the operator token: the daemon is shutting down; run it again after it restarts",
    ]);
    // Reading still answers.
    assert.equal((await client.request({ kind: "op.status" })).kind, "op.result");
    await Deno.writeTextFile(join(daemon.workspace, "finish"), "");
    const finished = await waitRecord(client, "cell.finished");
    assert.equal(finished.data.outcome, "ok", "the accepted execution completed");
    assert.equal(await stopped, 0);
    assertCleanShutdown(daemon.stateDir);
    withDb(daemon.stateDir, (db) => {
      assert.deepEqual(rows(db, "SELECT state, ended_reason FROM frames"), [
        { state: "done", ended_reason: "wait" },
      ]);
      assert.deepEqual(rows(db, "SELECT 1 FROM events WHERE kind = 'operator'"), []);
    });
  } finally {
    await daemon.stop().catch(() => {});
    await fake.close();
    await removeDirs(daemon);
  }
});
