/**
 * The workbench against a real Python process: cells, cancellation ladder, process groups,
 * `workspace.run`, path escapes, skills, generations, framing failures and the environment.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { z } from "zod";
import { createLogger, isKlbrError, KlbrError, newId } from "../../../runtime/core/mod.ts";
import {
  bindRpcs,
  type BoundRpc,
  type CellResult,
  defineRpc,
  type ExecuteOptions,
  type GenerationRecord,
  KernelSupervisor,
  type KernelSupervisorOptions,
  resolvePython,
  type RpcCall,
  type RpcContext,
  skillsRevision,
  spawnWorkbench,
  type WorkbenchExit,
} from "../../../runtime/kernel/mod.ts";
import { processGroupMembers } from "../../../runtime/sandbox/mod.ts";
import { runExample } from "../../../runtime/setup/mod.ts";

const REPO = fileURLToPath(new URL("../../..", import.meta.url));
const PYTHON = (await resolvePython("python3")).executable;
/** The ladder's grace in these tests; the default is 2 s. */
const GRACE_MS = 1_000;
/** Upper bound for any awaited event: a hang fails the test instead of stalling the run. */
const BOUND_MS = 20_000;

/** Rejects when `promise` does not settle within `ms`; the timer never outlives the test. */
async function bounded<T>(promise: Promise<T>, what: string, ms = BOUND_MS): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not settle within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, limit]);
  } finally {
    clearTimeout(timer);
  }
}

/** Resolves with the file's trimmed text once it exists; waits on file events, never polls. */
async function fileAppears(path: string): Promise<string> {
  const read = () => Deno.readTextFile(path).then((t) => t.trim(), () => "");
  const watcher = Deno.watchFs(join(path, ".."));
  const timer = setTimeout(() => watcher.close(), BOUND_MS);
  try {
    const now = await read();
    if (now) return now;
    for await (const _event of watcher) {
      const seen = await read();
      if (seen) return seen;
    }
    throw new Error(`${path} did not appear within ${BOUND_MS} ms`);
  } finally {
    clearTimeout(timer);
    try {
      watcher.close();
    } catch { /* closed by the timer */ }
  }
}

/** Whether `pid` is a live (non-zombie) process, asked of `ps`. */
async function alive(pid: number): Promise<boolean> {
  const out = await new Deno.Command("ps", { args: ["-o", "stat=", "-p", String(pid)] }).output();
  const stat = new TextDecoder().decode(out.stdout).trim();
  return stat !== "" && !stat.startsWith("Z");
}

type SessionOptions = Partial<KernelSupervisorOptions>;

/** A supervisor over a temp workspace and state dir, with its records kept in arrays. */
async function session(options: SessionOptions = {}) {
  const dir = await Deno.realPath(await Deno.makeTempDir({ prefix: "klbr-session-" }));
  const workspace = join(dir, "ws");
  const stateDir = join(dir, "state");
  await Deno.mkdir(workspace);
  await Deno.mkdir(stateDir);
  const generations: GenerationRecord[] = [];
  const exits: WorkbenchExit[] = [];
  const kernel = new KernelSupervisor({
    python: PYTHON,
    session: "test",
    workspace,
    repoRoot: REPO,
    skillRoots: { builtinRoot: join(workspace, "skills"), managedRoot: join(stateDir, "skills") },
    recordGeneration: (g) => void generations.push(g),
    onExit: (_g, e) => void exits.push(e),
    workbench: { cancelGraceMs: GRACE_MS },
    ...options,
  });
  const exec = (code: string, opts: ExecuteOptions = {}) =>
    bounded(kernel.execute(newId("cell"), code, opts), `cell ${JSON.stringify(code)}`);
  return {
    dir,
    workspace,
    stateDir,
    kernel,
    generations,
    exits,
    exec,
    /** Starts a cell that creates `marker` and then blocks; resolves once it is running. */
    async started(code: string, marker = "started") {
      const controller = new AbortController();
      const result = exec(`open(${JSON.stringify(marker)}, "w").write("1")\n${code}`, {
        signal: controller.signal,
      });
      await fileAppears(join(workspace, marker));
      return { result, cancel: () => controller.abort() };
    },
    [Symbol.asyncDispose]: async () => {
      await kernel.shutdown();
      await Deno.remove(dir, { recursive: true });
    },
  };
}

function ok(result: CellResult): string | null {
  assert.equal(result.outcome, "ok", JSON.stringify(result));
  return result.value;
}

// ---------------------------------------------------------------------------------------
// Cells

Deno.test("`execute()` keeps the heap across cells, with top-level await and a final repr", async () => {
  await using s = await session();
  assert.equal(ok(await s.exec("x = 41")), null);
  assert.equal(ok(await s.exec("import asyncio\nawait asyncio.sleep(0)\nx += 1\nx")), "42");
  assert.equal(ok(await s.exec("'text'")), "'text'");
  assert.equal(ok(await s.exec("None")), null);
  assert.equal(s.generations.length, 1);
});

