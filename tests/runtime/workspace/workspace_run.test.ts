import assert from "node:assert/strict";
import { join } from "node:path";
import { isKlbrError } from "../../../runtime/core/mod.ts";
import { killProcessGroup, processGroupMembers } from "../../../runtime/sandbox/mod.ts";
import { runInWorkspace } from "../../../runtime/workspace/mod.ts";

/** A fresh workspace (real path) inside a temp dir that also holds a sibling directory. */
async function workspace() {
  const dir = await Deno.realPath(await Deno.makeTempDir({ prefix: "klbr-run-" }));
  const root = join(dir, "ws");
  const sibling = join(dir, "sibling");
  await Deno.mkdir(join(root, "sub"), { recursive: true });
  await Deno.mkdir(sibling);
  return { root, sibling, [Symbol.asyncDispose]: () => Deno.remove(dir, { recursive: true }) };
}

const text = (b64: string) =>
  new TextDecoder().decode(Uint8Array.from(atob(b64), (c) => c.charCodeAt(0)));

/** Resolves when `path` exists; rejects after `ms`. Waits on file events, never polls. */
async function fileAppears(path: string, ms = 10_000): Promise<string> {
  const exists = () => Deno.readTextFile(path).then((t) => t.trim(), () => null);
  const watcher = Deno.watchFs(join(path, ".."));
  const timer = setTimeout(() => watcher.close(), ms);
  try {
    const now = await exists();
    if (now) return now;
    for await (const _event of watcher) {
      const seen = await exists();
      if (seen) return seen;
    }
    throw new Error(`${path} did not appear within ${ms} ms`);
  } finally {
    clearTimeout(timer);
    try {
      watcher.close();
    } catch { /* already closed by the timer */ }
  }
}

/** Whether `pid` is a live (non-zombie) process, asked of `ps` (Deno may not read /proc). */
async function alive(pid: number): Promise<boolean> {
  const out = await new Deno.Command("ps", { args: ["-o", "stat=", "-p", String(pid)] }).output();
  const stat = new TextDecoder().decode(out.stdout).trim();
  return stat !== "" && !stat.startsWith("Z");
}

/**
 * Whether `check` turned false within 5 s. A SIGKILLed process is gone only once the kernel
 * has torn it down, a moment after the signal was delivered (longer on a loaded machine).
 */
