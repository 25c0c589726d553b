/**
 * Bubblewrap confinement of the workbench and `workspace.run`, with the real `bwrap` and a
 * real Python: what a confined child sees, the order of the binds that hide the state
 * directory, the probe's answers where bwrap cannot run, and the programs list.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createLogger, isKlbrError, newId } from "../../../runtime/core/mod.ts";
import { KernelSupervisor, resolvePython } from "../../../runtime/kernel/mod.ts";
import { runInWorkspace } from "../../../runtime/workspace/mod.ts";
import {
  bwrapArgs,
  confinedCommand,
  prepareConfinement,
  probeCell,
  probeSandbox,
  protectedPaths,
  refuseProtected,
  requireSandbox,
  type SandboxBase,
  seccompBytes,
} from "../../../runtime/sandbox/mod.ts";

const REPO = fileURLToPath(new URL("../../..", import.meta.url));
const PYTHON = await resolvePython("python3");
/** The seccomp filter, written once for every test of this file (removed at the end). */
const FILTER_DIR = await Deno.makeTempDir({ prefix: "klbr-filter-" });
const FILTER = join(FILTER_DIR, "seccomp.bpf");
await Deno.writeFile(FILTER, seccompBytes());
globalThis.addEventListener("unload", () => Deno.removeSync(FILTER_DIR, { recursive: true }));
const BASE: SandboxBase = {
  bwrap: "bwrap",
  network: false,
  readOnly: [PYTHON.home],
  stateDir: "/nonexistent",
  userns: true,
  seccomp: FILTER,
  protect: [],
  limits: null,
};

const text = (b64: string) =>
  new TextDecoder().decode(Uint8Array.from(atob(b64), (c) => c.charCodeAt(0)));

/** A temp dir (real path) holding a workspace, a state directory and an outside file. */
async function layout(stateInside = false) {
  const dir = await Deno.realPath(await Deno.makeTempDir({ prefix: "klbr-sandbox-" }));
  const workspace = join(dir, "ws");
  const stateDir = stateInside ? join(workspace, ".klbr") : join(dir, "state");
  const outside = join(dir, "outside");
  await Deno.mkdir(workspace, { recursive: true });
  await Deno.mkdir(join(stateDir, "releases", "r1"), { recursive: true });
  await Deno.mkdir(outside);
  await Deno.writeTextFile(join(stateDir, "operator.token"), "secret\n");
  await Deno.writeTextFile(join(stateDir, "releases", "r1", "attention.py"), "# release\n");
  await Deno.writeTextFile(join(outside, "secret.txt"), "secret\n");
  return {
    dir,
    workspace,
    stateDir,
    outside,
    base: { ...BASE, stateDir },
    [Symbol.asyncDispose]: () => Deno.remove(dir, { recursive: true }),
  };
}

/** The command lines of every live (non-zombie) process: to find a marker wherever it runs. */
async function processArgs(): Promise<string> {
  const out = await new Deno.Command("ps", { args: ["-e", "-o", "stat=,args="] }).output();
  return new TextDecoder().decode(out.stdout).split("\n")
    .filter((line) => !line.trim().startsWith("Z")).join("\n");
}