Deno.test("`execute()` captures stdout and stderr per cell and never mixes them into frames", async () => {
  // A printed frame header, or raw bytes a subprocess writes to fd 1, must not reach the
  // frame channel: either would desynchronise it and fail the worker.
  await using s = await session();
  const first = await s.exec(
    "import sys, subprocess\n" +
      "print('\\x00\\x00\\x00\\x05hello')\n" +
      "print('to stderr', file=sys.stderr)\n" +
      "subprocess.run(['printf', '\\\\000\\\\000\\\\000\\\\007garbage'])\n" +
      "'done'",
  );
  assert.equal(ok(first), "'done'");
  assert.equal(first.stdout, "\x00\x00\x00\x05hello\n");
  assert.equal(first.stderr, "to stderr\n");
  const second = await s.exec("print('second')");
  assert.equal(second.stdout, "second\n");
  assert.equal(second.stderr, "");
  assert.equal(s.generations.length, 1);
  assert.ok(s.kernel.current!.stderrTail().includes("garbage"));
});

Deno.test("`execute()` reports a raised exception as a structured traceback without klbr frames", async () => {
  await using s = await session();
  const r = await s.exec("def f():\n    raise ValueError('bad value')\nf()");
  assert.equal(r.outcome, "error");
  assert.equal(r.error?.type, "ValueError");
  assert.equal(r.error?.message, "bad value");
  assert.match(r.error!.traceback, /line 2, in f\n/);
  assert.match(r.error!.traceback, /ValueError: bad value\n$/);
  assert.doesNotMatch(r.error!.traceback, /klbr[/\\]/);
  assert.equal(ok(await s.exec("1 + 1")), "2"); // the worker carries on
});

Deno.test("`execute()` passes live output to onStream and the whole capture in the result", async () => {
  await using s = await session();
  const seen: [string, string][] = [];
  const r = await s.exec("print('a')\nimport asyncio\nawait asyncio.sleep(0)\nprint('b')", {
    onStream: (name, text) => void seen.push([name, text]),
  });
  assert.equal(r.stdout, "a\nb\n");
  // Batching is the worker's choice; the order and the text are not.
  assert.equal(seen.map(([, text]) => text).join(""), "a\nb\n");
  assert.ok(seen.every(([name]) => name === "stdout"));
});

// ---------------------------------------------------------------------------------------
// Cancellation ladder

Deno.test("`execute()` ends a cell awaiting asyncio.sleep as cancelled and keeps the worker", async () => {
  await using s = await session();
  await s.exec("kept = 'heap'");
  const cell = await s.started("import asyncio\nawait asyncio.sleep(1000)");
  cell.cancel();
  const r = await cell.result;
  assert.equal(r.outcome, "cancelled");
  assert.equal(ok(await s.exec("kept")), "'heap'");
  assert.equal(s.generations.length, 1);
});

Deno.test("`execute()` ends a timed-out cell as timed_out and keeps the worker", async () => {
  await using s = await session();
  const r = await s.exec("import asyncio\nawait asyncio.sleep(1000)", { timeoutMs: 200 });
  assert.equal(r.outcome, "timed_out");
  assert.equal(ok(await s.exec("'alive'")), "'alive'");
  assert.equal(s.generations.length, 1);
});

for (
  const [what, code] of [
    [
      "a cell that catches CancelledError and keeps going",
      "import asyncio\nwhile True:\n    try:\n        await asyncio.sleep(1000)\n    except asyncio.CancelledError:\n        pass",
    ],
    ["a cell that blocks the loop with time.sleep", "import time\ntime.sleep(10**9)"],
    ["a cell spinning the CPU", "while True:\n    pass"],
  ]
) {
  Deno.test(`\`cancel\` ladder kills ${what} after the grace and the supervisor replaces it`, async () => {
    await using s = await session();
    await s.exec("lost = 1");
    const pid = s.kernel.current!.pid;
    const cell = await s.started(code);
    cell.cancel();
    const r = await bounded(cell.result, "the killed cell", GRACE_MS + 10_000);
    assert.equal(r.outcome, "killed");
    assert.equal(
      r.error?.message,
      `the workbench was killed: cancelled: no reply to cancel within ${GRACE_MS} ms`,
    );
    assert.deepEqual(await processGroupMembers(pid), []);
    assert.equal(s.exits[0].reason, "killed");
    // The next cell runs in generation 2, recorded with why, and the heap is gone.
    const next = await s.exec("lost");
    assert.equal(next.outcome, "error");
    assert.equal(next.error?.type, "NameError");
    assert.equal(s.generations.length, 2);
    assert.equal(s.generations[1].generation, 2);
    assert.equal(
      s.generations[1].reason,
      `killed: cancelled: no reply to cancel within ${GRACE_MS} ms`,
    );
    assert.equal(s.generations[1].heapRestored, false);
    assert.notEqual(s.generations[1].pid, pid);
  });
}

