// The cleanup policy against a real store and real directories, with an injected clock: old
// drafts and unpinned releases are removed by a recorded maintenance step; a release that is
// active, last good, used by a recent or open frame, pinned by a job or a running kernel, or
// recently published is never removed, and nothing outside `<state>/releases/` is touched.

import assert from "node:assert/strict";
import { join } from "node:path";
import { readEventsOfKind } from "../../../store/tables/events.ts";
import { acceptFrame, finishFrame } from "../../../store/tables/frames.ts";
import { admitInput } from "../../../store/tables/inputs.ts";
import { createJob } from "../../../store/tables/jobs.ts";
import { startGeneration } from "../../../store/tables/kernel_generations.ts";
import { activateRelease, markLastGood, recordRelease } from "../../../store/tables/releases.ts";
import { publishRelease, verifyRelease } from "../../../store/maintenance/snapshot_hash.ts";
import type { Store } from "../../../store/store.ts";
import { EventBus, newId, SILENT_LOGGER } from "../../../runtime/core/mod.ts";
import { parseConfig } from "../../../runtime/config/mod.ts";
import { skillRoots } from "../../../runtime/kernel/mod.ts";
import { type HostTimers, Jobs, runMaintenance } from "../../../runtime/jobs/mod.ts";
import type { Provider } from "../../../runtime/model/mod.ts";
import { REPO_ROOT } from "../../_helpers/daemon.ts";
import { ManualTimers } from "../../_helpers/fake_timers.ts";
import { testAdmit, withClockedStore } from "../../_helpers/unattended.ts";

const DAY = 86_400_000;
const HOUR = 3_600_000;

async function release(store: Store, name: string, dir = join(store.stateDir, "releases")) {
  const id = name.repeat(64).slice(0, 64);
  const path = join(dir, id);
  await Deno.mkdir(path, { recursive: true });
  await Deno.writeTextFile(join(path, "attention.py"), "x = 1\n");
  recordRelease(store, { id, path, fileCount: 1, byteCount: 6 });
  return { id, path };
}

let n = 0;
function frameOn(store: Store, releaseId: string, open = false) {
  const input = admitInput(store, {
    session: "default",
    sourceKind: "local",
    dedupeKey: `local:m:${++n}`,
    conversationId: "local:default",
    author: "owner",
    body: "hi",
  });
  const frame = acceptFrame(store, {
    session: "default",
    inputIds: [input.inputId],
    contextEpoch: 0,
    policyRevision: releaseId,
  });
  if (!open) finishFrame(store, frame.frameId, "done", "test");
}

async function draft(store: Store, now: number): Promise<string> {
  const id = newId("draft", now);
  await Deno.mkdir(join(store.stateDir, "drafts", id), { recursive: true });
  await Deno.writeTextFile(join(store.stateDir, "drafts", id, "turn.py"), "y = 2\n");
  return id;
}

const exists = (path: string) => Deno.stat(path).then(() => true, () => false);

