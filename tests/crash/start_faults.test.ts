// Faults at start: a state directory that cannot be used is refused with one `klbr:` line
// that names what to do, no stack trace, nothing written and the store file untouched — a
// read-only or full file system, an immutable or truncated store file, a zero-byte store where
// the directory shows history, a store of a newer schema, a store with a damaged page. And a
// state directory that was moved still opens, its releases found where they now are.

import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { join } from "node:path";
import { startFakeOpenAI } from "../fakes/openai_server.ts";
import { startTestDaemon, type TestDaemon } from "../_helpers/daemon.ts";
import { LATEST_VERSION } from "../../store/schema/migrations.ts";
import { fillDisk, mountSmallFs } from "./_loopback_fs.ts";
import { nextMessageAnswered, removeDirs } from "./_checks.ts";

async function sha256(path: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", await Deno.readFile(path));
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

async function listing(dir: string): Promise<string[]> {
  const names: string[] = [];
  for await (const entry of Deno.readDir(dir)) names.push(entry.name);
  return names.sort();
}

async function chattr(flag: string, path: string): Promise<void> {
  const out = await new Deno.Command("chattr", { args: [flag, path] }).output();
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
}

/**
 * Starts a daemon on `stateDir` expecting a refusal: exit 1, one `klbr:` line matching
 * `expected`, no stack trace, the store file and the directory's entries unchanged.
 */
async function assertRefusedAtStart(
  daemon: TestDaemon,
  expected: RegExp,
): Promise<void> {
  const store = join(daemon.stateDir, "runtime.sqlite");
  const hash = await sha256(store).catch(() => "absent");
  const names = await listing(daemon.stateDir);
  const output = await daemon.restart({ configDir: daemon.workspace }).then(
    async (started) => {
      await started.stop();
      return assert.fail("the daemon must refuse to start");
    },
    (error: Error) => error.message,
  );
  assert.match(output, /^daemon exited with 1 before listening:/);
  const lines = output.split("\n").filter((line) => line.startsWith("klbr: "));
  assert.equal(lines.length, 1, output);
  assert.match(lines[0], expected);
  assert.doesNotMatch(output, /Uncaught|^\s+at /m, "no stack trace");
  assert.equal(await sha256(store).catch(() => "absent"), hash, "the store file is untouched");
  assert.deepEqual(await listing(daemon.stateDir), names, "nothing was written");
}

/** A daemon that ran once and stopped, its configuration kept outside the state directory. */
async function stoppedDaemon(stateDir?: string): Promise<TestDaemon> {
  const daemon = await startTestDaemon({ stateDir });
  assert.equal(await daemon.stop(), 0);
  await Deno.remove(join(daemon.stateDir, "test-config.kdl"));
  return daemon;
}

Deno.test("window start-read-only: a read-only file system is refused with what to do", async () => {
  const fs = await mountSmallFs(16 * 1024);
  let daemon: TestDaemon | undefined;
  try {
    await Deno.mkdir(join(fs.dir, "state"));
    daemon = await stoppedDaemon(join(fs.dir, "state"));
    await fs.remount("ro");
    await assertRefusedAtStart(
      daemon,
      /^klbr: cannot (start|open store): the state directory .* is unusable: it cannot be written .*; make it writable, then start again/,
    );
  } finally {
    if (daemon) await Deno.remove(daemon.workspace, { recursive: true }).catch(() => {});
    await fs.unmount();
  }
});

Deno.test("window start-disk-full: a full file system is refused with what to do", async () => {
  const fs = await mountSmallFs(16 * 1024);
  let daemon: TestDaemon | undefined;
  try {
    await Deno.mkdir(join(fs.dir, "state"));
    daemon = await stoppedDaemon(join(fs.dir, "state"));
    const ballast = await fillDisk(join(fs.dir, "state", "drafts"));
    // The ballast is the filler, not something the daemon wrote.
    await assertRefusedAtStart(
      daemon,
      /^klbr: cannot (start|open store): the state directory .* is unusable: the disk holding it is full; free space on it, then start again/,
    );
    await Deno.remove(ballast);
  } finally {
    if (daemon) await Deno.remove(daemon.workspace, { recursive: true }).catch(() => {});
    await fs.unmount();
  }
});

Deno.test("window start-immutable-store: an immutable store file is refused with what to do", async () => {
  const daemon = await stoppedDaemon();
  const store = join(daemon.stateDir, "runtime.sqlite");
  try {
    await chattr("+i", store);
    await assertRefusedAtStart(
      daemon,
      /^klbr: cannot open store: the state directory .* it cannot be written/,
    );
  } finally {
    await chattr("-i", store).catch(() => {});
    await removeDirs(daemon);
  }
});

Deno.test("window start-truncated-store: a truncated store file is refused as damaged", async () => {
  const daemon = await stoppedDaemon();
  try {
    const store = join(daemon.stateDir, "runtime.sqlite");
    const size = (await Deno.stat(store)).size;
    await Deno.truncate(store, Math.floor(size / 2));
    await assertRefusedAtStart(
      daemon,
      /^klbr: cannot open store .*: the file is damaged .*; restore a backup/,
    );
  } finally {
    await removeDirs(daemon);
  }
});

Deno.test("window start-empty-store: a zero-byte store where releases show history is refused", async () => {
  const daemon = await stoppedDaemon();
  try {
    await Deno.truncate(join(daemon.stateDir, "runtime.sqlite"), 0);
    await assertRefusedAtStart(
      daemon,
      /^klbr: cannot open store: runtime\.sqlite is empty \(zero bytes\) but the state directory holds releases, so its history is gone; restore a backup/,
    );
  } finally {
    await removeDirs(daemon);
  }
});

Deno.test("window start-newer-schema: a store from a newer schema is refused with what to do", async () => {
  const daemon = await stoppedDaemon();
  try {
    const db = new DatabaseSync(join(daemon.stateDir, "runtime.sqlite"));
    db.exec(`PRAGMA user_version = ${LATEST_VERSION + 1}`);
    db.close();
    await assertRefusedAtStart(
      daemon,
      new RegExp(
        `^klbr: cannot open store .*schema version ${
          LATEST_VERSION + 1
        }, newer than this build's ${LATEST_VERSION} \\(run the klbr build that wrote it, or restore a backup`,
      ),
    );
  } finally {
    await removeDirs(daemon);
  }
});

Deno.test("window start-damaged-page: a store whose quick_check fails is refused as damaged", async () => {
  const daemon = await stoppedDaemon();
  try {
    const store = join(daemon.stateDir, "runtime.sqlite");
    const db = new DatabaseSync(store);
    const { rootpage } = db.prepare("SELECT rootpage FROM sqlite_schema WHERE name = 'inputs'")
      .get() as { rootpage: number };
    const { page_size } = db.prepare("PRAGMA page_size").get() as { page_size: number };
    db.close();
    const file = await Deno.open(store, { write: true });
    await file.seek((rootpage - 1) * page_size, Deno.SeekMode.Start);
    await file.write(new Uint8Array(64).fill(0xff));
    file.close();
    await assertRefusedAtStart(
      daemon,
      /^klbr: cannot open store .*: the file is damaged .*restore a backup/,
    );
  } finally {
    await removeDirs(daemon);
  }
});

Deno.test("window start-moved-state: a state directory moved elsewhere opens and finds its releases", async () => {
  const fake = startFakeOpenAI({ fallback: () => ({ toolCall: { code: "wait()" } }) });
  const first = await startTestDaemon({ modelUrl: fake.url });
  await nextMessageAnswered(first, fake, "before");
  assert.equal(await first.stop(), 0);
  const moved = `${first.stateDir}-moved`;
  await Deno.rename(first.stateDir, moved);
  const daemon = await first.restart({ stateDir: moved });
  try {
    const health = await (await fetch(`${daemon.url}/health`)).json();
    assert.equal(health.recovered_release, null, "the active release was found where it now is");
    await nextMessageAnswered(daemon, fake, "after");
    assert.equal(await daemon.stop(), 0);
  } finally {
    await daemon.stop().catch(() => {});
    await fake.close();
    await removeDirs(daemon);
  }
});