Deno.test("a killed worker leaves none of the children its cell started with Popen", async () => {
  await using s = await session();
  const pid = (await s.kernel.ready()).pid;
  const cell = await s.started(
    "import subprocess, time\n" +
      "kids = [subprocess.Popen(['sleep', '1000']) for _ in range(2)]\n" +
      "open('kids', 'w').write(' '.join(str(k.pid) for k in kids))\n" +
      "time.sleep(10**9)",
  );
  const kids = (await fileAppears(join(s.workspace, "kids"))).split(" ").map(Number);
  for (const kid of kids) assert.ok(await alive(kid));
  cell.cancel();
  assert.equal((await cell.result).outcome, "killed");
  for (const kid of kids) assert.equal(await alive(kid), false, `sleep ${kid} survived`);
  assert.deepEqual(await processGroupMembers(pid), []);
});

Deno.test("`reset()` kills a running cell and the Popen children of the old generation", async () => {
  await using s = await session();
  const kids = ok(
    await s.exec(
      "import subprocess\nkids = [subprocess.Popen(['sleep', '1000']) for _ in range(2)]\n" +
        "[k.pid for k in kids]",
    ),
  );
  const pids: number[] = JSON.parse(kids!);
  const running = await s.started("import asyncio\nawait asyncio.sleep(1000)");
  const record = await s.kernel.reset("operator asked");
  assert.equal((await running.result).outcome, "killed");
  for (const kid of pids) assert.equal(await alive(kid), false);
  assert.equal(record.reason, "operator asked");
});

// ---------------------------------------------------------------------------------------
// workspace.run from a cell

Deno.test("`run()` cancelled mid-way leaves no descendant alive when the cell's result arrives", async () => {
  await using s = await session();
  const cell = await s.started(
    "r = await run(['sh', '-c', 'echo $$ > run.pgid; sleep 1000 & sleep 1000'], timeout=600)",
  );
  const pgid = Number(await fileAppears(join(s.workspace, "run.pgid")));
  assert.ok((await processGroupMembers(pgid)).length >= 2);
  cell.cancel();
  assert.equal((await cell.result).outcome, "cancelled");
  // The result is reported only after the run's RPC settled, so the group is dead by now.
  assert.deepEqual(await processGroupMembers(pgid), []);
});

Deno.test("`run()` reports exit codes, capped output, timeouts and a missing program", async () => {
  await using s = await session();
  assert.equal(ok(await s.exec("(await run(['sh', '-c', 'exit 7'])).exit_code")), "7");
  assert.equal(
    ok(
      await s.exec(
        "r = await run(['head', '-c', '2000000', '/dev/zero'])\n(len(r.stdout), r.stdout_truncated, r.exit_code)",
      ),
    ),
    "(1048576, True, 0)",
  );
  assert.equal(
    ok(await s.exec("r = await run(['sleep', '1000'], timeout=0.2)\n(r.timed_out, r.exit_code)")),
    "(True, None)",
  );
  const missing = await s.exec("await run(['klbr-no-such-program'])");
  assert.equal(missing.outcome, "error");
  assert.equal(missing.error?.type, "RpcError");
  assert.equal(
    missing.error?.message,
    'workspace.run failed (not_found): cannot run: program not found on PATH or at that path (got "klbr-no-such-program")',
  );
});

Deno.test("path escapes by `..` and by symlinks to / and to a sibling are rejected from a cell", async () => {
  await using s = await session();
  const sibling = join(s.dir, "sibling");
  await Deno.mkdir(sibling);
  await Deno.writeTextFile(join(sibling, "secret.txt"), "secret");
  await Deno.symlink("/", join(s.workspace, "to_root"));
  await Deno.symlink(sibling, join(s.workspace, "to_sibling"));
  for (
    const code of [
      "await open_file('../sibling/secret.txt')",
      "await open_file('to_root/etc/hostname')",
      "await open_file('to_sibling/secret.txt')",
      "await ls('to_sibling')",
      "await run(['pwd'], cwd='to_root')",
      "await run(['pwd'], cwd='..')",
    ]
  ) {
    const r = await s.exec(code);
    assert.equal(r.outcome, "error", code);
    assert.equal(r.error?.type, "WorkspaceEscape", `${code}: ${JSON.stringify(r.error)}`);
  }
  // The host checks again on its own: a raw RPC past the Python checks is refused too.
  const raw = await s.exec(
    "from klbr import rpc\nawait rpc.call('workspace.run', {'argv': ['pwd'], 'cwd': '../sibling'})",
  );
  assert.equal(
    raw.error?.message,
    'workspace.run failed (path_escape): cannot run: cwd leaves the workspace (got "../sibling")',
  );
  const link = await s.exec(
    "from klbr import rpc\nawait rpc.call('workspace.run', {'argv': ['pwd'], 'cwd': 'to_sibling'})",
  );
  assert.equal(
    link.error?.message,
    'workspace.run failed (path_escape): cannot run: cwd leaves the workspace through a symlink (got "to_sibling")',
  );
});

