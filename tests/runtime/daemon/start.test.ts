/**
 * A start-up that fails after the store opened leaves nothing behind: the store is closed (its
 * owner lock dropped, so a second start on the same state directory right after succeeds) and
 * the daemon's cgroups are removed.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { SILENT_LOGGER } from "../../../runtime/core/mod.ts";
import { readServeSettings, startDaemon } from "../../../runtime/daemon/mod.ts";
import { REPO_ROOT } from "../../../runtime/setup/mod.ts";
import { tempDir } from "../../_helpers/temp.ts";
import { cgroupDirsOf } from "../../_helpers/cgroups.ts";

Deno.test("startDaemon() failing after the store opened releases the store and its cgroups", async () => {
  const stateDir = await tempDir("klbr-start-");
  const workspace = await tempDir("klbr-start-ws-");
  const configPath = join(stateDir, "config.kdl");
  // Nothing is asked of the model: the route only has to parse.
  await Deno.writeTextFile(configPath, `llm "main" {\n    url "http://127.0.0.1:9/v1"\n}\n`);
  const settings = await readServeSettings({ stateDir, configPath, port: 0 }, {
    ...Deno.env.toObject(),
    KLBR_WORKSPACE: workspace,
    KLBR_SKILLS_DIR: join(REPO_ROOT, "skills"),
  });
  // The step after the store opened and the confinement was prepared throws, as a failing
  // behaviour publication or coordinator would.
  const failure = new Error("injected: a later start-up step failed");
  await assert.rejects(
    startDaemon(settings, SILENT_LOGGER, {
      wrapStore: () => {
        throw failure;
      },
    }),
    (error) => error === failure,
  );
  assert.deepEqual(await cgroupDirsOf(stateDir), [], "the failed start's cgroups are removed");
  // Before the fix: "cannot open store as owner: the state directory is held by pid <this
  // test's pid>": the failed start still held the owner lock.
  const daemon = await startDaemon(settings, SILENT_LOGGER);
  try {
    assert.equal(daemon.store.owner, true);
  } finally {
    await daemon.coordinator.shutdown(1_000);
    await daemon.confinement.close();
    daemon.store.close();
  }
  assert.deepEqual(await cgroupDirsOf(stateDir), [], "the daemon's cgroups are removed with it");
});
