// Runs the workbench's own Python unit tests (stdlib `unittest`) as part of `deno task test`.

import assert from "node:assert/strict";
import { REPO_ROOT } from "../_helpers/daemon.ts";

Deno.test("the workbench's Python unittest suite passes", async () => {
  const out = await new Deno.Command("python3", {
    args: ["-m", "unittest", "discover", "-s", "workbench/tests", "-t", "workbench"],
    cwd: REPO_ROOT,
    env: { PYTHONDONTWRITEBYTECODE: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const report = new TextDecoder().decode(out.stderr);
  const ran = report.match(/Ran (\d+) tests?/);
  assert.ok(ran, `unittest printed no summary:\n${report.slice(-2000)}`);
  assert.ok(Number(ran[1]) > 0, "unittest ran no test");
  assert.equal(out.code, 0, report.slice(-4000));
  assert.match(report, /\nOK/);
});