Deno.test("`open_file().replace` changes exactly one occurrence and refuses 0 or many", async () => {
  await using s = await session();
  await Deno.writeTextFile(join(s.workspace, "note.md"), "one two two\n");
  const none = await s.exec("await (await open_file('note.md')).replace('three', 'x')");
  assert.equal(none.error?.type, "ValueError");
  assert.match(none.error!.message, /\(got 0\)$/);
  const many = await s.exec("await (await open_file('note.md')).replace('two', 'x')");
  assert.equal(many.error?.type, "ValueError");
  assert.match(many.error!.message, /\(got 2\)$/);
  assert.equal(await Deno.readTextFile(join(s.workspace, "note.md")), "one two two\n");
  ok(await s.exec("await (await open_file('note.md')).replace('one', 'uno')"));
  assert.equal(await Deno.readTextFile(join(s.workspace, "note.md")), "uno two two\n");
});

// ---------------------------------------------------------------------------------------
// Host RPC dispatch

/** A host RPC of these tests: any params, any reply, served to a cell. */
function testRpc(
  name: string,
  handler: (params: Record<string, unknown>, ctx: RpcContext) => Promise<unknown>,
): BoundRpc[] {
  return bindRpcs([
    defineRpc({
      name,
      summary: "a test rpc",
      roles: ["workbench"],
      args: z.record(z.string(), z.unknown()),
      reply: z.unknown(),
      handler: (params, call: RpcCall<void>) => handler(params, call),
    }),
  ], undefined);
}

Deno.test("rpc dispatch answers unknown methods not_found and relays a handler's KlbrError code", async () => {
  const sends: { text: unknown; cell: string | null }[] = [];
  const logged: string[] = [];
  await using s = await session({
    rpc: testRpc("local.send", (params, ctx) => {
      sends.push({ text: params.text, cell: ctx.cell });
      if (params.text === "refuse") {
        return Promise.reject(new KlbrError("shutting_down", "cannot send: draining (got 1)"));
      }
      if (params.text === "crash") return Promise.reject(new Error("secret detail"));
      return Promise.resolve({ send_id: "snd_1", seq: 7 });
    }),
    log: createLogger({ format: "json", write: (line) => void logged.push(line) }),
  });
  const cell = newId("cell");
  const sent = await bounded(s.kernel.execute(cell, "await local.send('hi')"), "send");
  assert.equal(ok(sent), "{'send_id': 'snd_1', 'seq': 7}");
  assert.deepEqual(sends[0], { text: "hi", cell });
  const refused = await s.exec("await local.send('refuse')");
  assert.equal(
    refused.error?.message,
    "local.send failed (shutting_down): cannot send: draining (got 1)",
  );
  assert.deepEqual(logged, [], "a refusal with a code is an answer, not a host failure");
  const crashed = await s.exec("await local.send('crash')");
  assert.equal(
    crashed.error?.message,
    "local.send failed (internal): cannot call local.send: the host failed unexpectedly " +
      "(got Error); the daemon's log has the stack (event rpc.failed)",
  );
  assert.equal(logged.length, 1);
  assert.equal(JSON.parse(logged[0]).event, "rpc.failed");
  const unknown = await s.exec("from klbr import rpc\nawait rpc.call('no.such', {})");
  assert.equal(
    unknown.error?.message,
    'no.such failed (not_found): cannot call rpc: unknown method (got "no.such")',
  );
});

Deno.test("an rpc result too large for a frame reaches the cell as frame_oversize, and the worker goes on", async () => {
  await using s = await session({
    workbench: { cancelGraceMs: GRACE_MS, maxFrameBytes: 64 * 1024 },
    rpc: testRpc("big.result", () => Promise.resolve({ text: "x".repeat(100_000) })),
  });
  const big = await s.exec("from klbr import rpc\nawait rpc.call('big.result', {})");
  assert.equal(big.outcome, "error");
  assert.match(
    big.error?.message ?? "",
    /^big\.result failed \(frame_oversize\): cannot encode frame: body is larger than the maximum of 65536 bytes/,
  );
  // The reply that did not fit was never written: the channel and the worker are intact.
  assert.equal(ok(await s.exec("1 + 1")), "2");
  assert.equal(s.exits.length, 0);
});

