// The host side of behaviour editing against a real store, real releases and a real Python
// worker for the trusted test; no daemon.

import assert from "node:assert/strict";
import { join } from "node:path";
import { rejects, withEditor } from "./_editor.ts";
import { connectLane } from "../../_helpers/lane_client.ts";
import { stdoutOf, waitRecord, withModelDaemon } from "./_support.ts";

Deno.test("`behaviorHandlers()` keeps draft paths inside the draft", async () => {
  await withEditor(async (call) => {
    const { draft_id } = await call("behavior.draft");
    for (const path of ["../escape.py", "/etc/passwd", ".hidden.py", "sub/../../x.py"]) {
      await rejects(
        call("behavior.write", { draft_id, path, text: "x" }),
        "path_escape",
        `cannot use draft path: it must be relative, inside the draft, without dot segments (got ${path})`,
      );
    }
    await rejects(
      call("behavior.read", { draft_id, path: "missing.py" }),
      "not_found",
      `cannot read missing.py: no such file in draft ${draft_id}`,
    );
    await call("behavior.write", { draft_id, path: "lib/helper.py", text: "X = 1\n" });
    assert.deepEqual(
      (await call("behavior.files", { draft_id })).files,
      ["attention.py", "context.py", "lib/helper.py", "model.py", "turn.py"],
    );
    await rejects(
      call("behavior.files", { draft_id: "dr_00000000000000000000000000" }),
      "not_found",
      "cannot use draft dr_00000000000000000000000000: it does not exist",
    );
    await rejects(
      call("behavior.files", { draft_id: "nope" }),
      "invalid_input",
      /draft_id: expected a draft id/,
    );
  });
});

Deno.test("`behaviorHandlers()` tests every hook itself and refuses to publish a failing draft", async () => {
  await withEditor(async (call) => {
    const { draft_id } = await call("behavior.draft");
    const good = await call("behavior.test", { draft_id });
    assert.equal(good.ok, true);
    assert.deepEqual(good.checks.map((c: { hook: string }) => c.hook), [
      "attention.plan",
      "model.plan",
      "context.prepare",
      "turn.next",
    ]);
    await call("behavior.write", {
      draft_id,
      path: "model.py",
      text: "def plan(**context):\n    raise RuntimeError('no')\n",
    });
    await call("behavior.write", {
      draft_id,
      path: "attention.py",
      // Claims success in a form the contract does not accept.
      text: "TESTED = True\ndef plan(inputs, session):\n    return {'consume': 'all'}\n",
    });
    const bad = await call("behavior.test", { draft_id });
    assert.equal(bad.ok, false);
    const failing = bad.checks.filter((c: { ok: boolean }) => !c.ok).map((c: { hook: string }) =>
      c.hook
    );
    assert.deepEqual(failing, ["attention.plan", "model.plan"]);
    await rejects(
      call("behavior.publish", { draft_id }),
      "release_invalid",
      new RegExp(
        `^cannot publish draft ${draft_id}: its hooks failed the host's test \\(attention\\.plan: `,
      ),
    );
  });
});

Deno.test("`behaviorHandlers()` activates by epoch and rolls back to the last good release", async () => {
  await withEditor(async (call) => {
    await rejects(
      call("behavior.rollback"),
      "not_found",
      /^cannot roll back: the active release is the last good one/,
    );
    const status = await call("behavior.status");
    assert.equal(status.epoch, 1);
    const { draft_id, base_epoch } = await call("behavior.draft");
    await call("behavior.write", { draft_id, path: "notes.md", text: "v2\n" });
    const { release_id } = await call("behavior.publish", { draft_id });
    await rejects(
      call("behavior.activate", { release_id, expected_epoch: base_epoch - 1 }),
      "epoch_moved",
      `cannot activate release ${release_id.slice(0, 12)}: epoch moved (expected 0, found 1)`,
    );
    assert.equal(
      (await call("behavior.activate", { release_id, expected_epoch: base_epoch })).epoch,
      2,
    );
    const back = await call("behavior.rollback");
    assert.deepEqual(back, { epoch: 3, release_id: status.release_id });
  });
});