async function ended(check: () => Promise<boolean>): Promise<boolean> {
  const deadline = performance.now() + 5_000;
  while (await check()) {
    if (performance.now() > deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return true;
}

Deno.test("`runInWorkspace()` returns exit code and captured stdout and stderr", async () => {
  await using ws = await workspace();
  const r = await runInWorkspace(
    { argv: ["sh", "-c", "printf out; printf err >&2; exit 3"] },
    { root: ws.root },
  );
  assert.equal(r.exit_code, 3);
  assert.equal(text(r.stdout_b64), "out");
  assert.equal(text(r.stderr_b64), "err");
  assert.deepEqual([r.stdout_truncated, r.stderr_truncated, r.timed_out], [false, false, false]);
  assert.ok(r.duration_ms >= 0);
});

Deno.test("`runInWorkspace()` passes argv verbatim, never through a shell", async () => {
  await using ws = await workspace();
  const r = await runInWorkspace({ argv: ["printf", "%s|", "a b", "$HOME", ";ls"] }, {
    root: ws.root,
  });
  assert.equal(text(r.stdout_b64), "a b|$HOME|;ls|");
});

Deno.test("`runInWorkspace()` clears the environment to PATH, HOME = root, LANG and no bytecode cache", async () => {
  await using ws = await workspace();
  const r = await runInWorkspace({ argv: ["env"] }, {
    root: ws.root,
    env: { PATH: "/usr/bin:/bin" },
  });
  const lines = text(r.stdout_b64).trim().split("\n").sort();
  assert.deepEqual(lines, [
    `HOME=${ws.root}`,
    "LANG=C.UTF-8",
    "PATH=/usr/bin:/bin",
    "PYTHONDONTWRITEBYTECODE=1",
  ]);
});

Deno.test("`runInWorkspace()` runs in the root by default and in a subdirectory when asked", async () => {
  await using ws = await workspace();
  const top = await runInWorkspace({ argv: ["pwd"] }, { root: ws.root });
  assert.equal(text(top.stdout_b64).trim(), ws.root);
  const sub = await runInWorkspace({ argv: ["pwd"], cwd: "sub" }, { root: ws.root });
  assert.equal(text(sub.stdout_b64).trim(), join(ws.root, "sub"));
  const abs = await runInWorkspace({ argv: ["pwd"], cwd: join(ws.root, "sub") }, {
    root: ws.root,
  });
  assert.equal(text(abs.stdout_b64).trim(), join(ws.root, "sub"));
});

Deno.test("`runInWorkspace()` rejects a cwd that leaves the root by `..` or an absolute path", async () => {
  await using ws = await workspace();
  for (const cwd of ["..", "sub/../..", "../sibling", ws.sibling, "/"]) {
    await assert.rejects(
      runInWorkspace({ argv: ["pwd"], cwd }, { root: ws.root }),
      (e) =>
        isKlbrError(e, "path_escape") &&
        e.message === `cannot run: cwd leaves the workspace (got ${JSON.stringify(cwd)})`,
    );
  }
});

Deno.test("`runInWorkspace()` rejects a cwd that leaves the root through a symlink", async () => {
  // Links to "/" and to a sibling dir are both inside the root by name and outside in fact.
  await using ws = await workspace();
  await Deno.symlink("/", join(ws.root, "to_root"));
  await Deno.symlink(ws.sibling, join(ws.root, "to_sibling"));
  await Deno.symlink("sub", join(ws.root, "to_sub"));
  for (const cwd of ["to_root", "to_sibling", "to_root/tmp"]) {
    await assert.rejects(
      runInWorkspace({ argv: ["pwd"], cwd }, { root: ws.root }),
      (e) =>
        isKlbrError(e, "path_escape") &&
        e.message ===
          `cannot run: cwd leaves the workspace through a symlink (got ${JSON.stringify(cwd)})`,
    );
  }
  const inside = await runInWorkspace({ argv: ["pwd", "-P"], cwd: "to_sub" }, { root: ws.root });
  assert.equal(text(inside.stdout_b64).trim(), join(ws.root, "sub"));
});

Deno.test("`runInWorkspace()` refuses a missing cwd and a cwd that is a file", async () => {
  await using ws = await workspace();
  await Deno.writeTextFile(join(ws.root, "file.txt"), "");
  await assert.rejects(
    runInWorkspace({ argv: ["pwd"], cwd: "nope" }, { root: ws.root }),
    (e) =>
      isKlbrError(e, "not_found") && e.message === 'cannot run: cwd does not exist (got "nope")',
  );
  await assert.rejects(
    runInWorkspace({ argv: ["pwd"], cwd: "file.txt" }, { root: ws.root }),
    (e) =>
      isKlbrError(e, "path_invalid") &&
      e.message === 'cannot run: cwd is not a directory (got "file.txt")',
  );
});

Deno.test("`runInWorkspace()` names argv[0] when the program does not exist", async () => {
  await using ws = await workspace();
  await assert.rejects(
    runInWorkspace({ argv: ["klbr-no-such-program", "x"] }, { root: ws.root }),
    (e) =>
      isKlbrError(e, "not_found") &&
      e.message ===
        'cannot run: program not found on PATH or at that path (got "klbr-no-such-program")',
  );
});

Deno.test("`runInWorkspace()` names a program that is a directory or not executable, and the fix", async () => {
  await using ws = await workspace();
  await Deno.writeTextFile(join(ws.root, "build.sh"), "#!/bin/sh\necho built\n", { mode: 0o644 });
  // EACCES from the system, not the host's policy: before, both read "the host may not start
  // this program", as if KLBR_RUN_PROGRAMS had refused it.
  for (const program of ["./build.sh", "./sub"]) {
    await assert.rejects(
      runInWorkspace({ argv: [program] }, { root: ws.root }),
      (e) =>
        isKlbrError(e, "path_invalid") &&
        e.message ===
          `cannot run: the program is a directory or lacks the execute permission (got ${
            JSON.stringify(program)
          }); chmod +x a script, or name its interpreter first (["sh", "build.sh"])`,
    );
  }
});

Deno.test("`runInWorkspace()` refuses bad params and options", async () => {
  await using ws = await workspace();
  await assert.rejects(
    runInWorkspace({ argv: [] }, { root: ws.root }),
    (e) => isKlbrError(e, "invalid_input") && e.message.startsWith("cannot run: argv:"),
  );
  await assert.rejects(
    runInWorkspace({ argv: ["true"], timeout_s: -1 }, { root: ws.root }),
    (e) => isKlbrError(e, "invalid_input") && e.message.startsWith("cannot run: timeout_s:"),
  );
  await assert.rejects(
    runInWorkspace({ argv: ["true"] }, { root: ws.root, outputCapBytes: -1 }),
    (e) => isKlbrError(e, "invalid_input") && e.message.startsWith("cannot run: options"),
  );
  await assert.rejects(
    runInWorkspace({ argv: ["true"] }, { root: ws.root, env: { HOME: "/" } as never }),
    (e) => isKlbrError(e, "invalid_input"),
  );
});

Deno.test("`runInWorkspace()` caps each stream, flags truncation and drains the rest", async () => {
  // 4 MiB is far more than a pipe holds: if the rest were not drained the child would block.
  await using ws = await workspace();
  const r = await runInWorkspace(
    { argv: ["sh", "-c", "head -c 4194304 /dev/zero; printf 'abcdef' >&2; exit 0"] },
    { root: ws.root, outputCapBytes: 1000 },
  );
  assert.equal(r.exit_code, 0);
  assert.equal(atob(r.stdout_b64).length, 1000);
  assert.equal(r.stdout_truncated, true);
  assert.equal(text(r.stderr_b64), "abcdef");
  assert.equal(r.stderr_truncated, false);
});

Deno.test("`runInWorkspace()` keeps output of exactly the cap untruncated", async () => {
  await using ws = await workspace();
  const r = await runInWorkspace({ argv: ["printf", "12345"] }, {
    root: ws.root,
    outputCapBytes: 5,
  });
  assert.equal(text(r.stdout_b64), "12345");
  assert.equal(r.stdout_truncated, false);
});

Deno.test("`runInWorkspace()` kills the whole group at the timeout", async () => {
  await using ws = await workspace();
  const r = await runInWorkspace(
    { argv: ["sh", "-c", "echo $$ > pgid; sleep 1000 & sleep 1000"], timeout_s: 0.3 },
    { root: ws.root },
  );
  assert.equal(r.timed_out, true);
  assert.equal(r.exit_code, null);
  const pgid = Number(await Deno.readTextFile(join(ws.root, "pgid")));
  assert.deepEqual(await processGroupMembers(pgid), []);
});

Deno.test("`runInWorkspace()` kills the whole group when its signal aborts mid-way", async () => {
  await using ws = await workspace();
  const controller = new AbortController();
  const run = runInWorkspace(
    { argv: ["sh", "-c", "sleep 1000 & echo $! > child; sleep 1000"], timeout_s: 600 },
    { root: ws.root, signal: controller.signal },
  );
  const child = Number(await fileAppears(join(ws.root, "child")));
  assert.ok(await alive(child));
  controller.abort();
  const r = await run;
  assert.equal(r.exit_code, null);
  assert.equal(r.timed_out, false);
  assert.equal(await alive(child), false);
});

Deno.test("`runInWorkspace()` does not start a program when its signal is already aborted", async () => {
  await using ws = await workspace();
  const r = await runInWorkspace({ argv: ["touch", "ran"] }, {
    root: ws.root,
    signal: AbortSignal.abort(),
  });
  assert.equal(r.exit_code, null);
  await assert.rejects(Deno.stat(join(ws.root, "ran")), Deno.errors.NotFound);
});

Deno.test("`runInWorkspace()` kills background jobs left in the group when the leader exits", async () => {
  // The background sleep holds stdout open; without the group kill the read would never end.
  await using ws = await workspace();
  const r = await runInWorkspace(
    { argv: ["sh", "-c", "sleep 1000 & echo $!"], timeout_s: 600 },
    { root: ws.root },
  );
  assert.equal(r.exit_code, 0);
  const sleeper = Number(text(r.stdout_b64).trim());
  assert.ok(await ended(() => alive(sleeper)), `background sleep ${sleeper} survived`);
});

Deno.test("`runInWorkspace()` returns even when a process that left the group holds its pipes", async () => {
  // setsid moves the sleeper out of the group, out of the host's reach; the readers are cut.
  await using ws = await workspace();
  const r = await runInWorkspace(
    {
      argv: [
        "sh",
        "-c",
        "setsid sh -c 'echo $$ > escaped; exec sleep 1000' & until [ -s escaped ]; do sleep 0.01; done",
      ],
    },
    { root: ws.root },
  );
  const escaped = Number(await Deno.readTextFile(join(ws.root, "escaped")));
  try {
    assert.equal(r.exit_code, 0);
    assert.equal(r.timed_out, false);
  } finally {
    if (await alive(escaped)) Deno.kill(escaped, "SIGKILL");
  }
});

Deno.test("`killProcessGroup()` kills a detached child and its grandchildren", async () => {
  const child = new Deno.Command("sh", {
    args: ["-c", "sleep 1000 & sleep 1000"],
    detached: true,
    stdin: "null",
    stdout: "null",
    stderr: "null",
  }).spawn();
  await killProcessGroup(child.pid);
  const status = await child.status;
  assert.equal(status.signal, "SIGKILL");
  assert.ok(
    await ended(async () => (await processGroupMembers(child.pid)).length > 0),
    `group ${child.pid} survived`,
  );
  await killProcessGroup(child.pid); // idempotent once the group is gone
});

Deno.test("`killProcessGroup()` refuses ids that would reach other processes", async () => {
  for (const pgid of [0, 1, -5, 2.5, Number.NaN]) {
    await assert.rejects(
      killProcessGroup(pgid),
      (e) =>
        isKlbrError(e, "invalid_input") &&
        e.message ===
          `cannot kill process group: a process group id must be an integer above 1 (got ${pgid})`,
    );
  }
  const ps = await new Deno.Command("ps", { args: ["-o", "pgid=", "-p", String(Deno.pid)] })
    .output();
  const own = Number(new TextDecoder().decode(ps.stdout).trim());
  await assert.rejects(
    killProcessGroup(own),
    (e) =>
      isKlbrError(e, "invalid_input") &&
      e.message === `cannot kill process group: it is this process's own group (got ${own})`,
  );
  await assert.rejects(processGroupMembers(0), (e) => isKlbrError(e, "invalid_input"));
});
