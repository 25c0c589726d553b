// Tests of the bench's measuring parts against real processes and real SQLite: the raw
// commit ceiling, resident sizes, the framed echo, the workbench cells and the Jupyter peer.

import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { join } from "node:path";
import { REPO_ROOT } from "../../runtime/setup/mod.ts";
import { encodeFrame, resolvePython } from "../../runtime/kernel/mod.ts";
import { timeCells, timeEcho } from "../cell_round_trip.ts";
import { timeGenerationSpawns } from "../generation_spawn.ts";
import { runJupyterPeer } from "../jupyter_peer.ts";
import { measureRawCommits } from "../raw_commit.ts";
import { residentBytes, workingDenoPid } from "../rss.ts";
import { tempDir } from "./_temp.ts";

const python = (await resolvePython("python3")).executable;
const hasJupyter = (await new Deno.Command("/usr/bin/python3", {
  args: ["-c", "import jupyter_client, ipykernel"],
  stdout: "null",
  stderr: "null",
}).output().catch(() => ({ success: false }))).success;

Deno.test("`measureRawCommits()` commits every row in WAL at synchronous=FULL", async () => {
  const dir = await tempDir();
  const result = measureRawCommits({ dir, count: 25 });
  assert.equal(result.count, 25);
  assert.equal(result.latency.count, 25);
  assert.ok(result.perSecond > 0);
  const db = new DatabaseSync(join(dir, "raw.sqlite"));
  try {
    assert.deepEqual({ ...db.prepare("SELECT count(*) AS n FROM t").get() }, { n: 25 });
    assert.equal(
      (db.prepare("PRAGMA journal_mode").get() as { journal_mode: string }).journal_mode,
      "wal",
    );
  } finally {
    db.close();
  }
});

Deno.test("`measureRawCommits()` refuses a count that is not a positive integer", async () => {
  const dir = await tempDir();
  for (const count of [0, -3, 1.5, Number.NaN]) {
    assert.throws(() => measureRawCommits({ dir, count }), {
      code: "invalid_input",
      message: `cannot measure raw commits: count must be a positive integer (got ${count})`,
    });
  }
  // Nothing was created for a refused count.
  assert.deepEqual([...Deno.readDirSync(dir)], []);
});

Deno.test("`residentBytes()` refuses a pid that is not running", async () => {
  const child = new Deno.Command("true").spawn();
  await child.status;
  await assert.rejects(() => residentBytes(child.pid), {
    code: "not_found",
    message: `cannot read resident size: no process ${child.pid} (got ${child.pid})`,
  });
});

Deno.test("`workingDenoPid()` refuses a pid that is not running", async () => {
  const child = new Deno.Command("true").spawn();
  await child.status;
  await assert.rejects(() => workingDenoPid(child.pid), {
    code: "not_found",
    message: `cannot find the daemon process: no process ${child.pid} (got ${child.pid})`,
  });
});

Deno.test("`workingDenoPid()` follows a launcher to the Deno process it started", async () => {
  // A Deno launcher whose child Deno waits on its stdin: both end when the test closes it.
  const launcher = new Deno.Command(Deno.execPath(), {
    args: [
      "eval",
      `const c = new Deno.Command(Deno.execPath(), { args: ["eval", "for await (const _ of Deno.stdin.readable) {}"], stdin: "piped" }).spawn();
       console.log(c.pid);
       for await (const _ of Deno.stdin.readable) {}
       await c.stdin.close();
       await c.status;`,
    ],
    stdin: "piped",
    stdout: "piped",
  }).spawn();
  const reader = launcher.stdout.pipeThrough(new TextDecoderStream()).getReader();
  const { value } = await reader.read();
  const childPid = Number(value!.trim());
  try {
    assert.equal(await workingDenoPid(launcher.pid), childPid);
    assert.equal(await workingDenoPid(childPid), childPid);
    assert.ok(await residentBytes(childPid) > 1_000_000);
  } finally {
    await launcher.stdin.close();
    await reader.cancel();
    await launcher.status;
  }
});

