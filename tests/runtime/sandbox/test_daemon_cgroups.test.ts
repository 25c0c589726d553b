/**
 * A full test run leaves no cgroup behind: a test daemon killed by a signal, whose state
 * directory no daemon starts on again, has its empty `klbr-<hash>` cgroups removed when its
 * test process ends (the helpers' `tests/_helpers/cgroups.ts`).
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { REPO_ROOT } from "../../_helpers/daemon.ts";
import { cgroupDirsOf } from "../../_helpers/cgroups.ts";
import { tempDir } from "../../_helpers/temp.ts";

/** `deno test` with the `test` task's flags (its permissions, not `--allow-all`). */
function testTaskFlags(): string[] {
  const config = JSON.parse(Deno.readTextFileSync(join(REPO_ROOT, "deno.json")));
  const task: string = config.tasks.test;
  return task.split(/\s+/).filter((part) => /^--(allow-|lock=)/.test(part));
}

Deno.test("a test daemon SIGKILLed and never restarted leaves no cgroup of its state directory once its test process ends", async () => {
  const stateDir = await tempDir("klbr-state-");
  const run = await new Deno.Command(Deno.execPath(), {
    args: ["test", ...testTaskFlags(), join(import.meta.dirname!, "_killed_test_daemon.ts")],
    cwd: REPO_ROOT,
    env: { KLBR_TEST_STATE: stateDir, NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(run.stdout) + new TextDecoder().decode(run.stderr);
  assert.equal(run.code, 0, text);
  assert.deepEqual(await cgroupDirsOf(stateDir), [], "what the killed daemon left");
});