Deno.test("`bwrapArgs()` binds the system read-only, a private /tmp first, and hides a state directory inside the workspace", () => {
  const args = bwrapArgs({ ...BASE, stateDir: "/w/.klbr" }, {
    command: "/py/bin/python3",
    args: ["-m", "klbr"],
    cwd: "/w",
    readWrite: ["/w"],
    readOnly: ["/w/.klbr/releases/r1", "/w/skills", "/repo/workbench"],
  });
  const at = (...needle: string[]) => {
    const i = args.findIndex((_: string, k: number) => needle.every((n, j) => args[k + j] === n));
    assert.ok(i >= 0, `missing ${needle.join(" ")} in ${args.join(" ")}`);
    return i;
  };
  assert.ok(at("--ro-bind-try", "/usr", "/usr") < at("--tmpfs", "/tmp"));
  assert.equal(at("--proc", "/proc") + 2, at("--remount-ro", "/proc"), "/proc read-only");
  assert.ok(at("--tmpfs", "/tmp") < at("--bind", "/w", "/w"), "/tmp before a workspace in /tmp");
  assert.ok(at("--bind", "/w", "/w") < at("--tmpfs", "/w/.klbr"), "the state hidden over it");
  assert.ok(
    at("--tmpfs", "/w/.klbr") < at("--ro-bind-try", "/w/.klbr/releases/r1", "/w/.klbr/releases/r1"),
  );
  assert.ok(
    at("--ro-bind-try", "/w/.klbr/releases/r1", "/w/.klbr/releases/r1") <
      at("--remount-ro", "/w/.klbr"),
  );
  at("--ro-bind-try", "/repo/workbench", "/repo/workbench");
  // Inside the read-write workspace already, a skills root is not bound again.
  assert.ok(!args.includes("/w/skills"));
  for (const flag of ["--unshare-pid", "--unshare-net", "--die-with-parent", "--new-session"]) {
    assert.ok(args.includes(flag), flag);
  }
  assert.deepEqual(args.slice(-4), ["--", "/py/bin/python3", "-m", "klbr"]);
  assert.ok(!args.includes("/etc/shadow") && !args.includes("/etc"), "no /etc beyond the list");
  const networked = bwrapArgs({ ...BASE, network: true }, {
    command: "x",
    args: [],
    cwd: "/",
    readWrite: [],
    readOnly: [],
  });
  assert.ok(!networked.includes("--unshare-net"));
});

Deno.test("`probeSandbox()` confines here, and names why where bwrap is missing or fails", async () => {
  const options = { python: PYTHON.executable, readOnly: [PYTHON.home], network: false };
  assert.deepEqual(await probeSandbox({ bwrap: "bwrap", ...options }), {
    mode: "bwrap",
    reason: null,
    network: false,
    userns: true,
    usernsReason: null,
  });
  assert.deepEqual(await probeSandbox({ bwrap: "/nonexistent/bwrap", ...options }), {
    mode: "none",
    reason: "bubblewrap is not installed (no /nonexistent/bwrap; Debian package bubblewrap)",
    network: true,
    userns: false,
    usernsReason: null,
  });
  // A bwrap that cannot create namespaces fails the same way `false` does.
  const failing = await probeSandbox({ bwrap: "false", ...options });
  assert.equal(failing.mode, "none");
  assert.equal(failing.reason, "false cannot confine the workbench here (exit 1: no message)");
  requireSandbox(
    { mode: "bwrap", reason: null, network: false, userns: true, usernsReason: null },
    "required",
  );
  requireSandbox(failing, "auto");
  assert.throws(
    () => requireSandbox(failing, "required"),
    (e) => isKlbrError(e, "sandbox_unavailable"),
  );
});

Deno.test("a confined workbench writes its workspace and sees neither the state directory, outside files, the host's processes nor its network", async () => {
  await using at = await layout(true);
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  const kernel = new KernelSupervisor({
    python: PYTHON.executable,
    session: "test",
    workspace: at.workspace,
    repoRoot: REPO,
    skillRoots: {
      builtinRoot: join(at.workspace, "skills"),
      managedRoot: join(at.stateDir, "skills"),
    },
    behavior: () => ({ revision: "r1", path: join(at.stateDir, "releases", "r1") }),
    stateDir: at.stateDir,
    sandbox: at.base,
    recordGeneration: () => {},
  });
  try {
    const code = [
      "import json, os, socket, subprocess",
      "def attempt(fn):",
      "    try:",
      "        return ['allowed', repr(fn())[:60]]",
      "    except Exception as e:",
      "        return [type(e).__name__, str(e)[:80]]",
      "open('note.txt', 'w').write('mine')",
      "subprocess.Popen(['setsid', 'sleep', '31337'])",
      "print(json.dumps({",
      `  'token': attempt(lambda: open(${
        JSON.stringify(join(at.stateDir, "operator.token"))
      }).read()),`,
      `  'release': attempt(lambda: open(${
        JSON.stringify(join(at.stateDir, "releases", "r1", "attention.py"))
      }).read()),`,
      `  'release_write': attempt(lambda: open(${
        JSON.stringify(join(at.stateDir, "releases", "r1", "x"))
      }, 'w')),`,
      `  'outside': attempt(lambda: open(${
        JSON.stringify(join(at.outside, "secret.txt"))
      }).read()),`,
      `  'port': attempt(lambda: socket.create_connection(('127.0.0.1', ${port}), timeout=2)),`,
      "  'pids': sorted(int(p) for p in os.listdir('/proc') if p.isdigit())[:3],",
      "  'shadow': attempt(lambda: open('/etc/shadow').read()),",
      "}))",
    ].join("\n");
    const result = await kernel.execute(newId("cell"), code);
    assert.equal(result.outcome, "ok", JSON.stringify(result.error));
    const seen = JSON.parse(result.stdout);
    assert.equal(seen.token[0], "FileNotFoundError", "the state directory is empty");
    assert.deepEqual(seen.release, ["allowed", "'# release\\n'"], "the release is bound");
    assert.equal(seen.release_write[0], "OSError", "read-only");
    assert.equal(seen.outside[0], "FileNotFoundError");
    assert.equal(seen.port[0], "ConnectionRefusedError", "a network of its own");
    assert.deepEqual(seen.pids.slice(0, 2), [1, 2], "a PID namespace of its own");
    assert.equal(seen.shadow[0], "FileNotFoundError", "only the listed files of /etc");
    assert.equal(await Deno.readTextFile(join(at.workspace, "note.txt")), "mine");
    assert.match(await processArgs(), /sleep 31337/);
  } finally {
    await kernel.shutdown();
    listener.close();
  }
  // Even a process that left the group (setsid) dies with the sandbox.
  assert.doesNotMatch(await processArgs(), /sleep 31337/);
});

