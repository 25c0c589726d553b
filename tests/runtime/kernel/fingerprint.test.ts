// Process-role fingerprints against real Python processes: what each role loaded, and which
// roles a change replaces — a shared dependency (the package, the interpreter) every role, a
// source-only hook change only the hook worker, with the workbench heap kept.

import assert from "node:assert/strict";
import { join } from "node:path";
import { SILENT_LOGGER } from "../../../runtime/core/mod.ts";
import {
  type GenerationRecord,
  KernelSupervisor,
  packageHash,
  replaceStaleRoles,
  resolvePython,
  type RoleAtBoundary,
  skillRoots,
} from "../../../runtime/kernel/mod.ts";
import { REPO_ROOT } from "../../_helpers/daemon.ts";

const PYTHON = (await resolvePython("python3")).executable;
const BEHAVIOR = { revision: "defaults", path: join(REPO_ROOT, "behavior") };

/** A checkout holding a copy of the workbench package, and an interpreter of its own. */
async function withCopies(
  fn: (dirs: { repo: string; python: string; workspace: string }) => Promise<void>,
) {
  const root = await Deno.makeTempDir({ prefix: "klbr-fp-" });
  try {
    const repo = join(root, "repo");
    await copyDir(join(REPO_ROOT, "workbench", "klbr"), join(repo, "workbench", "klbr"));
    const python = join(root, "python3");
    await Deno.copyFile(PYTHON, python);
    await Deno.chmod(python, 0o755);
    const workspace = join(root, "ws");
    await Deno.mkdir(workspace);
    await fn({ repo, python, workspace });
  } finally {
    await Deno.remove(root, { recursive: true });
  }
}

async function copyDir(from: string, to: string) {
  await Deno.mkdir(to, { recursive: true });
  for await (const entry of Deno.readDir(from)) {
    if (entry.isDirectory && entry.name !== "__pycache__") {
      await copyDir(join(from, entry.name), join(to, entry.name));
    } else if (entry.isFile) await Deno.copyFile(join(from, entry.name), join(to, entry.name));
  }
}

/** The two roles of a session, on the copies; `records` collects every generation. */
function roles(dirs: { repo: string; python: string; workspace: string }) {
  const records: GenerationRecord[] = [];
  const make = (role: "workbench" | "hooks") =>
    new KernelSupervisor({
      python: dirs.python,
      session: "default",
      role,
      workspace: dirs.workspace,
      repoRoot: dirs.repo,
      skillRoots: skillRoots({
        repoRoot: dirs.workspace,
        stateDir: join(dirs.workspace, "state"),
      }),
      behavior: () => BEHAVIOR,
      recordGeneration: (record) => void records.push(record),
    });
  const kernel = make("workbench");
  const hooks = make("hooks");
  const boundary: RoleAtBoundary[] = [
    { role: "hooks", supervisor: hooks, replace: "retire" },
    { role: "workbench", supervisor: kernel, replace: "reset" },
  ];
  return { kernel, hooks, boundary, records, log: SILENT_LOGGER };
}

Deno.test("`packageHash()` computes what a worker reports it loaded", async () => {
  await withCopies(async (dirs) => {
    const { kernel, hooks, records } = roles(dirs);
    try {
      await kernel.ready();
      await hooks.ready();
      const hash = await packageHash(dirs.repo);
      assert.equal(hash, await packageHash(REPO_ROOT), "the copy is the checkout's package");
      assert.deepEqual(records.map((r) => [r.fingerprint.role, r.fingerprint.package]), [
        ["workbench", hash],
        ["hooks", hash],
      ]);
      const f = kernel.fingerprint!;
      assert.equal(f.executable, dirs.python);
      assert.match(f.version, /^3\.\d+\.\d+$/);
      assert.equal(f.release, "defaults");
      assert.equal(f.generation, 1);
      assert.equal(f.pid, kernel.current!.pid);
    } finally {
      await kernel.shutdown();
      await hooks.shutdown();
    }
  });
});

