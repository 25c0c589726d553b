// End-to-end acceptance of the daemon: the real `main.ts serve` process under the serve
// task's permissions, a real Python workbench, and the fake model over real HTTP.

import assert from "node:assert/strict";
import { type FakeOpenAI, startFakeOpenAI } from "../../fakes/openai_server.ts";
import { REPO_ROOT, serveFlags, startTestDaemon, type TestDaemon } from "../../_helpers/daemon.ts";
import { connectLane, type LaneClient } from "../../_helpers/lane_client.ts";
import { KlbrError, type LaneRecord, type ServerMessage } from "../../../runtime/core/mod.ts";
import { readServeSettings } from "../../../runtime/daemon/mod.ts";
import { activateVariant } from "../../_helpers/releases.ts";
import { tempDir } from "../../_helpers/temp.ts";

const records = (client: LaneClient, type?: string) =>
  client.messages.filter((m): m is LaneRecord =>
    m.kind === "record" && (type === undefined || m.type === type)
  );

const waitRecord = (
  client: LaneClient,
  type: string,
  extra: (r: LaneRecord) => boolean = () => true,
) => client.waitFor<LaneRecord>((m) => m.kind === "record" && m.type === type && extra(m), 30_000);

const WAIT_CELL = { toolCall: { code: "wait()" } };

/** Runs `fn` against a fresh daemon whose model is a fake that answers `wait()` by default. */
async function withModelDaemon(
  options: { env?: Record<string, string> },
  fn: (parts: { fake: FakeOpenAI; daemon: TestDaemon }) => Promise<void>,
): Promise<void> {
  const fake = startFakeOpenAI({ fallback: () => WAIT_CELL });
  const daemon = await startTestDaemon({ modelUrl: fake.url, ...options });
  try {
    await fn({ fake, daemon });
  } finally {
    await daemon.stop();
    await fake.close();
  }
}

Deno.test("serve refuses a non-loopback bind before it listens", async () => {
  const state = await tempDir();
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      ...serveFlags(),
      `${REPO_ROOT}/main.ts`,
      "serve",
      "--state",
      state,
      "--host",
      "0.0.0.0",
    ],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(out.code, 2);
  assert.match(
    new TextDecoder().decode(out.stderr),
    /cannot serve: the bind address must be loopback .* \(got 0\.0\.0\.0\)/,
  );
  // Nothing was written: the refusal comes before the state directory is touched.
  assert.deepEqual([...Deno.readDirSync(state)], []);
});

Deno.test("a message yields scratchpad, one cell and exactly one send; wait makes no idle request", async () => {
  await withModelDaemon({}, async ({ fake, daemon }) => {
    // /health answers JSON with the pending-input figures.
    const health = await (await fetch(`${daemon.url}/health`)).json();
    assert.equal(health.ok, true);
    assert.equal(health.pending_inputs, 0);

    fake.enqueue({
      text: "thinking about a greeting",
      toolCall: { code: "x = 41\nawait local.send('hello there')\nprint(x + 1)\nwait()" },
      usage: "openai",
    });
    const client = await connectLane({ port: daemon.port, token: daemon.token });
    const ack = await client.request({ kind: "input", client_msg_id: "m1", text: "hi" });
    assert.equal(ack.kind, "ack");
    await waitRecord(client, "turn.ended");
    await waitRecord(client, "frame.finished");

    assert.equal(records(client, "send").length, 1);
    assert.equal(records(client, "send")[0].data.text, "hello there");
    const pad = records(client, "scratchpad");
    assert.equal(pad.length, 1);
    assert.equal(pad[0].data.text, "thinking about a greeting");
    assert.equal(pad[0].data.partial, false);
    const finished = records(client, "cell.finished");
    assert.equal(finished.length, 1);
    assert.equal(finished[0].data.outcome, "ok");
    assert.equal((finished[0].data.result as { stdout: string }).stdout, "42\n");
    assert.equal(records(client, "turn.ended")[0].data.reason, "wait");
    // The model saw one tool, the python cell.
    const chat = fake.requests.filter((r) => r.method === "POST");
    assert.equal(chat.length, 1);
    assert.deepEqual(
      chat[0].body.tools.map((t: { function: { name: string } }) => t.function.name),
      [
        "python",
      ],
    );

    // Waiting costs nothing: no request until a new input wakes the agent.
    await client.request({ kind: "ping" });
    assert.equal(fake.requests.filter((r) => r.method === "POST").length, 1);
    fake.enqueue({ toolCall: { code: "print(x)\nwait()" } });
    await client.request({ kind: "input", client_msg_id: "m2", text: "again" });
    await waitRecord(client, "turn.ended", (r) => r.seq > records(client, "turn.ended")[0].seq);
    const second = records(client, "cell.finished")[1];
    // The heap survived between turns.
    assert.equal((second.data.result as { stdout: string }).stdout, "41\n");
    const requests = fake.requests.filter((r) => r.method === "POST");
    assert.equal(requests.length, 2);
    // The second request carries the whole valid sequence: the tool call and its result.
    const messages = requests[1].body.messages as { role: string; tool_call_id?: string }[];
    const toolResults = messages.filter((m) => m.role === "tool");
    assert.equal(toolResults.length, 1);
    await client.close();
  });
});