Deno.test("a confined `workspace.run` writes the root only, loses what it leaves behind, and reports a missing or non-executable program", async () => {
  await using at = await layout();
  const r = await runInWorkspace({
    argv: [
      "sh",
      "-c",
      `echo ok > made.txt; cat ${join(at.outside, "secret.txt")} ${
        join(at.stateDir, "operator.token")
      }; setsid sleep 31338 & echo done`,
    ],
  }, { root: at.workspace, sandbox: at.base });
  assert.equal(await Deno.readTextFile(join(at.workspace, "made.txt")), "ok\n");
  assert.equal(text(r.stdout_b64), "done\n");
  assert.match(text(r.stderr_b64), /secret\.txt: No such file or directory/);
  assert.match(text(r.stderr_b64), /operator\.token: No such file or directory/);
  assert.doesNotMatch(await processArgs(), /sleep 31338/);
  await assert.rejects(
    runInWorkspace({ argv: ["klbr-no-such-program"] }, { root: at.workspace, sandbox: at.base }),
    (e) =>
      isKlbrError(e, "not_found") &&
      e.message ===
        'cannot run: program not found on PATH or at that path (got "klbr-no-such-program")',
  );
  // bwrap's own execvp failure, not the program's exit 1 (before, exit_code 1 and bwrap's line).
  await Deno.writeTextFile(join(at.workspace, "build.sh"), "#!/bin/sh\necho built\n");
  await assert.rejects(
    runInWorkspace({ argv: ["./build.sh"] }, { root: at.workspace, sandbox: at.base }),
    (e) =>
      isKlbrError(e, "path_invalid") &&
      e.message ===
        'cannot run: the program is a directory or lacks the execute permission (got "./build.sh"); chmod +x a script, or name its interpreter first (["sh", "build.sh"])',
  );
});

Deno.test("a confined `workspace.run` looks a program up on the PATH's absolute directories only: a workspace file of a listed program's name never runs", async () => {
  await using at = await layout();
  // bwrap's execvp reads an empty or `.` entry as the working directory, the workspace.
  await Deno.writeTextFile(join(at.workspace, "echo"), "#!/bin/sh\necho EVIL\n");
  await Deno.chmod(join(at.workspace, "echo"), 0o755);
  const r = await runInWorkspace({ argv: ["echo", "hi"] }, {
    root: at.workspace,
    sandbox: at.base,
    programs: ["echo"],
    env: { PATH: ":.:/usr/bin:/bin" },
  });
  assert.equal(text(r.stdout_b64), "hi\n");
});

