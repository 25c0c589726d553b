// Tests of the bench's state preparation on real state directories: seeding a log with
// admitInput and making a daemon start with a release whose attention.plan blocks.

import assert from "node:assert/strict";
import { join } from "node:path";
import { startBenchDaemon } from "../daemon.ts";
import { readEvents } from "../../store/tables/events.ts";
import { pendingSummary } from "../../store/tables/inputs.ts";
import { ensureSession, requireSession } from "../../store/tables/sessions.ts";
import { getRelease } from "../../store/tables/releases.ts";
import { openStore } from "../../store/store.ts";
import { BLOCKING_ATTENTION, prepareBlockedState } from "../blocked_release.ts";
import { openLane } from "../lane_driver.ts";
import { measureReplay, seedRecords } from "../replay.ts";
import { tempDir } from "./_temp.ts";

async function freshState(): Promise<string> {
  const dir = await tempDir();
  const store = openStore(dir);
  ensureSession(store, "default");
  store.close();
  return dir;
}

Deno.test("`seedRecords()` fills the log up to the asked number of records, once", async () => {
  const dir = await freshState();
  const first = seedRecords(dir, 120);
  assert.equal(first.seeded, 120);
  assert.equal(first.head, 120);
  assert.ok(first.readPerSecond > 0);
  // Asking again for as many writes nothing: the log already holds them.
  const again = seedRecords(dir, 120);
  assert.equal(again.seeded, 0);
  assert.equal(again.head, 120);
  const store = openStore(dir, { create: false });
  try {
    assert.equal(pendingSummary(store, "default").count, 120);
    const events = readEvents(store, "default", { since: 0, limit: 200 });
    assert.deepEqual(events.map((e) => e.seq), Array.from({ length: 120 }, (_, i) => i + 1));
    assert.ok(events.every((e) => e.kind === "input.admitted"));
  } finally {
    store.close();
  }
});

Deno.test("`seedRecords()` refuses a state directory another owner holds", async () => {
  const dir = await freshState();
  const owner = openStore(dir);
  try {
    assert.throws(() => seedRecords(dir, 10), { code: "owner_locked" });
    assert.equal(requireSession(owner, "default").nextSeq, 1);
  } finally {
    owner.close();
  }
});

Deno.test("`seedRecords()` refuses a state directory without the default session", async () => {
  const dir = await tempDir();
  openStore(dir).close();
  assert.throws(() => seedRecords(dir, 10), { code: "not_found" });
});

Deno.test("`seedRecords()` refuses a missing state directory", () => {
  assert.throws(() => seedRecords("/nonexistent/klbr-state", 10), { code: "state_missing" });
});

Deno.test("`prepareBlockedState()` leaves a state whose next daemon keeps the blocking release", async () => {
  const stateDir = join(await tempDir(), "state");
  await Deno.mkdir(stateDir);
  const workspace = await tempDir();
  const scratch = await tempDir();
  const releaseId = await prepareBlockedState({ stateDir, workspace, scratch });
  const store = openStore(stateDir, { create: false, owner: false });
  const release = getRelease(store, releaseId)!;
  assert.equal(requireSession(store, "default").activeRelease, releaseId);
  store.close();
  assert.equal(await Deno.readTextFile(join(release.path, "attention.py")), BLOCKING_ATTENTION);

  const daemon = await startBenchDaemon({ stateDir, workspace });
  try {
    // The restart did not re-activate the checkout's behaviour over it.
    const health = await (await fetch(`${daemon.url}/health`)).json();
    assert.equal(health.ok, true);
    const { lane } = await openLane({ port: daemon.port, token: daemon.token, client: "t" });
    const ack = await lane.admit("m1", "hello");
    assert.equal(ack.duplicate, false);
    await lane.close();
    const check = openStore(stateDir, { create: false, owner: false });
    try {
      assert.equal(requireSession(check, "default").activeRelease, releaseId);
    } finally {
      check.close();
    }
  } finally {
    await daemon.kill();
  }
});

Deno.test("`measureReplay()` refuses a log shorter than the expected head", async () => {
  const daemon = await startBenchDaemon({ stateDir: await tempDir(), workspace: await tempDir() });
  try {
    await assert.rejects(
      () => measureReplay({ port: daemon.port, token: daemon.token, head: 1_000_000 }),
      {
        code: "internal",
        message:
          /^cannot measure replay: expected records 1…1000000 in order \(got \d+, contiguous true\)$/,
      },
    );
  } finally {
    await daemon.stop();
  }
});