Deno.test("inputs burst during a blocked cell are acknowledged; reset replaces the kernel", async () => {
  await withModelDaemon({}, async ({ fake, daemon }) => {
    fake.enqueue({ toolCall: { code: "import time\ntime.sleep(10**9)" } });
    const client = await connectLane({ port: daemon.port, token: daemon.token });
    await client.request({ kind: "input", client_msg_id: "first", text: "start" });
    await waitRecord(client, "cell.started");
    const acks = await Promise.all(
      Array.from(
        { length: 40 },
        (_, i) =>
          client.request({ kind: "input", client_msg_id: `burst-${i}`, text: `burst ${i}` }),
      ),
    );
    assert.equal(new Set(acks.map((a) => a.kind === "ack" && a.input_id)).size, 40);
    const status = await client.request({ kind: "op.status" });
    assert.equal(status.kind, "op.result");
    const session = (status as Extract<ServerMessage, { kind: "op.result" }>).result
      .sessions as Record<string, { pending_inputs: number }>;
    assert.equal(session.default.pending_inputs, 40);

    const reset = await client.request({ kind: "op.reset", session: "default" }, 30_000);
    assert.equal(reset.kind, "op.result");
    const result = (reset as Extract<ServerMessage, { kind: "op.result" }>).result;
    assert.equal(result.heap_restored, false);
    const blocked = await waitRecord(client, "cell.finished");
    assert.ok(["killed", "cancelled"].includes(String(blocked.data.outcome)));
    await waitRecord(client, "kernel.reset", (r) => r.data.reason === "operator reset");

    // Every burst input is consumed by exactly one accepted frame after the reset.
    const burstIds = new Set(acks.map((a) => (a as { input_id: string }).input_id));
    await client.waitFor((m) =>
      m.kind === "record" && m.type === "frame.accepted" &&
      (m.data.input_ids as string[]).some((id) => burstIds.has(id)), 30_000);
    const consumed = records(client, "frame.accepted").flatMap((r) => r.data.input_ids as string[]);
    for (const id of burstIds) assert.equal(consumed.filter((c) => c === id).length, 1, id);
    await client.close();
  });
});