Deno.test("`runMaintenance()` removes old drafts and unpinned releases, never a pinned one", async () => {
  const start = Date.now();
  await withClockedStore(async ({ store, clock }) => {
    // Long ago: releases published, frames made, a draft written.
    const lastGood = await release(store, "1");
    const active = await release(store, "2");
    const oldFrame = await release(store, "3");
    const openFrame = await release(store, "4");
    const job = await release(store, "5");
    const kernel = await release(store, "6");
    const unused = await release(store, "7");
    const outside = await release(store, "8", join(store.stateDir, "elsewhere"));
    activateRelease(store, {
      session: "default",
      expectedEpoch: 0,
      releaseId: lastGood.id,
      reason: "t",
    });
    markLastGood(store, "default", lastGood.id);
    activateRelease(store, {
      session: "default",
      expectedEpoch: 1,
      releaseId: active.id,
      reason: "t",
    });
    frameOn(store, oldFrame.id);
    frameOn(store, openFrame.id, true);
    startGeneration(store, {
      session: "default",
      reason: "t",
      skillsRevision: "s",
      behaviorRevision: kernel.id,
    });
    createJob(store, {
      session: "default",
      kind: "code",
      name: "j",
      code: "1",
      budget: { wall_time_ms: 1000, model_requests: 1, tokens: 1 },
      releaseId: job.id,
      workspace: "/w",
      conversation: "local:default",
      cause: "t",
    });
    const oldDraft = await draft(store, clock.now);
    const diagnostics = (id: string) => join(store.stateDir, "drafts", `${id}.diagnostics.json`);
    await Deno.writeTextFile(diagnostics(oldDraft), "{}\n");
    // Forty days later: a recent frame on one more release, one just published, a fresh draft.
    clock.now = start + 40 * DAY;
    const recentFrame = await release(store, "9");
    frameOn(store, recentFrame.id);
    const published = await release(store, "b");
    const freshDraft = await draft(store, clock.now);
    await Deno.writeTextFile(diagnostics(freshDraft), "{}\n");

    const { config } = parseConfig("cleanup {\n release_keep_days 30\n draft_max_age_days 7\n}", {
      file: "t",
    });
    const deps = {
      store,
      log: SILENT_LOGGER,
      cleanup: config.cleanup,
      session: "default",
    };
    const report = await runMaintenance(deps, "test");
    // The only release old and unused is removed; the only old draft too.
    assert.deepEqual(report.releases.sort(), [oldFrame.id, unused.id].sort());
    assert.deepEqual(report.drafts, [oldDraft]);
    assert.deepEqual(report.errors, []);
    for (const gone of [oldFrame, unused]) assert.equal(await exists(gone.path), false, gone.id);
    for (
      const kept of [lastGood, active, openFrame, job, kernel, outside, recentFrame, published]
    ) {
      assert.equal(await exists(kept.path), true, kept.id);
    }
    assert.equal(await exists(join(store.stateDir, "drafts", oldDraft)), false);
    assert.equal(await exists(join(store.stateDir, "drafts", freshDraft)), true);
    // A failed draft's diagnostics beside it go with it (their history stays in the store).
    assert.equal(await exists(diagnostics(oldDraft)), false);
    assert.equal(await exists(diagnostics(freshDraft)), true);
    // Recorded before anything was removed, with exactly what it removes, then finished.
    const [started] = readEventsOfKind(store, "default", "maintenance.started");
    assert.deepEqual(
      (started.body as { releases: string[] }).releases.sort(),
      report.releases.sort(),
    );
    assert.deepEqual((started.body as { drafts: string[] }).drafts, [oldDraft]);
    const { run_id, trigger } = started.body as { run_id: string; trigger: string };
    assert.deepEqual([run_id, trigger], [report.runId, "test"]);
    const finished = readEventsOfKind(store, "default", "maintenance.finished");
    assert.deepEqual(
      finished.map((e) => e.body as { run_id: string; errors: string[] }).map((b) => [
        b.run_id,
        b.errors,
      ]),
      [[report.runId, []]],
    );
    // A second run finds nothing to do and records nothing.
    const again = await runMaintenance(deps, "test");
    assert.deepEqual([again.runId, again.releases, again.drafts], [null, [], []]);
    assert.equal(readEventsOfKind(store, "default", "maintenance.started").length, 1);
  }, start);
});

Deno.test("`runMaintenance()` keeps a release published again, also after it removed its files, so it can be activated", async () => {
  const start = Date.now();
  await withClockedStore(async ({ store, clock, dir }) => {
    // Reverting to an earlier version publishes a tree that is already a release: its row is
    // old, and a run between that publish and the activation must not take the files away.
    const releasesDir = join(store.stateDir, "releases");
    const tree = async (name: string, text: string) => {
      await Deno.mkdir(join(dir, name), { recursive: true });
      await Deno.writeTextFile(join(dir, name, "attention.py"), text);
      return join(dir, name);
    };
    const removed = await tree("removed", "x = 1\n");
    const present = await tree("present", "x = 2\n");
    const first = await publishRelease(store, { sourceDir: removed, releasesDir });
    const second = await publishRelease(store, { sourceDir: present, releasesDir });
    const { config } = parseConfig("cleanup {\n release_keep_days 30\n}", { file: "t" });
    const deps = { store, log: SILENT_LOGGER, cleanup: config.cleanup, session: "default" };

    clock.now = start + 40 * DAY;
    // Published again before any run removed it: the files are there and stay.
    await publishRelease(store, { sourceDir: present, releasesDir });
    const run = await runMaintenance(deps, "test");
    assert.deepEqual(run.releases, [first.id]);
    assert.equal(await exists(first.path), false);
    assert.equal(await exists(second.path), true, "a release published again was removed");

    // Published again after a run removed it: the files are written again and stay.
    clock.now += HOUR;
    const again = await publishRelease(store, { sourceDir: removed, releasesDir });
    assert.deepEqual([again.id, again.created], [first.id, true]);
    const next = await runMaintenance(deps, "test");
    assert.deepEqual(next.releases, []);
    await verifyRelease(again.path);
    const activated = activateRelease(store, {
      session: "default",
      expectedEpoch: 0,
      releaseId: again.id,
      reason: "agent activate",
    });
    assert.equal(activated.epoch, 1);
  }, start);
});

