// The contract message names the skills the generation offers with their revision, and a
// maintenance turn started with `klbr maintain` loads the `maintenance` skill by default.

import assert from "node:assert/strict";
import { join } from "node:path";
import { connectLane } from "../../_helpers/lane_client.ts";
import { REPO_ROOT, serveFlags } from "../../_helpers/daemon.ts";
import { klbr, opResult, waitRecord, withModelDaemon } from "./_support.ts";

Deno.test("the contract names the generation's skills; klbr maintain starts a turn that loads the maintenance skill", async () => {
  await withModelDaemon(async ({ fake, daemon }) => {
    const client = await connectLane({ port: daemon.port, token: daemon.token });
    await client.request({ kind: "input", client_msg_id: "m1", text: "hello" });
    const loaded = await waitRecord(client, "role.loaded", (r) => r.data.role === "workbench");
    const revision = String(loaded.data.skills_revision);
    const first = await waitRecord(client, "frame.finished");
    const system = (i: number) =>
      String(fake.requests.filter((r) => r.method === "POST")[i].body.messages[0].content);
    const ids = [];
    for await (const entry of Deno.readDir(join(REPO_ROOT, "skills"))) {
      if (entry.isDirectory) ids.push(entry.name);
    }
    assert.ok(ids.includes("maintenance"));
    assert.ok(
      system(0).includes(
        `\nSkills (revision ${revision.slice(0, 12)}): ${ids.sort().join(", ")}; `,
      ),
      system(0),
    );
    assert.doesNotMatch(system(0), /maintenance turn/);

    const maintain = await klbr(daemon, ["maintain", "default", "weekly", "check"]);
    assert.equal(maintain.code, 0, maintain.stderr);
    assert.match(maintain.json.input_id, /^in_/);
    const frame = await waitRecord(client, "frame.accepted", (r) => r.seq > first.seq);
    assert.deepEqual(frame.data.input_ids, [maintain.json.input_id]);
    const admitted = await waitRecord(client, "input.admitted", (r) => r.seq > first.seq);
    assert.deepEqual(
      [admitted.data.source_kind, admitted.data.conversation_id, admitted.data.author],
      ["system", "system:maintenance", "operator"],
    );
    await waitRecord(client, "frame.finished", (r) => r.seq > frame.seq);
    const body = await Deno.readTextFile(join(REPO_ROOT, "skills", "maintenance", "SKILL.md"));
    assert.match(system(1), /^This is a maintenance turn\. The `maintenance` skill is loaded/m);
    assert.ok(system(1).includes(body.trim()), "the skill's whole body is in the contract");
    const opening = fake.requests.filter((r) => r.method === "POST")[1].body.messages.at(-1);
    assert.match(
      opening.content,
      /from operator in system:maintenance\]\n\[maintenance\] weekly check$/,
    );

    // The next ordinary turn is not a maintenance turn.
    await client.request({ kind: "input", client_msg_id: "m2", text: "thanks" });
    await waitRecord(client, "frame.accepted", (r) => r.seq > frame.seq + 1 && r.data.number === 3);
    await waitRecord(client, "frame.finished", (r) => r.data.number === 3);
    assert.doesNotMatch(system(2), /maintenance turn/);
    await client.close();
  });
});

Deno.test("with KLBR_MAINTENANCE_INTERVAL_S a durable timer starts maintenance turns, and the next is armed after each", async () => {
  await withModelDaemon(async ({ fake, daemon }) => {
    const client = await connectLane({ port: daemon.port, token: daemon.token });
    const set = await waitRecord(client, "timer.set");
    assert.match(String(set.data.note), /^scheduled maintenance turn \(every 1 s\)$/);
    assert.deepEqual([set.data.cell_id, set.data.job_id], [null, null]);
    const fired = await waitRecord(
      client,
      "timer.fired",
      (r) => r.data.timer_id === set.data.timer_id,
    );
    const admitted = await waitRecord(client, "input.admitted", (r) => r.seq > set.seq);
    assert.deepEqual(
      [admitted.data.input_id, admitted.data.source_kind, admitted.data.conversation_id],
      [fired.data.input_id, "timer", "system:maintenance"],
    );
    const frame = await waitRecord(client, "frame.accepted", (r) => r.seq > admitted.seq);
    assert.deepEqual(frame.data.input_ids, [admitted.data.input_id]);
    const turnEnded = await waitRecord(
      client,
      "turn.ended",
      (r) => r.data.frame_id === frame.data.frame_id,
    );
    await waitRecord(client, "frame.finished", (r) => r.seq > frame.seq);
    const request = fake.requests.filter((r) => r.method === "POST")[0];
    assert.match(
      String(request.body.messages[0].content),
      /^This is a maintenance turn\. The `maintenance` skill is loaded/m,
    );
    // After the turn the next scheduled one is armed, once.
    const next = await waitRecord(client, "timer.set", (r) => r.seq > set.seq);
    assert.ok(next.seq > turnEnded.seq, "armed when the maintenance turn ended");
    assert.notEqual(next.data.timer_id, set.data.timer_id);
    const jobs = opResult(await client.request({ kind: "op.jobs", session: "default" }));
    assert.ok(jobs.pending_timers <= 1, "never two scheduled maintenance timers at once");
    await client.close();
  }, { env: { KLBR_MAINTENANCE_INTERVAL_S: "1" } });
});

Deno.test("serve refuses a malformed KLBR_MAINTENANCE_INTERVAL_S before it listens", async () => {
  const state = await Deno.makeTempDir();
  try {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", ...serveFlags(), `${REPO_ROOT}/main.ts`, "serve", "--state", state],
      env: { KLBR_MAINTENANCE_INTERVAL_S: "daily" },
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(out.code, 1);
    assert.match(
      new TextDecoder().decode(out.stderr),
      /cannot serve: KLBR_MAINTENANCE_INTERVAL_S must be a whole number of seconds from 0 \(none\) to 2592000 \(got daily\)/,
    );
  } finally {
    await Deno.remove(state, { recursive: true });
  }
});