Deno.test("SIGKILL mid-burst and mid-cell: after restart every acked input is there once, no cell reruns", async () => {
  const fake = startFakeOpenAI({ fallback: () => WAIT_CELL });
  fake.enqueue({ toolCall: { code: "import asyncio\nawait asyncio.sleep(10**6)" } });
  let daemon = await startTestDaemon({ modelUrl: fake.url });
  const acked = new Set<string>();
  try {
    const client = await connectLane({ port: daemon.port, token: daemon.token });
    await client.request({ kind: "input", client_msg_id: "k0", text: "go" });
    await waitRecord(client, "cell.started");
    for (let i = 1; i <= 60; i++) {
      client.send({ kind: "input", request: `b${i}`, client_msg_id: `k${i}`, text: `n${i}` });
    }
    await client.waitFor((m) => m.kind === "ack" && m.request === "b20");
    await daemon.kill();
    for (const m of client.messages) if (m.kind === "ack") acked.add(m.input_id);
    await client.closed;

    daemon = await daemon.restart();
    const after = await connectLane({ port: daemon.port, token: daemon.token });
    await waitRecord(after, "recovery");
    const admitted = records(after, "input.admitted").map((r) => r.data.input_id as string);
    assert.equal(new Set(admitted).size, admitted.length, "no input admitted twice");
    for (const id of acked) assert.ok(admitted.includes(id), `acked ${id} survived`);
    const recovery = records(after, "recovery")[0];
    assert.equal((recovery.data.closed_tool_calls as string[]).length, 1);
    assert.equal((recovery.data.interrupted_cells as string[]).length, 1);
    // The turn had run a cell, so it is continued rather than re-offered: it can still answer.
    const [resumedFrame] = recovery.data.resumed_frames as string[];
    assert.ok(resumedFrame);
    assert.deepEqual(recovery.data.abandoned_frames, []);
    await waitRecord(after, "turn.started", (r) => r.data.resumed === true);
    const done = await waitRecord(after, "frame.finished", (r) => r.data.frame_id === resumedFrame);
    assert.equal(done.data.state, "done");

    // The next model request is a valid sequence and the blocked cell never runs again.
    await fake.waitForRequests(fake.requests.length + 1, 30_000);
    await waitRecord(after, "turn.ended");
    const last = fake.requests.filter((r) => r.method === "POST").at(-1)!;
    const messages = last.body.messages as {
      role: string;
      tool_call_id?: string;
      tool_calls?: { id: string }[];
    }[];
    const calls = messages.flatMap((m) => m.tool_calls?.map((c) => c.id) ?? []);
    const results = messages.filter((m) => m.role === "tool").map((m) => m.tool_call_id);
    assert.deepEqual(results.sort(), calls.sort());
    const started = records(after, "cell.started").filter((r) =>
      String(r.data.code).includes("asyncio.sleep")
    );
    assert.equal(started.length, 1, "the interrupted cell ran once");
    // Each acked input is pending or consumed by exactly one frame that was not abandoned.
    const abandoned = new Set(records(after, "frame.abandoned").map((r) => r.data.frame_id));
    const live = records(after, "frame.accepted").filter((r) => !abandoned.has(r.data.frame_id));
    for (const id of acked) {
      assert.ok(live.filter((r) => (r.data.input_ids as string[]).includes(id)).length <= 1);
    }
    await after.close();
  } finally {
    await daemon.stop();
    await fake.close();
  }
});

Deno.test("the v2 socket refuses a non-loopback Origin and a native client without the token", async () => {
  const daemon = await startTestDaemon();
  try {
    // A page on another origin must never reach the owner's agent: refused before upgrade.
    const refused = await fetch(`${daemon.url}/v2`, {
      headers: { origin: "https://evil.example", upgrade: "websocket", connection: "Upgrade" },
    });
    assert.equal(refused.status, 403);
    await refused.body?.cancel();
    // A native client (no Origin) must show the token.
    const anonymous = await connectLane({ port: daemon.port });
    const error = anonymous.messages.find((m) => m.kind === "error");
    assert.equal(error?.kind === "error" && error.code, "token_missing");
    await anonymous.closed;
    const wrong = await connectLane({ port: daemon.port, token: "0".repeat(64) });
    const wrongError = wrong.messages.find((m) => m.kind === "error");
    assert.equal(wrongError?.kind === "error" && wrongError.code, "token_wrong");
    await wrong.closed;
    assert.match(
      daemon.logs(),
      /refused operator access: cannot authorise: the operator token is wrong/,
    );
  } finally {
    await daemon.stop();
  }
});

