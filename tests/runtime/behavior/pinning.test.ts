// Pinning against the real daemon: an activation while a turn (and its cell) runs changes
// nothing in that turn — every hook call of it names the release its frame recorded — and
// applies from the next frame, with the workbench heap alive.

import assert from "node:assert/strict";
import { join } from "node:path";
import { connectLane } from "../../_helpers/lane_client.ts";
import { type Json, opResult, records, stdoutOf, waitRecord, withModelDaemon } from "./_support.ts";

const CONTEXT_V2 = "def prepare(messages, **context):\\n" +
  "    return messages + [{'role': 'user', 'content': '[policy v2]'}]\\n";

Deno.test("an activation during a running turn applies from the next frame; every hook call of a turn names its frame's release", async () => {
  await withModelDaemon(async ({ fake, daemon }) => {
    fake.enqueue(
      {
        toolCall: {
          code: [
            "alive = {'n': 1}",
            // A turn that spoke gets no reminder from turn.next when it ends in text.
            "await local.send('changing it')",
            "d = await behavior.draft()",
            `await d.write('context.py', "${CONTEXT_V2}")`,
            "print('v2', await d.publish())",
            "print('pinned', (await hooks.release())['release_id'])",
          ].join("\n"),
        },
      },
      {
        // This cell runs while the operator activates v2; it waits for the test's go file.
        toolCall: {
          code: [
            "import asyncio, os",
            "for _ in range(1200):",
            "    if os.path.exists('go'):",
            "        break",
            "    await asyncio.sleep(0.05)",
            "print('pinned', (await hooks.release())['release_id'])",
          ].join("\n"),
        },
      },
      { text: "done for now" },
      {
        toolCall: {
          code: "print(alive['n'])\nprint('pinned', (await hooks.release())['release_id'])\nwait()",
        },
      },
    );
    const client = await connectLane({ port: daemon.port, token: daemon.token });
    const v1 = String((await waitRecord(client, "activation")).data.release_id);
    await client.request({ kind: "input", client_msg_id: "p1", text: "change your context hook" });
    const frame1 = await waitRecord(client, "frame.accepted");
    assert.equal(frame1.data.policy_revision, v1);
    const cellA = await waitRecord(client, "cell.finished");
    const v2 = stdoutOf(cellA).match(/^v2 ([0-9a-f]{64})$/m)![1];
    assert.match(stdoutOf(cellA), new RegExp(`^pinned ${v1}$`, "m"));

    // While the second cell runs, the operator switches to v2.
    await waitRecord(client, "cell.started", (r) => r.seq > cellA.seq);
    const epoch = opResult(await client.request({ kind: "op.status" })).sessions.default
      .behavior_epoch;
    const activated = opResult(
      await client.request({
        kind: "op.activate",
        session: "default",
        epoch,
        release: join(daemon.stateDir, "releases", v2),
      }, 30_000),
    );
    assert.equal(activated.release_id, v2);
    await Deno.writeTextFile(join(daemon.workspace, "go"), "");
    const cellB = await waitRecord(client, "cell.finished", (r) => r.seq > cellA.seq);
    assert.match(
      stdoutOf(cellB),
      new RegExp(`^pinned ${v1}$`, "m"),
      "the running cell stays pinned",
    );
    const end1 = await waitRecord(client, "frame.finished");
    assert.equal(end1.data.frame_id, frame1.data.frame_id);

    // The next frame takes v2: its request carries the new context, and the heap is alive.
    await client.request({ kind: "input", client_msg_id: "p2", text: "again" });
    const frame2 = await waitRecord(client, "frame.accepted", (r) => r.seq > end1.seq);
    assert.equal(frame2.data.policy_revision, v2);
    const cellC = await waitRecord(client, "cell.finished", (r) => r.seq > end1.seq);
    assert.equal(stdoutOf(cellC), `1\npinned ${v2}\n`);
    const end2 = await waitRecord(client, "frame.finished", (r) => r.seq > cellC.seq);

    const chat = fake.requests.filter((r) => r.method === "POST");
    assert.equal(chat.length, 4);
    // The request after the activation, in the same turn, still went through v1's hook.
    const added = (i: number) =>
      chat[i].body.messages.filter((m: Json) => m.content === "[policy v2]").length;
    assert.equal(added(2), 0);
    assert.equal(chat[3].body.messages.at(-1).content, "[policy v2]");
    assert.equal(added(3), 1);

    // Every hook invocation of each turn names its frame's release, read over the operator path.
    const traces1: Json[] = opResult(
      await client.request({ kind: "op.trace", session: "default", target: frame1.data.frame_id }),
    ).traces;
    const traces2: Json[] = opResult(
      await client.request({ kind: "op.trace", session: "default", target: frame2.data.frame_id }),
    ).traces;
    assert.deepEqual(
      [...new Set(traces1.map((t) => t.hook))].sort(),
      ["attention.plan", "context.prepare", "model.plan", "turn.next"],
    );
    // Three model requests: three model.plan and three context.prepare calls, then turn.next.
    assert.deepEqual(traces1.filter((t) => t.hook === "context.prepare").length, 3);
    assert.deepEqual([...new Set(traces1.map((t) => t.release_id))], [v1]);
    assert.deepEqual([...new Set(traces2.map((t) => t.release_id))], [v2]);
    assert.ok(traces1.every((t) => t.error === null && t.frame_id === frame1.data.frame_id));
    assert.equal(traces1[0].hook, "attention.plan");
    assert.equal(traces1[0].id, frame1.data.attention_trace);
    // The frame records name the same traces.
    assert.deepEqual(end1.data.trace_ids, traces1.map((t) => t.id));
    assert.equal(end1.data.trace_count, traces1.length);
    assert.deepEqual(end2.data.trace_ids, traces2.map((t) => t.id));
    assert.equal(records(client, "hook.failed").length, 0);

    // Only the hook worker was replaced: one workbench generation, two hook workers.
    const loaded = records(client, "role.loaded").map((r) => [r.data.role, r.data.generation]);
    assert.deepEqual(loaded.filter(([role]) => role === "workbench"), [["workbench", 1]]);
    assert.deepEqual(loaded.filter(([role]) => role === "hooks"), [["hooks", 1], ["hooks", 2]]);
    const status = opResult(await client.request({ kind: "op.status" })).sessions.default;
    assert.equal(status.fingerprints.workbench.generation, 1);
    assert.equal(status.fingerprints.hooks.generation, 2);
    assert.equal(status.fingerprints.hooks.release, v2);
    await client.close();
  });
});