/** The longest delay `setTimeout` holds; a longer one is set to 1 ms (TimeoutOverflowWarning). */
const LONGEST_TIMER_MS = 2 ** 31 - 1;

Deno.test("the maintenance schedule waits its whole interval_hours, also one longer than a host timer holds", async () => {
  const start = Date.now();
  await withClockedStore(async (cs) => {
    const { store, clock } = cs;
    // 720 hours (30 days, the most the configuration takes) is past the 24.8 days one
    // setTimeout holds. The host timers here behave as Deno's do: a longer delay fires at once.
    const { config } = parseConfig("cleanup {\n interval_hours 720\n}", { file: "t" });
    const manual = new ManualTimers(clock);
    const asked: number[] = [];
    const timers: HostTimers = {
      set: (fn, ms) => {
        asked.push(ms);
        return manual.set(fn, ms > LONGEST_TIMER_MS ? 1 : ms);
      },
      clear: (handle) => manual.clear(handle),
    };
    const jobs = new Jobs({
      store,
      bus: new EventBus(),
      log: SILENT_LOGGER,
      python: "python3",
      repoRoot: REPO_ROOT,
      skillRoots: skillRoots({ repoRoot: cs.dir, stateDir: cs.dir }),
      provider: () => ({}) as Provider,
      budget: config.budget,
      cleanup: config.cleanup,
      cellTimeoutMs: 60_000,
      admit: testAdmit(store).admit,
      maintenanceSession: "default",
      timers,
    });
    /** Resolves once no run is in progress: the schedule has armed its next wait. */
    const idle = async () => {
      for (let i = 0; i < 500 && manual.armed === 0; i++) {
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      assert.equal(manual.armed, 1, "the schedule armed no next run");
    };
    const runs = () => readEventsOfKind(store, "default", "maintenance.started").length;
    try {
      jobs.startSession("default");
      await idle(); // the run at start: nothing to remove
      // A draft old enough for any run from now on to remove it: its id's time is 0 (ids are
      // made monotonic, so none is asked of newId), its files were last touched 30 days ago.
      const old = `dr_${"0".repeat(26)}`;
      const aged = new Date(start - 30 * DAY);
      await Deno.mkdir(join(store.stateDir, "drafts", old), { recursive: true });
      await Deno.writeTextFile(join(store.stateDir, "drafts", old, "turn.py"), "y = 2\n");
      await Deno.utime(join(store.stateDir, "drafts", old, "turn.py"), aged, aged);
      await Deno.utime(join(store.stateDir, "drafts", old), aged, aged);

      manual.advance(719 * HOUR);
      await idle();
      assert.equal(runs(), 0, "maintenance ran before its 720 hours were up");
      assert.equal(await exists(join(store.stateDir, "drafts", old)), true);

      manual.advance(HOUR);
      await jobs.shutdown(); // waits for the run in progress
      assert.equal(runs(), 1, "maintenance did not run once its 720 hours were up");
      assert.equal(await exists(join(store.stateDir, "drafts", old)), false);
      assert.deepEqual(asked.filter((ms) => ms > LONGEST_TIMER_MS), []);
    } finally {
      await jobs.shutdown();
    }
  }, start);
});