Deno.test("`execute()` goes on when its onStream listener throws", async () => {
  await using s = await session();
  let calls = 0;
  const r = await s.exec("print('a')\nimport asyncio\nawait asyncio.sleep(0)\nprint('b')", {
    onStream: () => {
      calls++;
      throw new Error("a listener that fails");
    },
  });
  assert.equal(ok(r), null);
  assert.equal(r.stdout, "a\nb\n", "the capture is whole although the listener failed");
  assert.ok(calls >= 1, "the listener was called");
});

// ---------------------------------------------------------------------------------------
// Skills

Deno.test("skills: offered ids, help bodies, refusals, revision, and a mid-generation write", async () => {
  await using s = await session();
  const builtin = join(s.workspace, "skills");
  const managed = join(s.stateDir, "skills");
  const write = async (root: string, id: string, body: string) => {
    await Deno.mkdir(join(root, id), { recursive: true });
    await Deno.writeTextFile(join(root, id, "SKILL.md"), body);
  };
  const workspaceBody = "# workspace\n\nPaths are root-bound; use open_file.\n";
  await write(builtin, "workspace", workspaceBody);
  await write(builtin, "dup", "# dup\nbuiltin\n");
  await write(managed, "dup", "# dup\nmanaged\n");
  await write(builtin, "wrong", "# right\n");

  assert.equal(
    ok(await s.exec("import klbr.skills as skills\ndir(skills)")),
    "['delete', 'refused', 'revision', 'roots', 'workspace', 'write']",
  );
  const help = await s.exec("help(skills.workspace)");
  assert.ok(help.stdout.includes("Paths are root-bound; use open_file."), help.stdout);
  const refused = JSON.parse(
    (await s.exec("import json\nprint(json.dumps(skills.refused))")).stdout,
  );
  assert.deepEqual(refused.map((r: { id: string; root: string }) => [r.id, r.root]), [
    ["dup", builtin],
    ["dup", managed],
    ["wrong", builtin],
  ]);
  const revision = await skillsRevision({ workspace: workspaceBody });
  assert.equal(ok(await s.exec("skills.revision")), `'${revision}'`);
  assert.equal(s.generations[0].skillsRevision, revision);

  // Written during the generation: not offered until the next one.
  await write(managed, "later", "# later\nnew\n");
  await write(builtin, "workspace", workspaceBody + "More.\n");
  assert.equal(
    ok(await s.exec("dir(skills)")),
    "['delete', 'refused', 'revision', 'roots', 'workspace', 'write']",
  );
  assert.equal(ok(await s.exec("skills.revision")), `'${revision}'`);
  const record = await s.kernel.reset("skills changed");
  assert.equal(
    ok(await s.exec("import klbr.skills as skills\ndir(skills)")),
    "['delete', 'later', 'refused', 'revision', 'roots', 'workspace', 'write']",
  );
  assert.notEqual(record.skillsRevision, revision);
  assert.equal(ok(await s.exec("skills.revision")), `'${record.skillsRevision}'`);
});

// ---------------------------------------------------------------------------------------
// Generations and durable hooks

Deno.test("`reset()` records the generation with reason, revisions and heap not restored", async () => {
  const release = await Deno.makeTempDir({ prefix: "klbr-release-" });
  try {
    await using s = await session({
      behavior: () => ({ revision: "rel-7", path: release }),
      firstGeneration: 5,
    });
    await s.exec("x = 1");
    const { fingerprint, ...record } = await s.kernel.reset("operator reset");
    assert.deepEqual({ ...record, pid: 0 }, {
      generation: 6,
      reason: "operator reset",
      skillsRevision: await skillsRevision({}),
      behaviorRevision: "rel-7",
      heapRestored: false,
      pid: 0,
    });
    // What the new process loaded, with what it was given.
    assert.deepEqual(
      [fingerprint.role, fingerprint.generation, fingerprint.pid, fingerprint.skills],
      ["workbench", 6, record.pid, await skillsRevision({})],
    );
    assert.equal(fingerprint.release, "rel-7");
    assert.match(fingerprint.package, /^[0-9a-f]{64}$/);
    assert.deepEqual(s.generations.map((g) => [g.generation, g.reason]), [
      [5, "start"],
      [6, "operator reset"],
    ]);
    assert.equal(s.kernel.generation, 6);
    assert.equal((await s.exec("x")).error?.type, "NameError");
  } finally {
    await Deno.remove(release, { recursive: true });
  }
});