Deno.test("`runInWorkspace()` starts listed programs only and never runs in the state directory", async () => {
  await using at = await layout(true);
  await Deno.mkdir(join(at.workspace, "src"));
  const ok = await runInWorkspace({ argv: ["echo", "hi"] }, {
    root: at.workspace,
    programs: ["echo"],
  });
  assert.equal(text(ok.stdout_b64), "hi\n");
  for (const argv of [["python3", "-c", "1"], ["kill", "-0", "1"], ["ps"], ["/bin/echo", "x"]]) {
    await assert.rejects(
      runInWorkspace({ argv }, { root: at.workspace, programs: ["echo"] }),
      (e) =>
        isKlbrError(e, "forbidden") &&
        e.message ===
          `cannot run: the host may not start this program (got ${
            JSON.stringify(argv[0])
          }); KLBR_RUN_PROGRAMS allows echo`,
    );
  }
  await assert.rejects(
    runInWorkspace({ argv: ["ls"], cwd: join(at.stateDir, "releases") }, {
      root: at.workspace,
      deny: [at.stateDir],
    }),
    (e) =>
      isKlbrError(e, "path_escape") &&
      e.message.startsWith("cannot run: cwd is inside the state directory"),
  );
  const inSrc = await runInWorkspace({ argv: ["pwd"], cwd: join(at.workspace, "src") }, {
    root: at.workspace,
    deny: [at.stateDir],
  });
  assert.equal(text(inSrc.stdout_b64).trim(), join(at.workspace, "src"));
});

Deno.test("`bwrapArgs()` drops every capability in a user namespace, opens the seccomp filter, and keeps protected paths read-only inside the workspace", () => {
  const args = bwrapArgs({
    ...BASE,
    protect: ["/w/.git/hooks", "/w/.git/config", "/w/main.ts", "/w/src/klbr/runtime", "/else/x"],
  }, { command: "python3", args: [], cwd: "/w", readWrite: ["/w"], readOnly: [] });
  const at = (...needle: string[]) => {
    const i = args.findIndex((_: string, k: number) => needle.every((n, j) => args[k + j] === n));
    assert.ok(i >= 0, `missing ${needle.join(" ")} in ${args.join(" ")}`);
    return i;
  };
  at("--unshare-user", "--uid", "1000", "--gid", "1000");
  at("--cap-drop", "ALL");
  at("--seccomp", "3");
  // The workspace first, then each directory on the way bound onto itself (a mount point
  // cannot be renamed away), then the protected path read-only.
  assert.ok(at("--bind", "/w", "/w") < at("--bind-try", "/w/.git", "/w/.git"));
  assert.ok(
    at("--bind-try", "/w/.git", "/w/.git") < at("--ro-bind-try", "/w/.git/hooks", "/w/.git/hooks"),
  );
  at("--ro-bind-try", "/w/.git/config", "/w/.git/config");
  at("--ro-bind-try", "/w/main.ts", "/w/main.ts");
  assert.ok(at("--bind-try", "/w/src", "/w/src") < at("--bind-try", "/w/src/klbr", "/w/src/klbr"));
  at("--ro-bind-try", "/w/src/klbr/runtime", "/w/src/klbr/runtime");
  assert.equal(args.filter((a) => a === "/w/.git").length, 2, "each directory pinned once");
  assert.ok(!args.includes("/else/x"), "a path outside the read-write directories is not bound");
  // Without user namespaces: uid 0, but still no capability; without a filter, no --seccomp.
  const plain = bwrapArgs({ ...BASE, userns: false, seccomp: null }, {
    command: "x",
    args: [],
    cwd: "/",
    readWrite: [],
    readOnly: [],
  });
  assert.ok(!plain.includes("--unshare-user") && !plain.includes("--seccomp"));
  assert.ok(plain.includes("--cap-drop"));
});

