// Tests staged in a behaviour draft (`tests/test_*.py`) run in the host's test worker on
// `d.test()` and before `d.publish()`: a failing one blocks publication with its diagnostics,
// like a failing hook; a passing one lets it publish.

import assert from "node:assert/strict";
import { connectLane } from "../../_helpers/lane_client.ts";
import { type Call, withEditor } from "./_editor.ts";
import { type Json, stdoutOf, waitRecord, withModelDaemon } from "./_support.ts";

const FAILING = [
  "def test_waits():",
  "    print('asking turn.next')",
  "    assert hook('turn.next')() == {'action': 'continue'}, 'turn.next waits'",
  "",
].join("\n");
const PASSING = [
  "import turn",
  "",
  "def test_waits():",
  "    assert hook('turn.next')() == {'action': 'wait'}",
  "",
  "async def test_reminds_once():",
  "    assert turn.next(consumed_local=True, replied_with_text=True)['action'] == 'continue'",
  "",
].join("\n");

const CELL = [
  "d = await behavior.draft()",
  `await d.write("tests/test_turn.py", ${JSON.stringify(FAILING)})`,
  "report = await d.test()",
  "print(report.ok, [c['hook'] for c in report.checks if not c['ok']])",
  "try:",
  "    await d.publish()",
  "except Exception as e:",
  "    print('refused', e)",
  "check = [c for c in (await d.diagnostics())[0]['checks'] if not c['ok']][0]",
  "print(check['fixture']['output'], end='')",
  "print(check['error']['traceback'].splitlines()[-1])",
  `await d.write("tests/test_turn.py", ${JSON.stringify(PASSING)})`,
  "release = await d.publish()",
  "print('published', len(release), 'tests/test_turn.py' in await d.files())",
  "wait()",
].join("\n");

Deno.test("a draft whose test fails is refused by publish with the test's diagnostics; with the test fixed it publishes", async () => {
  await withModelDaemon(async ({ fake, daemon }) => {
    fake.enqueue({ toolCall: { code: CELL } });
    const client = await connectLane({ port: daemon.port, token: daemon.token });
    await client.request({ kind: "input", client_msg_id: "t1", text: "test your draft" });
    const cell = await waitRecord(client, "cell.finished");
    assert.equal(cell.data.outcome, "ok", JSON.stringify(cell.data));
    const lines = stdoutOf(cell).split("\n");
    assert.equal(lines[0], "False ['tests/test_turn.py::test_waits']");
    assert.match(
      lines[1],
      /^refused behavior\.publish failed \(release_invalid\): cannot publish draft dr_\w+: its tests failed the host's test \(tests\/test_turn\.py::test_waits: AssertionError: turn\.next waits\); diagnostics kept as cd_\w+$/,
    );
    assert.equal(lines[2], "asking turn.next");
    assert.equal(lines[3], "AssertionError: turn.next waits");
    assert.equal(lines[4], "published 64 True");
    const failed = await waitRecord(client, "candidate.failed", (r) => r.data.action === "publish");
    assert.deepEqual(failed.data.failing, [{
      hook: "tests/test_turn.py::test_waits",
      message: "tests/test_turn.py::test_waits failed: AssertionError: turn.next waits",
      trace_id: null,
    }]);
    await client.close();
  });
});

/** The `behavior.test` report of a fresh draft with `files` written into it. */
async function testWith(call: Call, files: Record<string, string>): Promise<Json> {
  const draft = await call("behavior.draft");
  for (const [path, text] of Object.entries(files)) {
    await call("behavior.write", { draft_id: draft.draft_id, path, text });
  }
  return await call("behavior.test", { draft_id: draft.draft_id });
}

Deno.test("`behavior.test` runs each draft test as a check after the hooks; a file that fails to import fails", async () => {
  await withEditor(async (call) => {
    const passing = await testWith(call, { "tests/test_turn.py": PASSING, "tests/cases.py": "" });
    assert.equal(passing.ok, true, JSON.stringify(passing));
    assert.deepEqual(passing.checks.map((c: Json) => [c.hook, c.ok]), [
      ["attention.plan", true],
      ["model.plan", true],
      ["context.prepare", true],
      ["turn.next", true],
      ["tests/test_turn.py::test_waits", true],
      ["tests/test_turn.py::test_reminds_once", true],
    ]);
    assert.match(passing.checks[4].detail, /^passed in \d+ ms$/);

    const broken = await testWith(call, { "tests/test_broken.py": "import no_such_module\n" });
    assert.equal(broken.ok, false);
    const check = broken.checks.at(-1);
    assert.equal(check.hook, "tests/test_broken.py");
    assert.equal(
      check.error.message,
      "tests/test_broken.py failed: ModuleNotFoundError: No module named 'no_such_module'",
    );
    assert.equal(check.error.code, "test_failed");
    assert.match(broken.candidate_id, /^cd_/);

    const none = await testWith(call, {});
    assert.equal(none.checks.length, 4, "a draft without tests has only the hooks' checks");
  });
});

Deno.test("`behavior.test` says a draft test ended its worker, not that the run took 60 s", async () => {
  await withEditor(async (call) => {
    const exits = "import os\n\ndef test_exits():\n    os._exit(3)\n";
    const report = await testWith(call, { "tests/test_exit.py": exits });
    assert.equal(report.ok, false);
    const check = report.checks.at(-1);
    assert.equal(check.hook, "tests");
    assert.match(check.detail, /^the draft's tests did not run to their end: /);
    assert.doesNotMatch(check.error.message, /within 60 s/, "no deadline passed");
  });
});
