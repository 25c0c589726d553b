// The contract message names the skills the generation offers with their revision, and a
// maintenance turn started with `klbr maintain` loads the `maintenance` skill by default.

import assert from "node:assert/strict";
import { join } from "node:path";
import { connectLane } from "../../_helpers/lane_client.ts";
import { REPO_ROOT } from "../../_helpers/daemon.ts";
import { klbr, waitRecord, withModelDaemon } from "./_support.ts";

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
        `\nskills (revision ${revision.slice(0, 12)}): ${ids.sort().join(", ")}; `,
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