Deno.test("serve starts the daemon under derived permissions and forwards SIGTERM, which drains a running cell", async () => {
  const fake = startFakeOpenAI({ fallback: () => WAIT_CELL });
  fake.enqueue({
    toolCall: {
      code:
        "import asyncio, os\nwhile not os.path.exists('finish'):\n    await asyncio.sleep(0.02)\nwait()",
    },
  });
  const daemon = await startTestDaemon({ via: "launcher", modelUrl: fake.url });
  try {
    const health = await (await fetch(`${daemon.url}/health`)).json();
    assert.equal(health.ok, true);
    const client = await connectLane({ port: daemon.port, token: daemon.token });
    await client.request({ kind: "input", client_msg_id: "t1", text: "hold on" });
    await waitRecord(client, "cell.started");
    const stopped = daemon.stop();
    // The signal reached the daemon through the launcher; the running cell may still finish.
    await waitRecord(client, "daemon.stopping");
    await Deno.writeTextFile(`${daemon.workspace}/finish`, "");
    const finished = await waitRecord(client, "cell.finished");
    assert.equal(finished.data.outcome, "ok");
    assert.equal(await stopped, 0);
    assert.match(daemon.logs(), /SIGTERM: draining/);
    assert.equal(records(client, "daemon.stopping")[0].data.reason, "daemon shutdown (SIGTERM)");
  } finally {
    await daemon.stop();
    await fake.close();
  }
});

Deno.test("with KLBR_RUN_PROGRAMS, workspace.run starts listed programs only", async () => {
  await withModelDaemon({ env: { KLBR_RUN_PROGRAMS: "echo" } }, async ({ fake, daemon }) => {
    fake.enqueue({
      toolCall: {
        code: [
          "r = await run(['echo', 'allowed'])",
          "print(r.stdout.decode().strip())",
          "try:",
          "    await run(['sh', '-c', 'true'])",
          "except Exception as e:",
          "    print('refused:', e)",
          "wait()",
        ].join("\n"),
      },
    });
    const client = await connectLane({ port: daemon.port, token: daemon.token });
    await client.request({ kind: "input", client_msg_id: "r1", text: "run things" });
    const finished = await waitRecord(client, "cell.finished");
    const stdout = (finished.data.result as { stdout: string }).stdout;
    assert.match(stdout, /^allowed\n/);
    assert.match(stdout, /refused: .*cannot run: the host may not start this program \(got "sh"\)/);
    await client.close();
  });
});

Deno.test("a turn killed before any cell ran gives its input back to a new frame at restart", async () => {
  const fake = startFakeOpenAI({ fallback: () => WAIT_CELL });
  // The model stalls mid-stream: the frame is accepted, no cell has run.
  fake.enqueue({ text: "thinking", stall: true });
  let daemon = await startTestDaemon({ modelUrl: fake.url });
  try {
    const client = await connectLane({ port: daemon.port, token: daemon.token });
    const ack = await client.request({ kind: "input", client_msg_id: "s1", text: "hello" });
    const inputId = (ack as { input_id: string }).input_id;
    const accepted = await waitRecord(client, "frame.accepted");
    await fake.waitForRequests(1);
    await daemon.kill();
    await client.closed;

    daemon = await daemon.restart();
    const after = await connectLane({ port: daemon.port, token: daemon.token });
    const recovery = await waitRecord(after, "recovery");
    assert.deepEqual(recovery.data.abandoned_frames, [accepted.data.frame_id]);
    assert.deepEqual(recovery.data.resumed_frames, []);
    const again = await waitRecord(after, "frame.accepted", (r) => r.seq > recovery.seq);
    assert.deepEqual(again.data.input_ids, [inputId]);
    await waitRecord(after, "frame.finished", (r) => r.data.frame_id === again.data.frame_id);
    await after.close();
  } finally {
    await daemon.stop();
    await fake.close();
  }
});