Deno.test("`behavior.publish` refuses a draft that changed while it was tested and publishes nothing", async () => {
  await withEditor(async (call, store) => {
    const { draft_id } = await call("behavior.draft");
    // The hook changes its own draft while the host tests it, as a write from another cell or
    // job during the test would (no sandbox here makes the draft read-only to the hook).
    await call("behavior.write", {
      draft_id,
      path: "model.py",
      text: [
        "from pathlib import Path",
        "def plan(**context):",
        "    Path(__file__).with_name('late.py').write_text('X = 1\\n')",
        "    return {'route': 'main'}",
        "",
      ].join("\n"),
    });
    const releasesDir = join(store.stateDir, "releases");
    const before = [...Deno.readDirSync(releasesDir)].map((e) => e.name);
    await rejects(
      call("behavior.publish", { draft_id }),
      "release_invalid",
      /changed after it was tested \(tested [0-9a-f]{12}, now [0-9a-f]{12}\); test it again/,
    );
    assert.deepEqual([...Deno.readDirSync(releasesDir)].map((e) => e.name), before);
    const { n } = store.statement("SELECT count(*) AS n FROM releases").get() as { n: number };
    assert.equal(n, 1, "only the base release is recorded");
  });
});

Deno.test("`behavior.test` calls turn.next with the arguments a turn gives it: one written for them passes, one that takes only session fails", async () => {
  await withEditor(async (call) => {
    const { draft_id } = await call("behavior.draft");
    const turnNext = async (text: string) => {
      await call("behavior.write", { draft_id, path: "turn.py", text });
      const report = await call("behavior.test", { draft_id });
      return report.checks.find((c: { hook: string }) => c.hook === "turn.next");
    };
    // Written to turn.py's contract: the host calls next(**args) with these keyword arguments.
    const exact = await turnNext(
      "def next(session, consumed_local, replied_with_text, sent, reminders):\n" +
        "    return {'action': 'wait'}\n",
    );
    assert.equal(exact.ok, true, exact.detail);
    // A turn would call this one with arguments it does not take, and it would fail every turn.
    const narrow = await turnNext("def next(session):\n    return {'action': 'wait'}\n");
    assert.equal(narrow.ok, false, "the host's test calls it as a turn does");
    assert.match(narrow.detail, /unexpected keyword argument/);
  });
});

// A cell that publishes, then binds a hook (which writes the draft), then activates: before the
// fix `d.activate()` reused the release published before the bind, so the agent activated its
// old tree and believed its new binding live.
const BIND_AFTER_PUBLISH = [
  "d = await behavior.draft()",
  "before = await d.publish()",
  "def decide(**context):",
  "    return {'action': 'wait'}",
  "await d.bind('turn.next', decide)",
  "await d.activate()",
  "after = (await behavior.status())['release_id']",
  "print('bind', after != before, 'hooks.json' in await d.files())",
  "e = await behavior.draft()",
  "await e.publish()",
  "await hooks.bind('model.plan', 'model.py:plan')",
  "await e.activate()",
  "print('default draft', (await behavior.status())['release_id'] != after)",
  "wait()",
].join("\n");

Deno.test("`d.activate()` after a bind activates the bound tree, not the release published before it", async () => {
  await withModelDaemon(async ({ fake, daemon }) => {
    fake.enqueue({ toolCall: { code: BIND_AFTER_PUBLISH } });
    const client = await connectLane({ port: daemon.port, token: daemon.token });
    await client.request({ kind: "input", client_msg_id: "b1", text: "bind and activate" });
    const cell = await waitRecord(client, "cell.finished");
    assert.equal(cell.data.outcome, "ok", JSON.stringify(cell.data));
    assert.equal(stdoutOf(cell), "bind True True\ndefault draft True\n");
    await client.close();
  });
});