Deno.test("`execute()` awaits recordGeneration before sending the code", async () => {
  const generationReached = Promise.withResolvers<void>();
  const generationGate = Promise.withResolvers<void>();
  const order: string[] = [];
  await using s = await session({
    recordGeneration: async (g) => {
      order.push(`generation ${g.generation}`);
      generationReached.resolve();
      await generationGate.promise;
    },
  });
  const marker = join(s.workspace, "ran");
  const result = s.exec("open('ran', 'w').write('1')");
  await bounded(generationReached.promise, "recordGeneration");
  assert.deepEqual(order, ["generation 1"]);
  // The code is sent only after the generation is recorded, so the cell cannot have run.
  await assert.rejects(Deno.stat(marker), Deno.errors.NotFound);
  generationGate.resolve();
  assert.equal((await result).outcome, "ok");
  await Deno.stat(marker);
});

// ---------------------------------------------------------------------------------------
// Framing failures and worker death

Deno.test("garbage on the frame channel kills the worker and is reported as frame_oversize", async () => {
  await using s = await session();
  const pid = (await s.kernel.ready()).pid;
  const r = await s.exec(
    "import os, klbr.rpc\nos.write(klbr.rpc._bound._write.__self__.write_fd, b'\\xff\\xff\\xff\\xff')\n" +
      "import time\ntime.sleep(1000)",
  );
  assert.equal(r.outcome, "killed");
  assert.equal(r.error?.type, "frame_oversize");
  assert.match(
    r.error!.message,
    /^cannot execute workbench \d+: cannot decode frame: length prefix exceeds/,
  );
  assert.equal(s.exits[0].reason, "failed");
  assert.equal(s.exits[0].code, "frame_oversize");
  assert.deepEqual(await processGroupMembers(pid), []);
  assert.equal(ok(await s.exec("'replaced'")), "'replaced'");
  assert.match(s.generations[1].reason, /^failed: cannot decode frame: length prefix exceeds/);
});

/** A fake `klbr` package that answers with bad frames, for failures Python would not make. */
async function fakeRepo(body: string, options = { waitFirstHeader: true }): Promise<string> {
  const repo = await Deno.makeTempDir({ prefix: "klbr-fake-" });
  await Deno.mkdir(join(repo, "workbench", "klbr"), { recursive: true });
  await Deno.writeTextFile(join(repo, "workbench", "klbr", "__init__.py"), "");
  await Deno.writeTextFile(
    join(repo, "workbench", "klbr", "__main__.py"),
    "import json, os, struct, sys, time\n" +
      "out = sys.stdout.buffer\n" +
      "def frame(obj):\n" +
      "    b = json.dumps(obj).encode()\n" +
      "    out.write(struct.pack('>I', len(b)) + b)\n" +
      "    out.flush()\n" +
      "def read():\n" +
      "    n = struct.unpack('>I', sys.stdin.buffer.read(4))[0]\n" +
      "    return json.loads(sys.stdin.buffer.read(n))\n" +
      // Once the first request's header has arrived, that request is pending on the host.
      (options.waitFirstHeader ? "sys.stdin.buffer.read(4)\n" : "") +
      "sys.stderr.write('fake worker here\\n'); sys.stderr.flush()\n" +
      body + "\n" +
      "time.sleep(1000)\n",
  );
  return repo;
}

const BAD_FRAMES: [string, string, string][] = [
  ["bad JSON", "out.write(struct.pack('>I', 3) + b'{x}'); out.flush()", "frame_json"],
  ["bad UTF-8", "out.write(struct.pack('>I', 2) + b'\\xff\\xfe'); out.flush()", "frame_utf8"],
  ["an oversize length", "out.write(b'\\xff\\xff\\xff\\xff'); out.flush()", "frame_oversize"],
  ["an unknown kind", "frame({'kind': 'bogus', 'id': 'x'})", "frame_unknown_kind"],
  [
    "a host-only kind",
    "frame({'kind': 'execute', 'id': 'x', 'cell': 'c', 'code': ''})",
    "role_forbidden",
  ],
  ["a known kind with bad fields", "frame({'kind': 'stream', 'id': 'x'})", "frame_invalid"],
  [
    "a truncated frame and exit",
    "out.write(struct.pack('>I', 100) + b'abc'); out.flush(); os._exit(0)",
    "frame_truncated",
  ],
];

for (const [what, body, code] of BAD_FRAMES) {
  Deno.test(`a worker writing ${what} fails every pending request with worker_failed (${code})`, async () => {
    const repo = await fakeRepo(body);
    const cwd = await Deno.makeTempDir();
    try {
      let reported: WorkbenchExit | null = null;
      const wb = spawnWorkbench(PYTHON, { cwd, repoRoot: repo, onExit: (e) => reported = e });
      const ping = wb.ping({ timeoutMs: BOUND_MS });
      await assert.rejects(
        bounded(ping, "ping"),
        (e) =>
          isKlbrError(e, "worker_failed") && isKlbrError(e.cause, code as never) &&
          e.message === `cannot ping workbench ${wb.pid}: ${(e.cause as Error).message}`,
      );
      const exit = await bounded(wb.exited, "exit");
      assert.equal(exit.reason, "failed");
      assert.equal(exit.code, code);
      assert.deepEqual(reported, exit);
      assert.ok(exit.stderrTail.includes("fake worker here"));
      assert.equal(wb.alive, false);
      assert.deepEqual(await processGroupMembers(wb.pid), []);
      await assert.rejects(wb.ping(), (e) => isKlbrError(e, "worker_failed"));
    } finally {
      await Deno.remove(repo, { recursive: true });
      await Deno.remove(cwd, { recursive: true });
    }
  });
}

