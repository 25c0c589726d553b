// End to end: the real daemon under the serve task's permissions, the real workbench and the
// fake model. The model's cell outlines a file, patches a function through `code`, and runs
// the project's test with `run`: the test fails before the patch and passes after it.

import assert from "node:assert/strict";
import { join } from "node:path";
import { startFakeOpenAI } from "../../fakes/openai_server.ts";
import { startTestDaemon } from "../../_helpers/daemon.ts";
import { connectLane } from "../../_helpers/lane_client.ts";
import type { LaneRecord } from "../../../runtime/core/mod.ts";

const CALC = [
  "def add(a, b):",
  "    return a - b",
  "",
  "",
  "def mul(a, b):",
  "    return a * b",
  "",
].join("\n");

const TEST = [
  "import unittest",
  "",
  "from calc import add",
  "",
  "",
  "class AddTest(unittest.TestCase):",
  "    def test_add(self):",
  "        self.assertEqual(add(2, 3), 5)",
  "",
].join("\n");

const CELL = [
  "o = await code.outline('calc.py')",
  "print([s.qualified_name for s in o.symbols])",
  "before = await run(('python3', '-m', 'unittest', '-q', 'test_calc'), timeout=120)",
  "print('before', before.exit_code)",
  "s = await code.symbol('calc.py', 'add')",
  "print('old', repr(await code.read(s)))",
  "done = await code.patch(s, 'def add(a, b):\\n    return a + b')",
  "print('new', repr(await code.read(done.range)))",
  "try:",
  "    await code.read(s)",
  "except code.StaleRange as e:",
  "    print('stale', e.current_hash == done.range.hash)",
  "try:",
  "    await code.patch(await code.symbol('calc.py', 'mul'), 'def mul(a, b):\\n    return a *')",
  "except code.PatchRefused as e:",
  "    print('refused', e.refusals[0]['errors_after'])",
  "after = await run(('python3', '-m', 'unittest', '-q', 'test_calc'), timeout=120)",
  "print('after', after.exit_code)",
  "wait()",
].join("\n");

Deno.test("a model's cell outlines a file, patches a function and runs its test", async () => {
  const fake = startFakeOpenAI({ fallback: () => ({ toolCall: { code: "wait()" } }) });
  const workspace = await Deno.makeTempDir({ prefix: "klbr-ws-" });
  await Deno.writeTextFile(join(workspace, "calc.py"), CALC);
  await Deno.writeTextFile(join(workspace, "test_calc.py"), TEST);
  const daemon = await startTestDaemon({ modelUrl: fake.url, workspace });
  try {
    fake.enqueue({ toolCall: { code: CELL } });
    const client = await connectLane({ port: daemon.port, token: daemon.token });
    await client.request({ kind: "input", client_msg_id: "c1", text: "fix add" });
    const finished = await client.waitFor<LaneRecord>(
      (m) => m.kind === "record" && m.type === "cell.finished",
      60_000,
    );
    const result = finished.data.result as { stdout: string; error: unknown };
    assert.equal(result.error, null, JSON.stringify(result));
    assert.deepEqual(result.stdout.split("\n"), [
      "['add', 'mul']",
      "before 1",
      "old 'def add(a, b):\\n    return a - b'",
      "new 'def add(a, b):\\n    return a + b'",
      "stale True",
      "refused 1",
      "after 0",
      "",
    ]);
    assert.equal(
      await Deno.readTextFile(join(workspace, "calc.py")),
      CALC.replace("a - b", "a + b"),
    );
    // No bytecode cache was written: a same-size patch in the same second as the first test
    // run would otherwise leave a .pyc CPython trusts, and "after" would run the old code.
    await assert.rejects(Deno.stat(join(workspace, "__pycache__")), Deno.errors.NotFound);
    // The patch is a durable record naming the cell that made it; the refused one is not.
    const patches = client.messages.filter((m): m is LaneRecord =>
      m.kind === "record" && m.type === "code.patch"
    );
    assert.equal(patches.length, 1);
    assert.equal(patches[0].data.cell_id, finished.data.cell_id);
    const files = patches[0].data.files as { path: string; syntax_checked: boolean }[];
    assert.deepEqual(files.map((f) => [f.path, f.syntax_checked]), [["calc.py", true]]);
    assert.ok(patches[0].seq < finished.seq);
    await client.close();
  } finally {
    await daemon.stop();
    await fake.close();
    await Deno.remove(workspace, { recursive: true });
    await Deno.remove(daemon.stateDir, { recursive: true });
  }
});
