/**
 * The limits of a confined process tree, with the real kernel: the cgroups this host offers
 * (v1 or v2) stop a fork bomb and an allocation past the memory limit, the tree that reached a
 * limit ends naming it, its cgroup is removed with it; under rlimits the wrapper sets the
 * address space and file size limits.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { isKlbrError, newId } from "../../../runtime/core/mod.ts";
import { KernelSupervisor, resolvePython } from "../../../runtime/kernel/mod.ts";
import { runInWorkspace } from "../../../runtime/workspace/mod.ts";
import {
  closeLimits,
  confinedCommand,
  type LimitSettings,
  type LimitsPlan,
  planLimits,
  type SandboxBase,
  seccompBytes,
} from "../../../runtime/sandbox/mod.ts";

const REPO = fileURLToPath(new URL("../../..", import.meta.url));
const PYTHON = await resolvePython("python3");
const SETTINGS: LimitSettings = {
  maxProcesses: 32,
  memoryBytes: 160 * 2 ** 20,
  cpuWeight: 50,
  fileSizeBytes: 2 ** 20,
};

/** A workspace, a state directory and the filter, in one temp dir (removed after). */
async function layout() {
  const dir = await Deno.realPath(await Deno.makeTempDir({ prefix: "klbr-limits-" }));
  const workspace = join(dir, "ws");
  const stateDir = join(dir, "state");
  await Deno.mkdir(workspace);
  await Deno.mkdir(stateDir);
  await Deno.writeFile(join(stateDir, "seccomp.bpf"), seccompBytes());
  const base = async (rlimitsOnly?: string): Promise<SandboxBase> => ({
    bwrap: "bwrap",
    network: false,
    readOnly: [PYTHON.home],
    stateDir,
    userns: true,
    seccomp: join(stateDir, "seccomp.bpf"),
    protect: [],
    limits: await planLimits(SETTINGS, { stateDir, rlimitsOnly }),
  });
  return {
    dir,
    workspace,
    stateDir,
    base,
    [Symbol.asyncDispose]: () => Deno.remove(dir, { recursive: true }),
  };
}

/** The directories under the plan's parents, read by a shell (Deno may not read /sys). */
async function leaves(parents: Record<string, string>): Promise<string[]> {
  const out = await new Deno.Command("sh", {
    args: ["-c", 'for p; do ls -d "$p"/*/ 2>/dev/null; done', "sh", ...Object.values(parents)],
  }).output();
  return new TextDecoder().decode(out.stdout).split("\n").filter(Boolean);
}

Deno.test("a confined `workspace.run` that reaches the process limit is killed and named for it; its cgroup goes with it", async () => {
  await using at = await layout();
  const base = await at.base();
  assert.match(base.limits!.mode, /^cgroup[12]$/, base.limits!.reason);
  try {
    const bomb = [
      "import os, time",
      "for i in range(500):",
      "    try:",
      "        if os.fork() == 0:",
      "            time.sleep(30)",
      "            os._exit(0)",
      "    except OSError:",
      "        time.sleep(0.05)",
    ].join("\n");
    await assert.rejects(
      runInWorkspace({ argv: ["python3", "-c", bomb], timeout_s: 60 }, {
        root: at.workspace,
        sandbox: base,
      }),
      (e) =>
        isKlbrError(e, "limit_reached") &&
        e.message ===
          'cannot run: the program reached the process limit (32), and its processes were killed (got "python3")',
    );
    assert.deepEqual(await leaves(base.limits!.parents), []);
    // A program within the limits runs as before.
    const ok = await runInWorkspace({ argv: ["sh", "-c", "echo fine"] }, {
      root: at.workspace,
      sandbox: base,
    });
    assert.equal(ok.exit_code, 0);
  } finally {
    await closeLimits(base.limits!);
  }
});

