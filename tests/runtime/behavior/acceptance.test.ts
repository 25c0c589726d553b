// The seed's acceptance of revision editing, end to end against the real daemon: the agent
// edits a hook through the SDK, tests and activates it, keeps a live workbench object and
// sees the new behaviour in the next cell; a bad candidate and a broken active revision are
// repaired from the operator path without the model, and their diagnostics are readable
// afterwards, also after a restart.

import assert from "node:assert/strict";
import { startFakeOpenAI } from "../../fakes/openai_server.ts";
import { startTestDaemon } from "../../_helpers/daemon.ts";
import { connectLane } from "../../_helpers/lane_client.ts";
import { type Json, klbr, records, stdoutOf, waitRecord } from "./_support.ts";

const EDIT = [
  "alive = {'n': 1}",
  "d = await behavior.draft()",
  "def prepare(messages, **context):",
  "    return messages + [{'role': 'user', 'content': '[edited through the SDK]'}]",
  "print('bound', await hooks.bind('context.prepare', prepare, draft=d))",
  // Replay this turn's own context.prepare input on the draft.
  "mine = [t for t in await hooks.trace() if t['hook'] == 'context.prepare'][-1]",
  "r = await hooks.test('context.prepare', mine, draft=d)",
  "print('replayed', r.ok, r.output[-1]['content'])",
  "print('test', (await d.test()).ok)",
  "print('epoch', await d.activate())",
  "wait()",
].join("\n");

const NEXT_CELL = [
  "r = await hooks.test('context.prepare', {'messages': [{'role': 'user', 'content': 'x'}]})",
  "print(alive['n'], r.release == (await hooks.release())['release_id'], r.output[-1]['content'])",
  "wait()",
].join("\n");

const BREAK = [
  "bad = await behavior.draft()",
  "await bad.write('turn.py', 'def next(**context):\\n    return 42\\n')",
  "try:",
  "    await bad.publish()",
  "except Exception as e:",
  "    print('refused', e)",
  "broken = await behavior.draft()",
  "await broken.write('attention.py', '''def plan(inputs, session):",
  "    if any('boom' in str(i.get('body')) for i in inputs):",
  "        raise RuntimeError('cannot plan boom')",
  "    return {'consume': [i['id'] for i in inputs], 'routing': {}}",
  "''')",
  "print('broken epoch', await broken.activate())",
  "wait()",
].join("\n");