Deno.test("a failing attention.plan keeps inputs pending, health says degraded, activate repairs it", async () => {
  const fake = startFakeOpenAI({ fallback: () => WAIT_CELL });
  let daemon = await startTestDaemon({ modelUrl: fake.url });
  try {
    const first = await connectLane({ port: daemon.port, token: daemon.token });
    const good = String((await waitRecord(first, "activation")).data.release_id);
    await first.close();
    await daemon.stop();
    await activateVariant(daemon.stateDir, {
      "attention.py": "def plan(inputs, session):\n    raise RuntimeError('broken policy')\n",
    });
    daemon = await daemon.restart();

    const client = await connectLane({ port: daemon.port, token: daemon.token });
    await client.request({ kind: "input", client_msg_id: "h1", text: "are you there?" });
    const failed = await waitRecord(client, "hook.failed");
    assert.match(String(failed.data.error), /broken policy/);
    const health = await (await fetch(`${daemon.url}/health`)).json();
    assert.equal(health.ok, true, "admission still works");
    assert.equal(health.status, "degraded");
    assert.equal(health.pending_inputs, 1);
    assert.equal(health.hook_backlog, 1);
    assert.match(String(health.last_hook_failure), /broken policy/);
    assert.equal(records(client, "frame.accepted").length, 0);

    // The operator repairs it without the model: activate the good release at the current epoch.
    const status = await client.request({ kind: "op.status" });
    const epoch =
      ((status as Extract<ServerMessage, { kind: "op.result" }>).result.sessions as Record<
        string,
        { behavior_epoch: number }
      >).default.behavior_epoch;
    // A stale epoch and a release that does not exist are refused, and change nothing.
    const stale = await client.request({
      kind: "op.activate",
      session: "default",
      epoch: epoch - 1,
      release: `${daemon.stateDir}/releases/${good}`,
    });
    assert.equal(stale.kind === "error" && stale.code, "epoch_moved");
    assert.equal(
      stale.kind === "error" && stale.message,
      `cannot activate release ${good.slice(0, 12)}: epoch moved (expected ${
        epoch - 1
      }, found ${epoch})`,
    );
    const missing = await client.request({
      kind: "op.activate",
      session: "default",
      epoch,
      release: `${daemon.stateDir}/releases/${"0".repeat(64)}`,
    });
    assert.equal(missing.kind === "error" && missing.code, "release_invalid");
    const activated = await client.request({
      kind: "op.activate",
      session: "default",
      epoch,
      release: `${daemon.stateDir}/releases/${good}`,
    }, 30_000);
    assert.equal(activated.kind, "op.result");
    const frame = await waitRecord(client, "frame.accepted");
    assert.equal((frame.data.input_ids as string[]).length, 1);
    await client.close();
  } finally {
    await daemon.stop();
    await fake.close();
  }
});