Deno.test("framed_echo.py exits 2 on a frame cut short and 0 at a clean end", async () => {
  const run = async (bytes: Uint8Array) => {
    const child = new Deno.Command(python, {
      args: [join(REPO_ROOT, "bench", "framed_echo.py")],
      stdin: "piped",
      stdout: "piped",
      stderr: "null",
    }).spawn();
    const writer = child.stdin.getWriter();
    await writer.write(bytes);
    await writer.close();
    const out = await child.output();
    return { code: out.code, stdout: out.stdout };
  };
  const frame = encodeFrame({ kind: "ping", id: "rq_1" });
  assert.deepEqual(await run(frame), { code: 0, stdout: frame });
  assert.equal((await run(frame.subarray(0, 2))).code, 2);
  assert.equal((await run(frame.subarray(0, frame.length - 1))).code, 2);
});

Deno.test("`timeEcho()` and `timeCells()` count exactly the timed rounds", async () => {
  const echo = await timeEcho({ python, echoes: 30, warmup: 5 });
  assert.equal(echo.count, 30);
  assert.ok(echo.min <= echo.p50 && echo.p50 <= echo.p99 && echo.p99 <= echo.max);
  const cells = await timeCells({
    python,
    scratch: await tempDir(),
    cells: 10,
    warmup: 2,
  });
  assert.equal(cells.count, 10);
});

Deno.test("`timeCells()` refuses a workbench that cannot start", async () => {
  await assert.rejects(
    async () =>
      timeCells({
        python: "/nonexistent/python3",
        scratch: await tempDir(),
        cells: 1,
        warmup: 0,
      }),
    {
      code: "not_found",
      message:
        /^cannot spawn workbench: interpreter or workspace not found \(got "\/nonexistent\/python3" in /,
    },
  );
});

Deno.test("`timeGenerationSpawns()` starts and stops one generation per sample", async () => {
  const spawns = await timeGenerationSpawns({
    python,
    scratch: await tempDir(),
    spawns: 2,
  });
  assert.equal(spawns.count, 2);
});

/** One tiny run of the Jupyter peer with `python`, for the cases where it cannot run. */
async function failedPeerRun(python: string) {
  return await runJupyterPeer({ python, count: 1, warmup: 0, starts: 1, scratch: await tempDir() });
}

Deno.test("`runJupyterPeer()` says why when the interpreter does not exist", async () => {
  const result = await failedPeerRun("/nonexistent/python3");
  assert.deepEqual(result, {
    ok: false,
    reason: "/nonexistent/python3 does not exist; apt-get install python3-ipykernel " +
      "python3-jupyter-client to measure it",
  });
});

Deno.test("`runJupyterPeer()` says why when the interpreter has no Jupyter", async () => {
  // An interpreter without site-packages cannot import Jupyter, wherever Jupyter is installed.
  const scratch = await tempDir();
  const bare = join(scratch, "python3");
  await Deno.writeTextFile(bare, `#!/bin/sh\nexec ${python} -S "$@"\n`, { mode: 0o755 });
  const result = await failedPeerRun(bare);
  assert.equal(result.ok, false);
  assert.match(
    (result as { reason: string }).reason,
    /^.*python3(\.\d+)? cannot import (ipykernel|jupyter_client); apt-get install python3-ipykernel python3-jupyter-client to measure it$/,
  );
});

Deno.test("`runJupyterPeer()` says why when the peer exits without a result", async () => {
  const result = await failedPeerRun("false");
  assert.deepEqual(result, {
    ok: false,
    reason: "the Jupyter peer exited with 1 without a result ()",
  });
});

Deno.test({
  name: "`runJupyterPeer()` times a real kernel's 1+1 round trips and start",
  ignore: !hasJupyter,
  async fn() {
    const result = await runJupyterPeer({
      count: 5,
      warmup: 1,
      starts: 1,
      scratch: await tempDir(),
    });
    assert.equal(result.ok, true, JSON.stringify(result));
    if (!result.ok) return;
    assert.equal(result.roundTrip.count, 5);
    assert.equal(result.start.count, 1);
    assert.match(result.versions, /^ipykernel \S+, jupyter_client \S+, Python 3\.\d+\.\d+ \(/);
  },
});