Deno.test("a job's workbench records what it loaded, and status shows it while the job runs", async () => {
  await withModelDaemon(async ({ fake, daemon }) => {
    const JOB = "import os, time\nfor _ in range(1200):\n    if os.path.exists('go'):\n" +
      "        break\n    time.sleep(0.05)\nprint('job done')";
    fake.enqueue({ toolCall: { code: `print(await jobs.start(${JSON.stringify(JOB)}))\nwait()` } });
    const client = await connectLane({ port: daemon.port, token: daemon.token });
    await client.request({ kind: "input", client_msg_id: "j1", text: "start a job" });
    const loaded = await waitRecord(client, "role.loaded", (r) => r.data.role === "job");
    const jobId = String(loaded.data.job_id);
    assert.match(jobId, /^job_/);
    const workbench = await waitRecord(client, "role.loaded", (r) => r.data.role === "workbench");
    assert.equal(loaded.data.package, workbench.data.package);
    const status = opResult(await client.request({ kind: "op.status" })).sessions.default;
    assert.deepEqual(
      status.fingerprints.jobs.map((f: Json) => [f.role, f.job_id, f.pid]),
      [["job", jobId, loaded.data.pid]],
    );
    await Deno.writeTextFile(join(daemon.workspace, "go"), "");
    await waitRecord(client, "job.state", (r) => r.data.job_id === jobId && r.data.to === "done");
    await client.close();
  });
});