Deno.test("a cell's result is reported only after its cancelled RPC's cleanup has finished", async () => {
  // The fake answers in one ordered burst: rpc, rpc_cancel, the cell's reply, then the
  // ping's reply. When ping resolves the cell's reply has been read, yet the cell must not be
  // reported while the run's cleanup (here: held by a gate) is still going on.
  const repo = await fakeRepo(
    "ex = read(); pg = read()\n" +
      "frame({'kind': 'rpc', 'id': 'w1', 'parent': ex['id'], 'method': 'workspace.run', 'params': {}})\n" +
      "frame({'kind': 'rpc_cancel', 'id': 'w1'})\n" +
      "frame({'kind': 'ok', 'id': ex['id'], 'result': {'outcome': 'cancelled', 'value': None, " +
      "'stdout': '', 'stderr': '', 'error': None, 'wait': None, 'duration_ms': 1}})\n" +
      "frame({'kind': 'ok', 'id': pg['id'], 'result': {}})",
    { waitFirstHeader: false },
  );
  const cwd = await Deno.makeTempDir();
  const cleanup = Promise.withResolvers<void>();
  let cleaned = false;
  try {
    const wb = spawnWorkbench(PYTHON, {
      cwd,
      repoRoot: repo,
      rpc: testRpc("workspace.run", async (_params, ctx) => {
        if (!ctx.signal.aborted) {
          await new Promise((r) => ctx.signal.addEventListener("abort", r, { once: true }));
        }
        await cleanup.promise;
        cleaned = true;
        return null;
      }),
    });
    let reported = false;
    const cell = wb.execute("cell_x", "await run(['sleep', '1000'])").then((r) => {
      reported = true;
      assert.equal(cleaned, true, "reported before the run's cleanup finished");
      return r;
    });
    await bounded(wb.ping(), "ping");
    assert.equal(reported, false);
    cleanup.resolve();
    assert.equal((await bounded(cell, "cell")).outcome, "cancelled");
    await wb.kill("test over");
  } finally {
    await Deno.remove(repo, { recursive: true });
    await Deno.remove(cwd, { recursive: true });
  }
});

Deno.test("a worker that exits unexpectedly is reported with its exit code and last word", async () => {
  const repo = await fakeRepo(
    "frame({'kind': 'error', 'id': '', 'code': 'frame_invalid', 'message': 'host spoke nonsense'})\nos._exit(3)",
  );
  const cwd = await Deno.makeTempDir();
  try {
    const wb = spawnWorkbench(PYTHON, { cwd, repoRoot: repo });
    await assert.rejects(
      bounded(wb.ping({ timeoutMs: BOUND_MS }), "ping"),
      (e) => isKlbrError(e, "worker_failed") && isKlbrError(e.cause, "worker_failed"),
    );
    const exit = await wb.exited;
    assert.equal(exit.exitCode, 3);
    assert.equal(
      exit.message,
      "cannot use workbench: the worker exited with code 3 after reporting frame_invalid: host spoke nonsense",
    );
  } finally {
    await Deno.remove(repo, { recursive: true });
    await Deno.remove(cwd, { recursive: true });
  }
});

Deno.test("a worker that stops answering ping is declared dead with worker_timeout", async () => {
  const repo = await fakeRepo("pass");
  const cwd = await Deno.makeTempDir();
  try {
    const wb = spawnWorkbench(PYTHON, { cwd, repoRoot: repo });
    await assert.rejects(
      bounded(wb.ping({ timeoutMs: 300 }), "ping"),
      (e) =>
        isKlbrError(e, "worker_failed") && isKlbrError(e.cause, "worker_timeout") &&
        (e.cause as Error).message ===
          `cannot ping workbench: no reply within 300 ms (got pid ${wb.pid})`,
    );
    const exit = await wb.exited;
    assert.equal(exit.code, "worker_timeout");
    assert.equal(exit.signal, "SIGKILL");
    assert.deepEqual(await processGroupMembers(wb.pid), []);
  } finally {
    await Deno.remove(repo, { recursive: true });
    await Deno.remove(cwd, { recursive: true });
  }
});