Deno.test("inputs sent together commit together; a refused one is answered alone", async () => {
  const daemon = await startTestDaemon();
  try {
    const client = await connectLane({ port: daemon.port, token: daemon.token });
    // Sent back to back, these reach the daemon together and share one commit.
    for (let i = 0; i < 30; i++) {
      const id = i === 7 ? "bad\u0001id" : `g${i}`;
      client.send({ kind: "input", request: `g${i}`, client_msg_id: id, text: `n${i}` });
    }
    await client.waitFor((m) => "request" in m && m.request === "g29");
    const replies = client.messages.filter((m) =>
      "request" in m && String(m.request).startsWith("g")
    );
    assert.equal(replies.length, 30);
    const refused = replies.filter((m) => m.kind === "error");
    assert.equal(refused.length, 1);
    assert.equal(refused[0].kind === "error" && refused[0].request, "g7");
    assert.equal(refused[0].kind === "error" && refused[0].code, "invalid_input");
    // Acks come in request order, and every acked input is in the log exactly once.
    const acks = replies.filter((m): m is Extract<ServerMessage, { kind: "ack" }> =>
      m.kind === "ack"
    );
    assert.deepEqual(
      acks.map((a) => a.request),
      Array.from({ length: 30 }, (_, i) => `g${i}`).filter((r) => r !== "g7"),
    );
    await client.waitFor((m) => m.kind === "record" && m.seq === acks.at(-1)!.seq);
    const admitted = records(client, "input.admitted").map((r) => r.data.input_id);
    for (const ack of acks) assert.equal(admitted.filter((id) => id === ack.input_id).length, 1);
    await client.close();
  } finally {
    await daemon.stop();
  }
});

Deno.test("the agent edits, tests and activates a hook from a cell; the heap lives on; rollback works", async () => {
  await withModelDaemon({}, async ({ fake, daemon }) => {
    const newContext = [
      "def prepare(messages, **context):",
      "    return messages + [{'role': 'user', 'content': '[policy v2]'}]",
      "",
    ].join("\\n");
    fake.enqueue({
      toolCall: {
        code: [
          "alive = {'n': 1}",
          "d = await behavior.draft()",
          "print(sorted(await d.files()))",
          `await d.write('context.py', "${newContext}")`,
          "print('test', (await d.test()).ok)",
          "print('epoch', await d.activate())",
          "bad = await behavior.draft()",
          "await bad.write('turn.py', 'def next(**context):\\n    return 42\\n')",
          "print('bad', (await bad.test()).ok)",
          "try:",
          "    await bad.publish()",
          "except Exception as e:",
          "    print('refused', e)",
          "wait()",
        ].join("\n"),
      },
    });
    const client = await connectLane({ port: daemon.port, token: daemon.token });
    await client.request({ kind: "input", client_msg_id: "b1", text: "improve yourself" });
    const first = await waitRecord(client, "cell.finished");
    const out1 = (first.data.result as { stdout: string; stderr: string }).stdout;
    assert.match(out1, /\['attention\.py', 'context\.py', 'model\.py', 'turn\.py'\]/);
    assert.match(out1, /^test True$/m);
    assert.match(out1, /^epoch 2$/m);
    assert.match(out1, /^bad False$/m);
    assert.match(
      out1,
      /^refused .*cannot publish draft dr_\w+: its hooks failed the host's test \(turn\.next: turn\.next returned/m,
    );
    const activation = await waitRecord(
      client,
      "activation",
      (r) => r.data.reason === "agent activate",
    );
    const v2 = String(activation.data.release_id);
    await waitRecord(client, "frame.finished");

    // The next turn runs the new hook and the same heap.
    fake.enqueue({ toolCall: { code: "print(alive['n'])\nwait()" } });
    await client.request({ kind: "input", client_msg_id: "b2", text: "again" });
    const second = await waitRecord(client, "cell.finished", (r) => r.seq > first.seq);
    assert.equal((second.data.result as { stdout: string }).stdout, "1\n");
    const chat = fake.requests.filter((r) => r.method === "POST");
    assert.equal(chat.at(-1)!.body.messages.at(-1).content, "[policy v2]");
    // A whole turn ran on v2 with every hook answering: it is now the last good release.
    await waitRecord(client, "release.last_good", (r) => r.data.release_id === v2);

    // Activate a third release, then roll back to the last good one, all from a cell.
    fake.enqueue({
      toolCall: {
        code: [
          "d3 = await behavior.draft()",
          "await d3.write('model.py', (await d3.read('model.py')) + '\\n# v3\\n')",
          "print('v3 epoch', await d3.activate())",
          "print('rolled back to', await behavior.rollback())",
          "print((await behavior.status())['release_id'])",
          "wait()",
        ].join("\n"),
      },
    });
    await client.request({ kind: "input", client_msg_id: "b3", text: "and back" });
    const third = await waitRecord(client, "cell.finished", (r) => r.seq > second.seq);
    const out3 = (third.data.result as { stdout: string }).stdout;
    assert.match(out3, /^v3 epoch 3$/m);
    assert.match(out3, /^rolled back to 4$/m);
    assert.match(out3, new RegExp(`^${v2}$`, "m"));
    await client.close();
  });
});

