// Window "a corrupt page found at run time": a page of the live store is damaged under the
// running daemon (a copy of the store with a damaged page, in place). The daemon stops
// admitting and says so — each input gets a `store_corrupt` error, `/health` is `failing` —
// and never crashes, not in admission and not in a lane client's replay. The next start
// refuses the damaged file with one `klbr:` line naming what to do, leaving it untouched.

import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { join } from "node:path";
import { startFakeOpenAI } from "../fakes/openai_server.ts";
import { startTestDaemon } from "../_helpers/daemon.ts";
import { connectLane } from "../_helpers/lane_client.ts";
import { nextMessageAnswered, removeDirs } from "./_checks.ts";

/** Damages the root page of the events table in the store file itself, past SQLite's cache. */
function damageEventsPage(stateDir: string): void {
  const path = join(stateDir, "runtime.sqlite");
  const db = new DatabaseSync(path);
  db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
  const { rootpage } = db.prepare("SELECT rootpage FROM sqlite_schema WHERE name = 'events'")
    .get() as { rootpage: number };
  const { page_size } = db.prepare("PRAGMA page_size").get() as { page_size: number };
  db.close();
  const file = Deno.openSync(path, { read: true, write: true });
  try {
    file.seekSync((rootpage - 1) * page_size, Deno.SeekMode.Start);
    file.writeSync(new Uint8Array(64).fill(0xff));
    file.syncSync();
  } finally {
    file.close();
  }
  // A commit of another connection makes the daemon's connection drop its page cache.
  const touch = new DatabaseSync(path);
  touch.exec("UPDATE klbr_meta SET value = value WHERE key = 'format'");
  touch.close();
}

async function sha256(path: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", await Deno.readFile(path));
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

Deno.test("window corrupt-page: a damaged page at run time stops admission with store_corrupt, never a crash; the next start refuses it", async () => {
  const fake = startFakeOpenAI({ fallback: () => ({ toolCall: { code: "wait()" } }) });
  const daemon = await startTestDaemon({ modelUrl: fake.url });
  try {
    await nextMessageAnswered(daemon, fake, "before");
    const client = await connectLane({ port: daemon.port, token: daemon.token });
    damageEventsPage(daemon.stateDir);
    const first = await client.request({ kind: "input", client_msg_id: "c1", text: "hello?" });
    assert.equal(first.kind === "error" && first.code, "store_corrupt", JSON.stringify(first));
    assert.match(first.kind === "error" ? first.message : "", /restore a backup/);
    // From now on admission is closed and says why, without touching the store.
    const second = await client.request({ kind: "input", client_msg_id: "c2", text: "still?" });
    assert.equal(second.kind === "error" && second.code, "store_corrupt");
    assert.match(
      second.kind === "error" ? second.message : "",
      /^cannot admit input: the store reported a damaged file at /,
    );
    const health = await (await fetch(`${daemon.url}/health`)).json();
    assert.equal(health.status, "failing");
    assert.equal(health.admitting, false);
    assert.equal(health.store.state, "corrupt");
    // A client replaying from the start hears the failure; the daemon goes on.
    const replay = await connectLane({ port: daemon.port, token: daemon.token, since: 0 });
    const error = replay.messages.find((m) => m.kind === "error");
    assert.equal(error?.kind === "error" && error.code, "store_corrupt");
    let timer: ReturnType<typeof setTimeout> | undefined;
    const closed = await Promise.race([
      replay.closed.then((event) => event.code),
      new Promise<string>((resolve) => timer = setTimeout(() => resolve("still open"), 10_000)),
    ]).finally(() => clearTimeout(timer));
    assert.equal(closed, 1011, "the replay connection is closed with the reason");
    assert.equal((await fetch(`${daemon.url}/health`)).status, 503, "still answering");
    await client.close();
    assert.equal(await daemon.stop(), 0);
    assert.doesNotMatch(daemon.logs(), /Uncaught/);

    // The next start finds the damage before writing anything and says what to do.
    const path = join(daemon.stateDir, "runtime.sqlite");
    const before = await sha256(path);
    const restart = await daemon.restart().then(
      () => assert.fail("a damaged store must not start"),
      (e: Error) => e.message,
    );
    const lines = restart.split("\n").filter((l) => l.startsWith("klbr: "));
    assert.equal(lines.length, 1, restart);
    assert.match(lines[0], /^klbr: cannot (open store|start).*damaged.*restore a backup/);
    assert.doesNotMatch(restart, /Uncaught|\n\s+at /);
    assert.equal(await sha256(path), before, "the file is untouched");
  } finally {
    await daemon.stop().catch(() => {});
    await fake.close();
    await removeDirs(daemon);
  }
});