Deno.test("a cell that allocates past the memory limit ends killed, naming the limit; the next cell runs in a new generation", async () => {
  await using at = await layout();
  const base = await at.base();
  const kernel = new KernelSupervisor({
    python: PYTHON.executable,
    session: "test",
    workspace: at.workspace,
    repoRoot: REPO,
    skillRoots: { builtinRoot: join(at.dir, "none"), managedRoot: join(at.dir, "none2") },
    stateDir: at.stateDir,
    sandbox: base,
    recordGeneration: () => {},
  });
  try {
    const hog = "blocks = []\nfor i in range(40):\n    blocks.append(b'x' * (16 << 20))";
    const result = await kernel.execute(newId("cell"), hog);
    assert.equal(result.outcome, "killed", JSON.stringify(result));
    assert.equal(
      result.error?.message,
      "the workbench was killed: the cell reached the memory limit (160 MiB)",
    );
    const next = await kernel.execute(newId("cell"), "print('after')");
    assert.equal(next.stdout, "after\n", JSON.stringify(next.error));
    assert.equal(kernel.generation, 2);
  } finally {
    await kernel.shutdown();
    await closeLimits(base.limits!);
  }
  assert.deepEqual(await leaves(base.limits!.parents), []);
});

Deno.test("under rlimits the wrapper sets each process's address space and file size limits", async () => {
  await using at = await layout();
  const base = await at.base("the test asks for them");
  assert.equal(base.limits!.mode, "rlimit");
  assert.match(
    base.limits!.reason,
    /^rlimits, since the test asks for them: 160 MiB address space a process, /,
  );
  const { program, args, jail } = confinedCommand(base, {
    command: "cat",
    args: ["/proc/self/limits"],
    cwd: at.workspace,
    readWrite: [at.workspace],
    readOnly: [],
  });
  const out = await new Deno.Command(program, { args, stdout: "piped" }).output();
  await jail?.release();
  const limits = new TextDecoder().decode(out.stdout);
  assert.match(limits, new RegExp(`^Max address space\\s+${160 * 2 ** 20}\\s`, "m"));
  assert.match(limits, new RegExp(`^Max file size\\s+${2 ** 20}\\s`, "m"));
});

const BASH = await new Deno.Command("bash", { args: ["-c", "exit 0"] }).output()
  .then((out) => out.success, () => false);

Deno.test({
  name: BASH
    ? "under rlimits the wrapper sets the process limit whether /bin/sh is dash or bash (Fedora, Arch)"
    : "under rlimits the wrapper sets the process limit: skipped, bash is not installed",
  ignore: !BASH,
  fn: async () => {
    await using at = await layout();
    // A daemon that is not root: RLIMIT_NPROC binds it, so the plan sets one.
    const plan: LimitsPlan = {
      mode: "rlimit",
      reason: "the test asks for them",
      settings: SETTINGS,
      parents: {},
      swapFile: false,
      cpu: false,
      nproc: 5000,
      next: 1,
    };
    const base = { ...await at.base("the test asks for them"), limits: plan };
    const { args } = confinedCommand(base, {
      command: "cat",
      args: ["/proc/self/limits"],
      cwd: at.workspace,
      readWrite: [at.workspace],
      readOnly: [],
    });
    // dash spells the process limit -p; bash (POSIX mode, as /bin/sh) spells it -u.
    for (const shell of [["/bin/sh"], ["bash", "--posix"]]) {
      const out = await new Deno.Command(shell[0], {
        args: [...shell.slice(1), ...args],
        stdout: "piped",
        stderr: "piped",
      }).output();
      const said = new TextDecoder().decode(out.stderr);
      assert.equal(out.code, 0, `${shell.join(" ")}: ${said}`);
      const limits = new TextDecoder().decode(out.stdout);
      assert.match(limits, /^Max processes\s+5000\s+5000\s/m, shell.join(" "));
      assert.match(limits, new RegExp(`^Max file size\\s+${2 ** 20}\\s`, "m"), shell.join(" "));
      assert.match(limits, new RegExp(`^Max address space\\s+${160 * 2 ** 20}\\s`, "m"));
    }
  },
});