Deno.test("long cell output is spooled whole to an artifact; records and the model get an excerpt", async () => {
  await withModelDaemon({}, async ({ fake, daemon }) => {
    fake.enqueue({ toolCall: { code: "print('x' * 50_000 + 'END')" } }, {
      // The next cell reads the spooled bytes back by their content address.
      toolCall: {
        code: [
          "import hashlib",
          "aid = hashlib.sha256(('x' * 50_000 + 'END\\n').encode()).hexdigest()",
          "print(await read_artifact(aid, offset=49_998))",
          "wait()",
        ].join("\n"),
      },
    });
    const client = await connectLane({ port: daemon.port, token: daemon.token });
    await client.request({ kind: "input", client_msg_id: "long", text: "print a lot" });
    const finished = await waitRecord(client, "cell.finished");
    const result = finished.data.result as {
      stdout: string;
      stdout_artifact: { id: string; bytes: number };
    };
    assert.equal(result.stdout_artifact.bytes, 50_004);
    assert.ok(
      result.stdout.length < 7_000,
      `the record keeps an excerpt (${result.stdout.length})`,
    );
    assert.match(result.stdout, new RegExp(`50004 bytes in artifact ${result.stdout_artifact.id}`));
    assert.ok(result.stdout.endsWith("END\n"), "the tail is kept");
    const whole = await Deno.readTextFile(
      `${daemon.stateDir}/artifacts/${result.stdout_artifact.id}`,
    );
    assert.equal(whole, "x".repeat(50_000) + "END\n");
    await fake.waitForRequests(2);
    const tool = fake.requests.filter((r) => r.method === "POST")[1].body.messages.at(-1);
    assert.equal(tool.role, "tool");
    assert.match(tool.content, /whole output is 50004 bytes in artifact/);
    const reread = await waitRecord(client, "cell.finished", (r) => r.seq > finished.seq);
    assert.equal((reread.data.result as { stdout: string }).stdout, "b'xxEND\\n'\n");
    await client.close();
  });
});

Deno.test("a cell that outruns KLBR_CELL_TIMEOUT_MS ends timed_out and the turn goes on", async () => {
  await withModelDaemon({ env: { KLBR_CELL_TIMEOUT_MS: "1000" } }, async ({ fake, daemon }) => {
    fake.enqueue({ toolCall: { code: "import time\ntime.sleep(10**6)" } });
    const client = await connectLane({ port: daemon.port, token: daemon.token });
    await client.request({ kind: "input", client_msg_id: "slow", text: "block" });
    const finished = await waitRecord(client, "cell.finished");
    assert.equal(finished.data.outcome, "timed_out");
    // The model hears the outcome and the turn ends normally on its next cell.
    const ended = await waitRecord(client, "turn.ended");
    assert.equal(ended.data.reason, "wait");
    const tool = fake.requests.filter((r) => r.method === "POST")[1].body.messages.at(-1);
    assert.match(tool.content, /^outcome: timed_out/);
    await client.close();
  });
});