Deno.test("`protectedPaths()` names klbr's code and the git hooks and config when the workspace holds the checkout", async () => {
  await using at = await layout();
  const ws = at.workspace;
  const checkout = join(ws, "src", "klbr");
  await Deno.mkdir(join(checkout, "runtime"), { recursive: true });
  await Deno.mkdir(join(checkout, ".git"));
  await Deno.writeTextFile(join(checkout, ".git", "config"), "[core]\n");
  await Deno.writeTextFile(join(checkout, "main.ts"), "// main\n");
  await Deno.writeTextFile(join(checkout, "deno.json"), "{}\n");
  // The workspace root is a worktree: its .git is a file naming the git directory.
  await Deno.writeTextFile(join(ws, ".git"), "gitdir: /elsewhere\n");
  const found = await protectedPaths(ws, { repoRoot: checkout, selfEdit: false });
  assert.deepEqual(found, {
    paths: [
      join(checkout, "main.ts"),
      join(checkout, "runtime"),
      join(checkout, "deno.json"),
      join(ws, ".git"),
      join(checkout, ".git", "hooks"),
      join(checkout, ".git", "config"),
    ],
    selfInWorkspace: true,
  });
  // The hooks directory is made when missing (as git init makes it), so it can be bound.
  assert.ok((await Deno.stat(join(checkout, ".git", "hooks"))).isDirectory);
  assert.deepEqual((await protectedPaths(ws, { repoRoot: checkout, selfEdit: true })).paths, [
    join(ws, ".git"),
    join(checkout, ".git", "hooks"),
    join(checkout, ".git", "config"),
  ]);
  const elsewhere = await protectedPaths(ws, { repoRoot: at.outside, selfEdit: false });
  assert.deepEqual(elsewhere, { paths: [join(ws, ".git")], selfInWorkspace: false });
  assert.throws(
    () => refuseProtected(found.paths, join(checkout, "runtime", "x.ts"), "src/klbr/runtime/x.ts"),
    (e) =>
      isKlbrError(e, "forbidden") &&
      e.message ===
        `cannot write src/klbr/runtime/x.ts: klbr's own code is read-only to the agent; workspace { self_edit #true } allows it (got ${
          join(checkout, "runtime", "x.ts")
        })`,
  );
  assert.throws(
    () => refuseProtected(found.paths, join(checkout, ".git", "config"), "src/klbr/.git/config"),
    /the repository's git hooks and config are read-only to the agent/,
  );
  // A name that only starts with two dots is inside its folder; a sibling folder is not.
  assert.throws(
    () => refuseProtected(found.paths, join(checkout, "runtime", "..x.ts"), "runtime/..x.ts"),
    /klbr's own code is read-only to the agent/,
  );
  refuseProtected(found.paths, join(checkout, "runtime..x", "y.ts"), "runtime..x/y.ts");
  refuseProtected(found.paths, join(ws, "notes.md"), "notes.md");
});

Deno.test("python reached through a link outside the system folders runs confined", async () => {
  await using at = await layout();
  const bin = join(at.outside, "bin");
  await Deno.mkdir(bin);
  await Deno.symlink(PYTHON.executable, join(bin, "python3"));
  const found = await resolvePython(join(bin, "python3"));
  assert.equal(found.executable, await Deno.realPath(PYTHON.executable));
  const status = await probeSandbox({
    bwrap: "bwrap",
    python: found.executable,
    readOnly: [found.home],
    network: false,
  });
  assert.equal(status.mode, "bwrap", status.reason ?? "");
  const kernel = new KernelSupervisor({
    python: found.executable,
    session: "test",
    workspace: at.workspace,
    repoRoot: REPO,
    skillRoots: { builtinRoot: join(at.workspace, "skills"), managedRoot: join(at.dir, "none") },
    stateDir: at.stateDir,
    sandbox: { ...at.base, readOnly: [found.home] },
    recordGeneration: () => {},
  });
  try {
    const result = await kernel.execute(newId("cell"), "import sys; print(sys.version_info[0])");
    assert.equal(result.stdout, "3\n", JSON.stringify(result.error));
  } finally {
    await kernel.shutdown();
  }
});

Deno.test("where user namespaces are refused, a root probe falls back to uid 0 with every capability dropped, and says why", async () => {
  await using at = await layout();
  // A bwrap whose kernel refuses user namespaces: the real one, but `--unshare-user` fails.
  const fake = join(at.dir, "bwrap");
  await Deno.writeTextFile(
    fake,
    '#!/bin/sh\nfor a; do [ "$a" = --unshare-user ] && { echo "bwrap: No permissions to create new namespace" >&2; exit 1; }; done\nexec bwrap "$@"\n',
  );
  await Deno.chmod(fake, 0o755);
  const status = await probeSandbox({
    bwrap: fake,
    python: PYTHON.executable,
    readOnly: [PYTHON.home],
    network: false,
  });
  assert.deepEqual(status, {
    mode: "bwrap",
    reason: null,
    network: false,
    userns: false,
    usernsReason:
      "user namespaces are unavailable (bwrap: No permissions to create new namespace); cells keep uid 0 with every capability dropped",
  });
  // Without a user namespace bwrap leaves root's bounding set, but with no_new_privs an exec
  // gains nothing past the (empty) permitted set.
  const { capBnd: _, ...cell } = await probeCell({ ...at.base, bwrap: fake, userns: false });
  assert.deepEqual(cell, {
    uid: 0,
    capEff: "0000000000000000",
    capPrm: "0000000000000000",
    noNewPrivs: true,
    seccomp: true,
  });
});