Deno.test("a source-only change replaces only the hook worker; its running call finishes; the heap lives", async () => {
  await withCopies(async (dirs) => {
    const { kernel, hooks, boundary } = roles(dirs);
    const slow = join(dirs.workspace, "slow");
    await Deno.mkdir(slow);
    await Deno.writeTextFile(
      join(slow, "turn.py"),
      "import asyncio\nasync def next(**kw):\n    await asyncio.sleep(0.3)\n    return {'action': 'wait'}\n",
    );
    try {
      await kernel.execute("cell_1", "x = 41");
      const first = await hooks.ready();
      // A call is running on the old worker when the hook source changes (an activation).
      const running = hooks.hook("turn.next", {}, { behavior: { revision: "slow", path: slow } });
      hooks.retire("behaviour activated");
      assert.deepEqual(await running, { action: "wait" }, "the running call finished");
      await first.exited;
      const again = await hooks.hook("model.plan", {});
      assert.deepEqual(again, { route: "main" });
      assert.notEqual(hooks.current!.pid, first.pid);
      assert.equal(hooks.generation, 2);
      // Nothing on disk changed: the boundary replaces no one, the heap is still there.
      assert.deepEqual(await replaceStaleRoles(hooks, boundary), []);
      assert.equal(kernel.generation, 1);
      assert.equal((await kernel.execute("cell_2", "x + 1")).value, "42");
    } finally {
      await kernel.shutdown();
      await hooks.shutdown();
    }
  });
});

Deno.test("a workbench package change replaces the workbench and the hook worker at the next boundary", async () => {
  await withCopies(async (dirs) => {
    const { kernel, hooks, boundary, records } = roles(dirs);
    try {
      await kernel.execute("cell_1", "x = 41");
      await hooks.hook("turn.next", {});
      const before = await packageHash(dirs.repo);
      await Deno.writeTextFile(join(dirs.repo, "workbench", "klbr", "local.py"), "\n# changed\n", {
        append: true,
      });
      const after = await packageHash(dirs.repo);
      assert.notEqual(after, before);
      const replaced = await replaceStaleRoles(hooks, boundary);
      assert.deepEqual(replaced.map((r) => r.role), ["hooks", "workbench"]);
      assert.match(replaced[1].change, /^the workbench package changed \(/);
      assert.equal(kernel.generation, 2);
      assert.equal((await kernel.execute("cell_2", "'x' in globals()")).value, "False");
      await hooks.hook("turn.next", {});
      assert.deepEqual(
        records.map((r) => [r.fingerprint.role, r.generation, r.fingerprint.package === after]),
        [["workbench", 1, false], ["hooks", 1, false], ["workbench", 2, true], ["hooks", 2, true]],
      );
      assert.match(records[2].reason, /^the workbench package changed/);
      // Once every role runs what is on disk, the next boundary replaces nothing.
      assert.deepEqual(await replaceStaleRoles(hooks, boundary), []);
    } finally {
      await kernel.shutdown();
      await hooks.shutdown();
    }
  });
});

Deno.test("an interpreter change replaces every role at the next boundary", async () => {
  await withCopies(async (dirs) => {
    const { kernel, hooks, boundary, records } = roles(dirs);
    try {
      await kernel.execute("cell_1", "x = 1");
      await hooks.hook("turn.next", {});
      const old = records[0].fingerprint.interpreter;
      // A reinstall of the same path: the file's identity changes.
      const later = new Date(Date.now() + 60_000);
      await Deno.utime(dirs.python, later, later);
      const replaced = await replaceStaleRoles(hooks, boundary);
      assert.deepEqual(replaced.map((r) => r.role), ["hooks", "workbench"]);
      assert.match(replaced[0].change, /^the interpreter changed \(/);
      assert.notEqual(kernel.fingerprint!.interpreter, old);
      assert.equal(kernel.generation, 2);
    } finally {
      await kernel.shutdown();
      await hooks.shutdown();
    }
  });
});