Deno.test("serve refuses a malformed KLBR_CELL_TIMEOUT_MS before it listens", async () => {
  const state = await tempDir();
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", ...serveFlags(), `${REPO_ROOT}/main.ts`, "serve", "--state", state],
    env: { KLBR_CELL_TIMEOUT_MS: "soon" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(out.code, 1);
  assert.match(
    new TextDecoder().decode(out.stderr),
    /cannot serve: KLBR_CELL_TIMEOUT_MS must be a whole number of milliseconds from 1000 to 86400000 \(got soon\)/,
  );
});

Deno.test("serve refuses a KLBR_DRAIN_GRACE_MS longer than one host timer waits, which would stop the turn at once", async () => {
  const stateDir = await tempDir();
  // A timer past 2^31 - 1 ms fires at once: SIGTERM would stop the running turn at once
  // instead of letting it finish within the grace.
  await assert.rejects(
    readServeSettings({ stateDir, port: 0 }, { KLBR_DRAIN_GRACE_MS: "2147483648" }),
    (error: unknown) => {
      assert.ok(error instanceof KlbrError, String(error));
      assert.equal(error.code, "invalid_config");
      assert.equal(
        error.message,
        "cannot serve: KLBR_DRAIN_GRACE_MS must be a whole number of milliseconds from 100 to 2147483647 (got 2147483648)",
      );
      return true;
    },
  );
  const longest = await readServeSettings({ stateDir, port: 0 }, {
    KLBR_DRAIN_GRACE_MS: "2147483647",
  });
  assert.equal(longest.drainGraceMs, 2 ** 31 - 1);
});

Deno.test("compact replaces old turns with a summary in the next request, without the model", async () => {
  await withModelDaemon({}, async ({ fake, daemon }) => {
    const client = await connectLane({ port: daemon.port, token: daemon.token });
    // Eight short turns, each with a draft and one sent message: over the 20 items compact keeps.
    for (let n = 1; n <= 8; n++) {
      fake.enqueue({
        text: `draft ${n}`,
        toolCall: { code: `await local.send('reply ${n}')\nwait()` },
      });
      await client.request({ kind: "input", client_msg_id: `c${n}`, text: `question ${n}` });
      await waitRecord(client, "turn.ended", () => records(client, "turn.ended").length >= n);
    }
    const before = fake.requests.filter((r) => r.method === "POST").length;
    const result = await client.request({ kind: "op.compact", session: "default" });
    assert.equal(result.kind, "op.result");
    const compacted = (result as Extract<ServerMessage, { kind: "op.result" }>).result;
    assert.equal(compacted.compacted, true);
    assert.equal(compacted.epoch, 1);
    // No model request was made to compact.
    assert.equal(fake.requests.filter((r) => r.method === "POST").length, before);

    fake.enqueue({ toolCall: { code: "wait()" } });
    await client.request({ kind: "input", client_msg_id: "c9", text: "question 9" });
    const frame = await waitRecord(
      client,
      "frame.accepted",
      (r) => (r.data.input_ids as string[]).length === 1 && r.data.number === 9,
    );
    assert.equal(frame.data.context_epoch, 1, "the frame records the new context epoch");
    await waitRecord(client, "turn.ended", () => records(client, "turn.ended").length >= 9);
    const last = fake.requests.filter((r) => r.method === "POST").at(-1)!;
    const messages = last.body.messages as { role: string; content: string | null }[];
    const summary = messages[1].content!;
    assert.match(summary, /^\[runtime\] \[summary of \d+ earlier items/);
    // Sent messages and drafts stay apart in the summary.
    assert.match(
      summary,
      /Messages you sent \(these reached the conversation\):\n- to local:default: reply 1 \(delivered\)/,
    );
    assert.match(summary, /Your scratchpad notes \(never delivered to anyone\):\n- draft 1/);
    // The covered turn (the first; compact keeps the last 20 items whole) is not sent whole any
    // more; the later ones are.
    const whole = messages.slice(2).map((m) => m.content ?? "");
    assert.equal(whole.filter((c) => c.endsWith("\nquestion 1")).length, 0);
    assert.equal(whole.filter((c) => c.endsWith("\nquestion 2")).length, 1);
    assert.ok(messages.some((m) => m.content?.includes("question 9")));
    await client.close();
  });
});