Deno.test("acceptance: an SDK edit is tested, activated and seen in the next cell; bad candidates and a broken release are repaired without the model", async () => {
  const fake = startFakeOpenAI({ fallback: () => ({ toolCall: { code: "wait()" } }) });
  let daemon = await startTestDaemon({ modelUrl: fake.url });
  try {
    fake.enqueue({ toolCall: { code: EDIT } }, { toolCall: { code: NEXT_CELL } }, {
      toolCall: { code: BREAK },
    });
    const client = await connectLane({ port: daemon.port, token: daemon.token });
    const v1 = String((await waitRecord(client, "activation")).data.release_id);
    await client.request({ kind: "input", client_msg_id: "a1", text: "edit your context hook" });
    const edit = await waitRecord(client, "cell.finished");
    assert.match(stdoutOf(edit), /^bound bound\/context_prepare\.py:prepare$/m);
    assert.match(stdoutOf(edit), /^replayed True \[edited through the SDK\]$/m);
    assert.match(stdoutOf(edit), /^test True$/m);
    assert.match(stdoutOf(edit), /^epoch 2$/m);
    const v2 = String(
      (await waitRecord(client, "activation", (r) => r.data.epoch === 2)).data
        .release_id,
    );
    await waitRecord(client, "frame.finished", (r) => r.seq > edit.seq);

    // The next cell sees the new behaviour, in the same heap; so does the next request.
    await client.request({ kind: "input", client_msg_id: "a2", text: "again" });
    const next = await waitRecord(client, "cell.finished", (r) => r.seq > edit.seq);
    assert.equal(stdoutOf(next), "1 True [edited through the SDK]\n");
    const chat = fake.requests.filter((r) => r.method === "POST");
    assert.equal(chat.at(-1)!.body.messages.at(-1).content, "[edited through the SDK]");
    await waitRecord(client, "release.last_good", (r) => r.data.release_id === v2);

    // A bad candidate is refused with kept diagnostics; a broken one passes the fixture test
    // and is activated, then fails on a real input.
    await client.request({ kind: "input", client_msg_id: "a3", text: "now break yourself" });
    const broke = await waitRecord(client, "cell.finished", (r) => r.seq > next.seq);
    assert.match(stdoutOf(broke), /^refused .*turn\.next returned .*diagnostics kept as cd_\w+/m);
    assert.match(stdoutOf(broke), /^broken epoch 3$/m);
    const broken = String(
      (await waitRecord(client, "activation", (r) => r.data.epoch === 3)).data
        .release_id,
    );
    await waitRecord(client, "frame.finished", (r) => r.seq > broke.seq);
    await client.request({ kind: "input", client_msg_id: "a4", text: "boom" });
    const failed = await waitRecord(client, "hook.failed", (r) => r.seq > broke.seq);
    assert.equal(failed.data.revision, broken);
    const requestsBefore = fake.requests.filter((r) => r.method === "POST").length;

    // The operator path, without the model: read why, then roll back.
    const candidates = await klbr(daemon, ["candidates", "default"]);
    assert.equal(candidates.code, 0, candidates.stderr);
    const bad: Json = candidates.json.candidates[0];
    assert.deepEqual([bad.action, bad.failing], ["publish", ["turn.next"]]);
    const check = bad.checks.find((c: Json) => c.hook === "turn.next");
    assert.deepEqual(check.fixture, {
      session: { id: "fixture" },
      consumed_local: true,
      replied_with_text: true,
      sent: 0,
      reminders: 0,
    });
    assert.equal(
      check.error.message,
      "turn.next returned (root): Invalid input: expected object, received number (got 42)",
    );
    const trace = await klbr(daemon, ["trace", "default", String(failed.data.trace_id)]);
    assert.equal(trace.code, 0, trace.stderr);
    assert.equal(trace.json.trace.hook, "attention.plan");
    assert.equal(trace.json.trace.release_id, broken);
    assert.match(trace.json.trace.error.traceback, /RuntimeError\('cannot plan boom'\)/);
    assert.equal(trace.json.trace.inputs.inputs[0].body, "boom");
    const rollback = await klbr(daemon, ["rollback", "default"]);
    assert.equal(rollback.code, 0, rollback.stderr);
    assert.deepEqual([rollback.json.release_id, rollback.json.previous_release], [v2, broken]);
    assert.equal(
      fake.requests.filter((r) => r.method === "POST").length,
      requestsBefore,
      "the repair asked the model nothing",
    );
    const boom = await waitRecord(
      client,
      "frame.accepted",
      (r) => r.seq > failed.seq && r.data.policy_revision === v2,
    );
    assert.equal((boom.data.input_ids as string[]).length, 1);
    await waitRecord(client, "frame.finished", (r) => r.seq > boom.seq);
    assert.ok(records(client, "hook.failed").every((r) => r.data.revision === broken));
    await client.close();

    // After a restart the diagnostics are still there.
    await daemon.stop();
    daemon = await daemon.restart();
    const after = await klbr(daemon, ["candidates", "default"]);
    assert.deepEqual(
      after.json.candidates.map((c: Json) => c.id),
      candidates.json.candidates.map((c: Json) => c.id),
    );
    const again = await klbr(daemon, ["trace", "default", String(failed.data.trace_id)]);
    assert.deepEqual(again.json.trace, trace.json.trace);
    const status = await klbr(daemon, ["status", "default"]);
    assert.equal(status.json.sessions.default.active_release, v2);
    assert.notEqual(v1, v2);
  } finally {
    await daemon.stop();
    await fake.close();
    await Deno.remove(daemon.stateDir, { recursive: true }).catch(() => {});
    await Deno.remove(daemon.workspace, { recursive: true }).catch(() => {});
  }
});
