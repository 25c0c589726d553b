// Maintenance runs at every start and then hourly; what pins a release must be found without
// reading the history: every statement a run prepares is explained against a real store with
// a history, an open frame and a running generation, and none may scan a table that grows with
// history (a scan of a partial index over open work only is allowed, as in
// tests/store/query_plans.test.ts).

import { historyScans } from "../../_helpers/query_plans.ts";
import { recordingStatements } from "../../_helpers/store.ts";
import assert from "node:assert/strict";
import { join } from "node:path";
import { SILENT_LOGGER } from "../../../runtime/core/mod.ts";
import { parseConfig } from "../../../runtime/config/mod.ts";
import { runMaintenance } from "../../../runtime/jobs/mod.ts";
import { acceptFrame } from "../../../store/tables/frames.ts";
import { admitInput } from "../../../store/tables/inputs.ts";
import { startGeneration } from "../../../store/tables/kernel_generations.ts";
import { recordRelease } from "../../../store/tables/releases.ts";
import { ensureSession } from "../../../store/tables/sessions.ts";
import { openStore } from "../../../store/store.ts";
import { writeTurn } from "../../_helpers/history_fixture.ts";

const GROWING = ["events", "inputs", "frames", "cells", "provider_items", "kernel_generations"];
const OPEN_WORK = ["frames_open", "kernel_generations_running", "jobs_open"];

Deno.test("`runMaintenance()` finds what pins a release without scanning history (EXPLAIN QUERY PLAN)", async () => {
  const dir = await Deno.makeTempDir();
  const base = openStore(dir);
  try {
    ensureSession(base, "default");
    for (let n = 1; n <= 200; n++) writeTurn(base, "default", n);
    for (const name of ["1", "2", "3"]) {
      const id = name.repeat(64);
      const path = join(dir, "releases", id);
      await Deno.mkdir(path, { recursive: true });
      recordRelease(base, { id, path, fileCount: 0, byteCount: 0 });
    }
    const { inputId } = admitInput(base, {
      session: "default",
      sourceKind: "local",
      dedupeKey: "local:open",
      conversationId: "local:default",
      author: "owner",
      body: "open",
    });
    acceptFrame(base, {
      session: "default",
      inputIds: [inputId],
      contextEpoch: 0,
      policyRevision: "1".repeat(64),
    });
    startGeneration(base, {
      session: "default",
      reason: "t",
      skillsRevision: "s",
      behaviorRevision: "2".repeat(64),
    });
    const { store, seen } = recordingStatements(base);
    const { config } = parseConfig("cleanup {\n release_keep_days 30\n}", { file: "t" });
    const deps = { store, log: SILENT_LOGGER, cleanup: config.cleanup };
    await runMaintenance({ ...deps, session: "default" }, "test");

    const frames = [...seen].filter((sql) => /\bFROM (frames|kernel_generations)\b/.test(sql));
    assert.ok(frames.length >= 2, `explained ${frames.length} pin lookups`);
    const { scans } = historyScans(join(dir, "runtime.sqlite"), seen, {
      growing: GROWING,
      openWork: OPEN_WORK,
    });
    assert.deepEqual(scans, []);
  } finally {
    base.close();
    await Deno.remove(dir, { recursive: true });
  }
});