Deno.test("`spawnWorkbench()` refuses bad settings and a missing interpreter", async () => {
  const cwd = await Deno.makeTempDir();
  try {
    assert.throws(
      () => spawnWorkbench(PYTHON, { cwd, repoRoot: REPO, maxFrameBytes: 10 }),
      (e) =>
        isKlbrError(e, "invalid_config") &&
        e.message.startsWith("cannot spawn workbench: maxFrameBytes"),
    );
    assert.throws(
      () => spawnWorkbench("klbr-no-such-python", { cwd, repoRoot: REPO }),
      (e) =>
        isKlbrError(e, "not_found") &&
        e.message ===
          `cannot spawn workbench: interpreter or workspace not found (got "klbr-no-such-python" in ${cwd})`,
    );
    await assert.rejects(
      resolvePython("klbr-no-such-python"),
      (e) =>
        isKlbrError(e, "not_found") &&
        e.message === 'cannot find python: it does not run (got "klbr-no-such-python")',
    );
  } finally {
    await Deno.remove(cwd, { recursive: true });
  }
});

// ---------------------------------------------------------------------------------------
// Process model

Deno.test("the worker has a cleared environment, its cwd in the workspace and its own group", async () => {
  await using s = await session({
    workbench: { cancelGraceMs: GRACE_MS, env: { PATH: "/usr/bin:/bin" } },
  });
  const env = JSON.parse(
    (await s.exec("import os, json\nprint(json.dumps(dict(os.environ)))")).stdout,
  );
  assert.deepEqual(env, {
    PATH: "/usr/bin:/bin",
    PYTHONPATH: join(REPO, "workbench"),
    PYTHONDONTWRITEBYTECODE: "1",
    PYTHONUNBUFFERED: "1",
    LANG: "C.UTF-8",
    HOME: s.workspace,
  });
  assert.equal(ok(await s.exec("os.getcwd()")), `'${s.workspace}'`);
  const pid = s.kernel.current!.pid;
  assert.equal(ok(await s.exec("(os.getpid(), os.getpgid(0))")), `(${pid}, ${pid})`);
  assert.deepEqual(await processGroupMembers(pid), [pid]);
});

Deno.test("`shutdown()` ends the worker cleanly and refuses later use", async () => {
  const s = await session();
  try {
    const pid = (await s.kernel.ready()).pid;
    await s.kernel.shutdown();
    assert.equal(s.exits[0].reason, "shutdown");
    assert.equal(s.exits[0].exitCode, 0);
    assert.deepEqual(await processGroupMembers(pid), []);
    await assert.rejects(
      s.kernel.execute(newId("cell"), "1"),
      (e) => isKlbrError(e, "shutting_down"),
    );
  } finally {
    await Deno.remove(s.dir, { recursive: true });
  }
});

Deno.test("`hook()` returns a hook's value and maps its failure to hook_failed", async () => {
  const release = await Deno.makeTempDir({ prefix: "klbr-release-" });
  await Deno.writeTextFile(join(release, "turn.py"), "def next(**kw):\n    return {'got': kw}\n");
  await Deno.writeTextFile(
    join(release, "model.py"),
    "def plan(**kw):\n    raise RuntimeError('nope')\n",
  );
  try {
    await using s = await session({ behavior: () => ({ revision: "r1", path: release }) });
    assert.deepEqual(await s.kernel.hook("turn.next", { a: 1 }), { got: { a: 1 } });
    await assert.rejects(
      s.kernel.hook("model.plan", {}),
      (e) =>
        isKlbrError(e, "hook_failed") && e.message.startsWith("cannot run hook: hook_failed: "),
    );
  } finally {
    await Deno.remove(release, { recursive: true });
  }
});

// ---------------------------------------------------------------------------------------
// deno task example

Deno.test("`runExample()` prints each step of the demonstration", async () => {
  const lines: string[] = [];
  const report = await bounded(
    runExample({ repoRoot: REPO, python: PYTHON, print: (l) => lines.push(l) }),
    "the example",
    60_000,
  );
  const out = lines.join("\n");
  for (
    const step of ["[heap]", "[open_file]", "[ls]", "[search]", "[run]", "[cancel]", "[reset]"]
  ) {
    assert.ok(out.includes(step), `missing ${step} in:\n${out}`);
  }
  assert.ok(out.includes("value=42"));
  assert.ok(out.includes("value='hello, workbench\\n'"));
  assert.ok(out.includes("notes/hello.md:1: hello, workbench"));
  assert.ok(out.includes("value=(3, 'run says hi\\n')"));
  assert.ok(out.includes("outcome=cancelled"));
  assert.ok(out.includes("NameError: name 'counter' is not defined"));
  assert.deepEqual(report.generations, [1, 2]);
  assert.deepEqual(report.steps.map((s) => s.outcome), [
    "ok",
    "ok",
    "ok",
    "ok",
    "ok",
    "ok",
    "ok",
    "cancelled",
    "ok",
    "ok",
    "error",
  ]);
});
