/**
 * The owner lock: one owner per state directory, across processes, recovered after a SIGKILL.
 *
 * Every test runs against real SQLite files in a fresh temporary directory.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { readOwnerLock } from "../../store/owner_lock.ts";
import { openStore } from "../../store/store.ts";
import {
  HOLD_OWNER,
  lines,
  manualClock,
  spawnDeno,
  throwsKlbr,
  withDir,
} from "./_store_support.ts";

Deno.test("`openStore()` refuses a second owner in the same process, naming the pid", async () => {
  await withDir((dir) => {
    const time = manualClock();
    const first = openStore(dir, { clock: time.clock });
    try {
      const started = new Date(time.now).toISOString();
      throwsKlbr(
        () => openStore(dir),
        "owner_locked",
        new RegExp(
          `^cannot open store as owner: the state directory is held by pid ${Deno.pid} started at ${
            started.replace(/[.]/g, "\\.")
          } on .+ \\(got ${join(dir, "owner.lock")}\\)$`,
        ),
      );
      // A non-owner open is not refused.
      openStore(dir, { owner: false }).close();
    } finally {
      first.close();
    }
  });
});

Deno.test("`close()` releases the owner lock for the next opener", async () => {
  await withDir((dir) => {
    const first = openStore(dir);
    first.close();
    first.close(); // a second close is a no-op
    const second = openStore(dir);
    assert.equal(readOwnerLock(dir)?.holder.pid, Deno.pid);
    second.close();
    assert.equal(readOwnerLock(dir), undefined, "a released lock names nobody");
  });
});

Deno.test("`openStore()` refuses a second owner process and names its pid", async () => {
  await withDir(async (dir) => {
    const holder = spawnDeno(HOLD_OWNER, dir);
    const holderOut = lines(holder.stdout);
    try {
      const ready = JSON.parse((await holderOut.next())!);
      assert.deepEqual(ready, { ready: true, pid: holder.pid });
      // A second, real process is refused and names the holder.
      const second = spawnDeno(HOLD_OWNER, dir);
      const secondOut = lines(second.stdout);
      const refusal = JSON.parse((await secondOut.next())!);
      await second.stdin.close();
      assert.equal((await second.status).code, 3);
      assert.equal(refusal.error, "owner_locked");
      assert.match(refusal.message, new RegExp(`held by pid ${holder.pid} started at \\d{4}-`));
      // So is this process.
      throwsKlbr(() => openStore(dir), "owner_locked", new RegExp(`held by pid ${holder.pid} `));
      assert.deepEqual(readOwnerLock(dir)?.alive, true);
    } finally {
      await holder.stdin.close();
      await holder.status;
    }
    // After a clean exit the directory is free.
    openStore(dir).close();
  });
});

Deno.test("`openStore()` recovers the owner lock of a SIGKILLed process", async () => {
  await withDir(async (dir) => {
    const victim = spawnDeno(HOLD_OWNER, dir);
    const out = lines(victim.stdout);
    assert.deepEqual(JSON.parse((await out.next())!), { ready: true, pid: victim.pid });
    throwsKlbr(() => openStore(dir), "owner_locked", new RegExp(`pid ${victim.pid} `));
    victim.kill("SIGKILL");
    const status = await victim.status;
    assert.equal(status.signal, "SIGKILL");
    await victim.stdin.close().catch(() => {});
    // The dead holder's file still names it, and it is reported dead.
    assert.deepEqual(readOwnerLock(dir), {
      holder: readOwnerLock(dir)!.holder,
      alive: false,
    });
    assert.equal(readOwnerLock(dir)!.holder.pid, victim.pid);
    // A new process recovers the lock.
    const heir = spawnDeno(HOLD_OWNER, dir);
    const heirOut = lines(heir.stdout);
    try {
      assert.deepEqual(JSON.parse((await heirOut.next())!), { ready: true, pid: heir.pid });
      throwsKlbr(() => openStore(dir), "owner_locked", new RegExp(`pid ${heir.pid} `));
    } finally {
      await heir.stdin.close();
      assert.equal((await heir.status).code, 0);
    }
  });
});

Deno.test("`openStore()` takes over a lock file that names a dead process", async () => {
  await withDir((dir) => {
    Deno.writeTextFileSync(
      join(dir, "owner.lock"),
      JSON.stringify({
        pid: 2 ** 22 + 7, // above pid_max on Linux: never a live process
        started_at: 0,
        hostname: "elsewhere",
      }),
    );
    assert.equal(readOwnerLock(dir)?.alive, false);
    const store = openStore(dir);
    try {
      assert.equal(readOwnerLock(dir)?.holder.pid, Deno.pid);
      assert.equal(readOwnerLock(dir)?.alive, true);
    } finally {
      store.close();
    }
  });
});