Deno.test("a workspace reached through a link still hides the state directory and keeps protected paths read-only", async () => {
  await using at = await layout(true);
  // The workspace as a person may name it: through a link (KLBR_WORKSPACE=~/work, a link to
  // another disk); the state directory and the protected paths arrive as real paths.
  const link = join(at.dir, "ws-link");
  await Deno.symlink(at.workspace, link);
  await Deno.writeTextFile(join(at.workspace, "main.ts"), "// main\n");
  const { program, args } = confinedCommand({
    ...at.base,
    protect: [join(at.workspace, "main.ts")],
  }, {
    command: "/bin/sh",
    args: [
      "-c",
      "cat .klbr/operator.token 2>/dev/null || echo token-hidden; " +
      "echo planted >> main.ts 2>/dev/null || echo main-read-only; echo ok > note.txt",
    ],
    cwd: link,
    readWrite: [link],
    readOnly: [],
  });
  const out = await new Deno.Command(program, { args, stdin: "null", stdout: "piped" }).output();
  assert.equal(new TextDecoder().decode(out.stdout), "token-hidden\nmain-read-only\n");
  assert.equal(await Deno.readTextFile(join(at.workspace, "main.ts")), "// main\n");
  assert.equal(await Deno.readTextFile(join(at.workspace, "note.txt")), "ok\n");
});

Deno.test("`prepareConfinement()` whose confined probe fails reports the children unconfined, with the host's network", async () => {
  await using at = await layout();
  // A bwrap the launcher's probe passed that then fails for every confined child.
  const fake = join(at.dir, "bwrap");
  await Deno.writeTextFile(fake, '#!/bin/sh\necho "bwrap: cannot confine now" >&2\nexit 1\n');
  await Deno.chmod(fake, 0o755);
  const logged: string[] = [];
  const confinement = await prepareConfinement({
    config: { mode: "auto", network: false },
    limits: { maxProcesses: 64, memoryBytes: 2 ** 30, cpuWeight: 50, fileSizeBytes: 2 ** 30 },
    selfEdit: false,
    python: PYTHON,
    bwrap: fake,
    status: { mode: "bwrap", reason: null, network: false, userns: true, usernsReason: null },
    stateDir: at.stateDir,
    workspace: at.workspace,
    repoRoot: REPO,
    log: createLogger({ format: "json", write: (line) => void logged.push(line) }),
  });
  await confinement.close();
  // Unconfined children share the host's network, as the probe's own "none" says.
  assert.deepEqual(confinement.status, {
    mode: "none",
    reason:
      "cannot confine a cell: the confined probe failed (got exit 1: bwrap: cannot confine now)",
    network: true,
    userns: false,
    usernsReason: null,
  });
  assert.equal(confinement.base, undefined);
  assert.match(logged.join("\n"), /"event":"sandbox.unconfined"/);
});

Deno.test("`protectedPaths()` of a workspace that does not exist is one error naming it and the fix", async () => {
  await using at = await layout();
  // A mistyped KLBR_WORKSPACE, or a service whose workspace was moved: before, the daemon died
  // on an uncaught NotFound with a stack trace.
  const missing = join(at.dir, "no-such-ws");
  await assert.rejects(
    protectedPaths(missing, { repoRoot: REPO, selfEdit: false }),
    (e) =>
      isKlbrError(e, "invalid_config") &&
      e.message ===
        `cannot confine the workbench: the workspace is not a directory; create it, or set KLBR_WORKSPACE to the directory the agent works in (got ${missing})`,
  );
  const file = join(at.dir, "a-file");
  await Deno.writeTextFile(file, "");
  await assert.rejects(
    protectedPaths(file, { repoRoot: REPO, selfEdit: false }),
    (e) => isKlbrError(e, "invalid_config") && e.message.endsWith(`(got ${file})`),
  );
});
