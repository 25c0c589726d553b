// Window "backup during a burst": `klbr backup <dir>` copies a state directory while its daemon
// admits a burst — the store consistently (SQLite's online backup), and the releases and artifacts it
// refers to, verified. `klbr restore` refuses a live state directory; restored elsewhere, the
// copy holds every input acknowledged before the backup began, its releases verify, its
// artifacts match, and a daemon on it answers the next message.

import assert from "node:assert/strict";
import { join } from "node:path";
import { startFakeOpenAI } from "../fakes/openai_server.ts";
import { REPO_ROOT, startTestDaemon } from "../_helpers/daemon.ts";
import { connectLane } from "../_helpers/lane_client.ts";
import {
  checkStore,
  inputIds,
  nextMessageAnswered,
  removeDirs,
  rows,
  waitRecord,
  withDb,
} from "./_checks.ts";
import { mountSmallFs } from "./_loopback_fs.ts";

/** Runs `deno task klbr` with `args`; resolves with its exit code and output. */
async function klbr(...args: string[]): Promise<{ code: number; out: string }> {
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["task", "-q", "klbr", ...args],
    cwd: REPO_ROOT,
    env: { NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder();
  return { code: output.code, out: text.decode(output.stdout) + text.decode(output.stderr) };
}

Deno.test("window backup: a backup taken during a burst restores every input acknowledged before it began", async () => {
  const fake = startFakeOpenAI({ fallback: () => ({ toolCall: { code: "wait()" } }) });
  fake.enqueue({ toolCall: { code: "print('y' * 20_000)\nwait()" } });
  const daemon = await startTestDaemon({ modelUrl: fake.url });
  const parent = await Deno.makeTempDir({ prefix: "klbr-backups-" });
  const backup = join(parent, "backup");
  const restored = join(parent, "restored");
  let second = daemon;
  try {
    const client = await connectLane({ port: daemon.port, token: daemon.token });
    await client.request({ kind: "input", client_msg_id: "long", text: "make an artifact" });
    const spooled = await waitRecord(client, "cell.finished");
    const artifact =
      (spooled.data.result as { stdout_artifact: { id: string } }).stdout_artifact.id;
    const burst = async (from: number, count: number) => {
      for (let i = from; i < from + count; i++) {
        client.send({ kind: "input", request: `b${i}`, client_msg_id: `b${i}`, text: `n${i}` });
      }
      await client.waitFor((m) => "request" in m && m.request === `b${from + count - 1}`);
    };
    await burst(0, 50);
    // Every ack received by now was committed before the backup began.
    const before = client.messages.flatMap((m) => m.kind === "ack" ? [m.input_id] : []);
    const running = klbr("backup", backup, "--state", daemon.stateDir);
    let finished = false;
    running.then(() => finished = true);
    // The burst goes on while the backup runs.
    let sent = 50;
    while (!finished && sent < 5_000) {
      await burst(sent, 10);
      sent += 10;
    }
    const taken = await running;
    assert.equal(taken.code, 0, taken.out);
    assert.ok(sent > 50, "inputs were admitted while the backup ran");
    assert.match(
      taken.out,
      /^backed up and verified into .*: \d+ inputs, \d+ releases?, 1 artifacts/m,
    );

    // A live state directory is never overwritten.
    const refused = await klbr("restore", backup, "--state", daemon.stateDir);
    assert.equal(refused.code, 2, "the caller's to fix, like a second serve on it");
    assert.match(
      refused.out,
      /^klbr: cannot restore into .*: it is live, owned by pid (\d+); stop that daemon first \(kill -TERM \1 drains it; systemctl --user stop klbr when it runs as a service\)/m,
    );
    await client.close();
    assert.equal(await daemon.stop(), 0);

    const done = await klbr("restore", backup, "--state", restored);
    assert.equal(done.code, 0, done.out);
    assert.match(done.out, /^restored and verified from /m);
    withDb(restored, (db) => {
      assert.deepEqual(rows(db, "PRAGMA integrity_check"), [{ integrity_check: "ok" }]);
      const ids = new Set(rows(db, "SELECT id FROM inputs").map((r) => String(r.id)));
      for (const id of before) assert.ok(ids.has(id), `input ${id} acknowledged before the backup`);
    });
    const bytes = await Deno.readFile(join(restored, "artifacts", artifact));
    const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
    assert.equal(Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join(""), artifact);

    // A daemon on the restored copy starts on its own release and answers.
    second = await daemon.restart({ stateDir: restored });
    const health = await (await fetch(`${second.url}/health`)).json();
    assert.equal(health.recovered_release, null, "the restored active release verifies");
    const next = await nextMessageAnswered(second, fake, "restored");
    assert.equal(await second.stop(), 0);
    const acked = inputIds(restored);
    assert.ok(acked.includes(next.inputId));
    checkStore(restored, acked);
  } finally {
    await daemon.stop().catch(() => {});
    await second.stop().catch(() => {});
    await fake.close();
    await removeDirs(daemon);
    await Deno.remove(parent, { recursive: true }).catch(() => {});
  }
});

Deno.test("window backup-verify: `klbr restore` refuses a backup whose artifact no longer matches its hash", async () => {
  const fake = startFakeOpenAI({ fallback: () => ({ toolCall: { code: "wait()" } }) });
  fake.enqueue({ toolCall: { code: "print('z' * 20_000)\nwait()" } });
  const daemon = await startTestDaemon({ modelUrl: fake.url });
  const parent = await Deno.makeTempDir({ prefix: "klbr-backups-" });
  try {
    const client = await connectLane({ port: daemon.port, token: daemon.token });
    await client.request({ kind: "input", client_msg_id: "long", text: "make an artifact" });
    const spooled = await waitRecord(client, "cell.finished");
    const artifact =
      (spooled.data.result as { stdout_artifact: { id: string } }).stdout_artifact.id;
    await client.close();
    const taken = await klbr("backup", join(parent, "b"), "--state", daemon.stateDir);
    assert.equal(taken.code, 0, taken.out);
    await Deno.writeTextFile(join(parent, "b", "artifacts", artifact), "tampered");
    const refused = await klbr("restore", join(parent, "b"), "--state", join(parent, "r"));
    assert.equal(refused.code, 1);
    assert.match(
      refused.out,
      /^klbr: cannot use backup .*: artifact \w{12} does not match its hash/m,
    );
    assert.equal(
      await Deno.stat(join(parent, "r")).catch(() => null),
      null,
      "nothing was restored",
    );
  } finally {
    await daemon.stop();
    await fake.close();
    await removeDirs(daemon);
    await Deno.remove(parent, { recursive: true }).catch(() => {});
  }
});

Deno.test("window backup-damaged: `klbr restore` of a damaged store copy says so in one line, with no stack trace", async () => {
  const parent = await Deno.makeTempDir({ prefix: "klbr-backups-" });
  try {
    const state = join(parent, "state");
    assert.equal((await klbr("init", "--state", state)).code, 0);
    const taken = await klbr("backup", join(parent, "b"), "--state", state);
    assert.equal(taken.code, 0, taken.out);
    await Deno.rename(join(parent, "b"), join(parent, "truncated"));
    assert.equal((await klbr("backup", join(parent, "b"), "--state", state)).code, 0);
    // One copy's header is overwritten, the other's file is cut short.
    const file = await Deno.open(join(parent, "b", "runtime.sqlite"), { write: true });
    await file.write(new TextEncoder().encode("not a database at all"));
    file.close();
    await Deno.truncate(join(parent, "truncated", "runtime.sqlite"), 5_000);
    for (const [damaged, why] of [["b", "file is not a database"], ["truncated", "malformed"]]) {
      const refused = await klbr("restore", join(parent, damaged), "--state", join(parent, "r"));
      assert.equal(refused.code, 1, refused.out);
      const lines = refused.out.trimEnd().split("\n");
      assert.equal(lines.length, 1, refused.out);
      assert.match(
        lines[0],
        new RegExp(
          `^klbr: cannot use backup .*${damaged}: its store copy cannot be read \\(got .*${why}.*\\); ` +
            "the backup is damaged: restore another one, or take a new one with `klbr backup`$",
        ),
      );
      assert.equal(await Deno.stat(join(parent, "r")).catch(() => null), null, "nothing restored");
    }
  } finally {
    await Deno.remove(parent, { recursive: true }).catch(() => {});
  }
});

Deno.test("window backup-disk-full: `klbr backup` onto a full or read-only disk, and `klbr restore` from one onto a full disk, say so in one line naming the fix and leave nothing", async () => {
  const parent = await Deno.makeTempDir({ prefix: "klbr-backups-" });
  // 64 KiB: the state's store alone (about 400 KiB) does not fit.
  const small = await mountSmallFs(64);
  try {
    const state = join(parent, "state");
    assert.equal((await klbr("init", "--state", state)).code, 0);
    const full = await klbr("backup", join(small.dir, "b"), "--state", state);
    assert.equal(full.code, 1, full.out);
    assert.equal(full.out.trimEnd().split("\n").length, 1, full.out);
    assert.match(
      full.out.trimEnd(),
      new RegExp(
        `^klbr: cannot back up into ${small.dir}/b: the disk holding it is full; free space ` +
          "on it or give a directory on another disk, then run it again \\(got .*full.*\\)$",
      ),
    );
    // A restore onto the full disk, from a backup that is complete elsewhere.
    const taken = await klbr("backup", join(parent, "b"), "--state", state);
    assert.equal(taken.code, 0, taken.out);
    const restore = await klbr("restore", join(parent, "b"), "--state", join(small.dir, "r"));
    assert.equal(restore.code, 1, restore.out);
    assert.match(
      restore.out.trimEnd(),
      new RegExp(
        `^klbr: cannot restore into ${small.dir}/r: the disk holding it is full; free space ` +
          "on it or give a directory on another disk, then run it again \\(got .*\\)$",
      ),
    );
    await small.remount("ro");
    const readOnly = await klbr("backup", join(small.dir, "b"), "--state", state);
    assert.equal(readOnly.code, 1, readOnly.out);
    assert.match(
      readOnly.out.trimEnd(),
      new RegExp(
        `^klbr: cannot back up into ${small.dir}/b: it is on a read-only file system; make ` +
          "it writable or give another directory, then run it again \\(got .*\\)$",
      ),
    );
    // No partial copy is left to be mistaken for a backup.
    assert.deepEqual([...Deno.readDirSync(small.dir)], []);
  } finally {
    await small.unmount();
    await Deno.remove(parent, { recursive: true }).catch(() => {});
  }
});
