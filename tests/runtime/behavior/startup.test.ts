// Start-up's handling of behaviour releases against a real store and real releases; no daemon,
// no worker (start-up runs no hook).

import assert from "node:assert/strict";
import { join } from "node:path";
import { prepareBehavior, rollbackTarget } from "../../../runtime/behavior/mod.ts";
import { publishRelease } from "../../../store/maintenance/snapshot_hash.ts";
import { activateRelease } from "../../../store/tables/releases.ts";
import { requireSession } from "../../../store/tables/sessions.ts";
import { openStore } from "../../../store/store.ts";

/** A behaviour tree in `dir` whose one file says `text`. */
async function tree(dir: string, text: string): Promise<string> {
  await Deno.mkdir(dir, { recursive: true });
  await Deno.writeTextFile(join(dir, "attention.py"), text);
  return dir;
}

Deno.test("`prepareBehavior()` at a restart does not make the active release last good: rollback still returns to it", async () => {
  const state = await Deno.makeTempDir({ prefix: "klbr-startup-" });
  const store = openStore(join(state, "state"));
  try {
    const checkout = await tree(join(state, "checkout"), "# the checkout's\n");
    const first = await prepareBehavior(store, { session: "default", sourceDir: checkout });
    // The first start has no last good release yet: the checkout's becomes it.
    assert.equal(requireSession(store, "default").lastGoodRelease, first.releaseId);

    // The agent activates a release that never runs a whole turn (its hooks fail on real input).
    const broken = await publishRelease(store, {
      sourceDir: await tree(join(state, "broken"), "raise RuntimeError('broken')\n"),
      releasesDir: join(store.stateDir, "releases"),
    });
    activateRelease(store, {
      session: "default",
      expectedEpoch: first.epoch,
      releaseId: broken.id,
      reason: "agent activate",
    });

    // The operator restarts the daemon: the broken release stays active, and is not last good.
    const again = await prepareBehavior(store, { session: "default", sourceDir: checkout });
    assert.equal(again.releaseId, broken.id);
    assert.equal(requireSession(store, "default").lastGoodRelease, first.releaseId);
    assert.equal(rollbackTarget(store, "default").target, first.releaseId);

    // An edited checkout is activated at the next start; it has not run a turn either.
    const edited = await prepareBehavior(store, {
      session: "default",
      sourceDir: await tree(checkout, "# edited\n"),
    });
    assert.notEqual(edited.releaseId, first.releaseId);
    assert.equal(requireSession(store, "default").lastGoodRelease, first.releaseId);
    assert.equal(rollbackTarget(store, "default").target, first.releaseId);
  } finally {
    store.close();
    await Deno.remove(state, { recursive: true });
  }
});

Deno.test("`prepareBehavior()` activates a checkout once per change: an unchanged checkout that was already active does not replace a later activation", async () => {
  const state = await Deno.makeTempDir({ prefix: "klbr-startup-" });
  const store = openStore(join(state, "state"));
  try {
    const checkout = await tree(join(state, "checkout"), "# the checkout's\n");
    const first = await prepareBehavior(store, { session: "default", sourceDir: checkout });
    const releasesDir = join(store.stateDir, "releases");
    const activate = (releaseId: string) =>
      activateRelease(store, {
        session: "default",
        expectedEpoch: requireSession(store, "default").behaviorEpoch,
        releaseId,
        reason: "agent activate",
      });
    // The agent publishes and activates an improvement; the owner adopts it into the checkout.
    const adopted = await publishRelease(store, {
      sourceDir: await tree(join(state, "adopted"), "# improved by the agent\n"),
      releasesDir,
    });
    activate(adopted.id);
    await tree(checkout, "# improved by the agent\n");
    const restarted = await prepareBehavior(store, { session: "default", sourceDir: checkout });
    assert.notEqual(restarted.releaseId, first.releaseId);
    assert.equal(restarted.releaseId, adopted.id, "the edited checkout is what runs");

    // The agent moves on; the checkout is not edited again before the next start.
    const later = await publishRelease(store, {
      sourceDir: await tree(join(state, "later"), "# a later edit by the agent\n"),
      releasesDir,
    });
    activate(later.id);
    const again = await prepareBehavior(store, { session: "default", sourceDir: checkout });
    assert.equal(again.releaseId, later.id, "an unchanged checkout leaves the active release");
  } finally {
    store.close();
    await Deno.remove(state, { recursive: true });
  }
});
