// The sandbox's second pass, against the real daemon (started exactly as `serve` starts it),
// the real Python workbench and the fake model, as root: a confined process has none of root's
// powers (no capability, no file handles back out of its mounts), klbr's own code and the git
// hooks are not the agent's to change, and a fork bomb ends its cell while the daemon answers.

import assert from "node:assert/strict";
import { join } from "node:path";
import { startFakeOpenAI } from "../../fakes/openai_server.ts";
import { REPO_ROOT, startTestDaemon, type TestDaemon } from "../../_helpers/daemon.ts";
import { connectLane } from "../../_helpers/lane_client.ts";
import { mountSmallFs } from "../../crash/_loopback_fs.ts";
import type { LaneRecord } from "../../../runtime/core/mod.ts";
import { cgroupName } from "../../../runtime/sandbox/mod.ts";

const WAIT_CELL = { toolCall: { code: "wait()" } };

/** Starts a daemon with a fake model; `fn` runs; both are stopped and their dirs removed. */
async function withDaemon(
  options: Parameters<typeof startTestDaemon>[0],
  fn: (daemon: TestDaemon, fake: ReturnType<typeof startFakeOpenAI>) => Promise<void>,
): Promise<void> {
  const fake = startFakeOpenAI({ fallback: () => WAIT_CELL });
  const daemon = await startTestDaemon({ modelUrl: fake.url, ...options });
  try {
    await fn(daemon, fake);
  } finally {
    await daemon.stop();
    await fake.close();
    await Deno.remove(daemon.stateDir, { recursive: true }).catch(() => {});
    if (options?.workspace === undefined) {
      await Deno.remove(daemon.workspace, { recursive: true }).catch(() => {});
    }
  }
}

/**
 * Sends one input, waits for its turn to end and returns the result of its first cell (the
 * model runs `code`, then `wait()`).
 */
async function cell(
  daemon: TestDaemon,
  fake: ReturnType<typeof startFakeOpenAI>,
  code: string,
): Promise<Record<string, unknown>> {
  fake.enqueue({ toolCall: { code } });
  const client = await connectLane({ port: daemon.port, token: daemon.token });
  try {
    // Only a cell after what the replay held is this input's.
    const head = Math.max(0, ...client.messages.map((m) => m.kind === "record" ? m.seq : 0));
    await client.request({ kind: "input", client_msg_id: crypto.randomUUID(), text: "go" });
    const finished = await client.waitFor<LaneRecord>(
      (m) => m.kind === "record" && m.type === "cell.finished" && m.seq > head,
      90_000,
    );
    // The turn goes on to a `wait()` cell; the next input starts only once it has ended.
    await client.waitFor(
      (m) => m.kind === "record" && m.type === "frame.finished" && m.seq > head,
      90_000,
    );
    return { ...finished.data.result as Record<string, unknown>, outcome: finished.data.outcome };
  } finally {
    await client.close();
  }
}

/** The JSON a cell printed on its `RESULT ` line. */
function resultOf(result: Record<string, unknown>): Record<string, unknown> {
  const line = String(result.stdout).split("\n").find((l) => l.startsWith("RESULT "));
  assert.ok(line, `no result: ${result.stdout} ${JSON.stringify(result.error)}`);
  return JSON.parse(line.slice("RESULT ".length));
}

/** What `/proc/self/status` says, as a Python expression evaluated where it runs. */
const STATUS = "{k: v.strip() for k, v in (l.split(':', 1) for l in open('/proc/self/status')" +
  " if l.startswith(('Uid', 'Cap', 'NoNewPrivs', 'Seccomp:')))}";

Deno.test("a cell, its subprocess, a workspace.run child and a job have no capability, no_new_privs, the seccomp filter and an unprivileged uid", async () => {
  await withDaemon({}, async (daemon, fake) => {
    const health = await (await fetch(`${daemon.url}/health`)).json();
    assert.equal(health.sandbox, "bwrap", health.sandbox_reason);
    assert.equal(health.sandbox_userns, true);
    assert.equal(health.sandbox_cap_eff, "0000000000000000");
    const probe = `import json; print(json.dumps(${STATUS}))`;
    const code = [
      "import json, subprocess, sys",
      `out = {'cell': ${STATUS}}`,
      `sub = subprocess.run([sys.executable, '-c', ${
        JSON.stringify(probe)
      }], capture_output=True, text=True)`,
      "out['subprocess'] = json.loads(sub.stdout or '{}') or sub.stderr",
      `r = await run(['python3', '-c', ${JSON.stringify(probe)}], timeout=60)`,
      "out['run'] = json.loads(r.stdout.decode() or '{}') or r.stderr.decode()",
      `j = await jobs.start(${JSON.stringify(probe)}, name='caps')`,
      "done = await jobs.result(j)",
      "out['job'] = json.loads(done['result']['stdout'] or '{}') or done",
      "print('RESULT ' + json.dumps(out))",
      "wait()",
    ].join("\n");
    const out = resultOf(await cell(daemon, fake, code));
    for (const who of ["cell", "subprocess", "run", "job"]) {
      const s = out[who] as Record<string, string>;
      assert.equal(typeof s, "object", `${who}: ${JSON.stringify(s)}`);
      for (const set of ["CapEff", "CapPrm", "CapBnd", "CapInh", "CapAmb"]) {
        assert.equal(s[set], "0000000000000000", `${who} ${set}`);
      }
      assert.equal(s.NoNewPrivs, "1", `${who} no_new_privs`);
      assert.equal(s.Seccomp, "2", `${who} seccomp`);
      assert.match(s.Uid, /^1000\s+1000\s+1000\s+1000$/, `${who} uid`);
    }
  });
});

/** The kernel's file handle of `path`, hex (`handle_bytes`, `handle_type`, bytes), from the host. */
async function fileHandle(path: string): Promise<string> {
  const script = [
    "import ctypes, sys",
    "libc = ctypes.CDLL(None, use_errno=True)",
    "class FH(ctypes.Structure):",
    "    _fields_ = [('n', ctypes.c_uint), ('t', ctypes.c_int), ('h', ctypes.c_ubyte * 128)]",
    "fh = FH(); fh.n = 128; mid = ctypes.c_int()",
    "assert libc.name_to_handle_at(-100, sys.argv[1].encode(), ctypes.byref(fh), ctypes.byref(mid), 0) == 0",
    "print(bytes(fh)[:8 + fh.n].hex())",
  ].join("\n");
  const out = await new Deno.Command("python3", { args: ["-c", script, path] }).output();
  assert.ok(out.success, new TextDecoder().decode(out.stderr));
  return new TextDecoder().decode(out.stdout).trim();
}

// Writes the kernel's core_pattern back unchanged: a cell that could write it could name a
// program the kernel runs as root outside every namespace at the next crash.
const SYSCTL = [
  "import json, os",
  "def rewrite(path):",
  "    try:",
  "        value = open(path).read()",
  "        fd = os.open(path, os.O_WRONLY)",
  "        try:",
  "            return f'wrote {os.write(fd, value.encode())} bytes'",
  "        finally:",
  "            os.close(fd)",
  "    except OSError as e:",
  "        return f'{type(e).__name__}: {e}'",
  "print('RESULT ' + json.dumps({'core_pattern': rewrite('/proc/sys/kernel/core_pattern')}))",
  "wait()",
].join("\n");

Deno.test("a cell cannot write the kernel's settings under /proc/sys, even when the daemon is root", async () => {
  await withDaemon({}, async (daemon, fake) => {
    const out = resultOf(await cell(daemon, fake, SYSCTL));
    // Before the fix, as root: "wrote 5 bytes" (uid 1000 inside is uid 0 outside, which the
    // kernel's sysctl check lets write, and bubblewrap left /proc/sys writable).
    assert.match(String(out.core_pattern), /^(OSError|PermissionError): \[Errno (30|13)\]/);
  });
});

Deno.test("a cell cannot open the state directory's token by its file handle, nor take a handle itself", async () => {
  await withDaemon({}, async (daemon, fake) => {
    // The attack as measured: with CAP_DAC_READ_SEARCH, any fd on the same file system and
    // the token's handle open the token, whatever is bound; the handle is the host's.
    const handle = await fileHandle(join(daemon.stateDir, "operator.token"));
    const code = [
      "import ctypes, errno, json, os",
      "libc = ctypes.CDLL(None, use_errno=True)",
      `raw = bytes.fromhex(${JSON.stringify(handle)})`,
      "buf = ctypes.create_string_buffer(raw, len(raw))",
      "out = {}",
      "fd = libc.open_by_handle_at(os.open('.', os.O_RDONLY), buf, os.O_RDONLY)",
      "out['open_by_handle_at'] = os.read(fd, 100).decode() if fd >= 0 else errno.errorcode[ctypes.get_errno()]",
      "mine = ctypes.create_string_buffer(8 + 128); ctypes.c_uint.from_buffer(mine).value = 128",
      "mid = ctypes.c_int()",
      "r = libc.name_to_handle_at(-100, b'.', mine, ctypes.byref(mid), 0)",
      "out['name_to_handle_at'] = 'allowed' if r == 0 else errno.errorcode[ctypes.get_errno()]",
      "r = libc.unshare(0x10000000)",
      "out['unshare_user'] = 'allowed' if r == 0 else errno.errorcode[ctypes.get_errno()]",
      "print('RESULT ' + json.dumps(out))",
      "wait()",
    ].join("\n");
    const out = resultOf(await cell(daemon, fake, code));
    assert.deepEqual(out, {
      open_by_handle_at: "EPERM",
      name_to_handle_at: "EPERM",
      unshare_user: "EPERM",
    });
  });
});

/** A copy of the checkout as `serve` runs it (its own main.ts, runtime/, …), in a git repository. */
async function checkoutCopy(): Promise<string> {
  const dir = await Deno.realPath(await Deno.makeTempDir({ prefix: "klbr-checkout-" }));
  const copy = await new Deno.Command("cp", {
    args: [
      "-r",
      ...["main.ts", "runtime", "store", "workbench", "ui", "behavior", "skills", "deno.json"]
        .map((name) => join(REPO_ROOT, name)),
      join(REPO_ROOT, "deno.lock"),
      dir,
    ],
  }).output();
  assert.ok(copy.success, new TextDecoder().decode(copy.stderr));
  await Deno.symlink(join(REPO_ROOT, "node_modules"), join(dir, "node_modules"));
  const git = await new Deno.Command("git", { args: ["init", "-q", dir] }).output();
  assert.ok(git.success, new TextDecoder().decode(git.stderr));
  return dir;
}

/** Every way a cell might change the host's code or plant a git hook; each outcome by name. */
const TAMPER = [
  "import json, os, shutil",
  "from klbr import rpc",
  "out = {}",
  "def attempt(name, fn):",
  "    try:",
  "        fn()",
  "        out[name] = 'allowed'",
  "    except Exception as e:",
  "        out[name] = type(e).__name__ + ': ' + str(e)[:200]",
  "async def attempt_async(name, make):",
  "    try:",
  "        await make()",
  "        out[name] = 'allowed'",
  "    except Exception as e:",
  "        out[name] = type(e).__name__ + ': ' + str(e)[:200]",
  "def prepend():",
  "    text = open('main.ts').read()",
  "    with open('main.ts', 'w') as f:",
  "        f.write('// planted\\n' + text)",
  "def hook():",
  "    with open('.git/hooks/pre-commit', 'w') as f:",
  "        f.write('#!/bin/sh\\necho planted\\n')",
  "def config():",
  "    with open('.git/config', 'a') as f:",
  "        f.write('[core]\\n\\thooksPath = /tmp\\n')",
  "def swap_git():",
  "    os.rename('.git', '.git-old')",
  "attempt('main_ts', prepend)",
  "attempt('runtime', lambda: open('runtime/planted.ts', 'w').write('x'))",
  "attempt('rename_runtime', lambda: os.rename('runtime', 'runtime-old'))",
  "attempt('git_hook', hook)",
  "attempt('git_config', config)",
  "attempt('rename_git', swap_git)",
  "async def api_write():",
  "    f = await open_file('main.ts')",
  "    await f.write('// replaced\\n')",
  "await attempt_async('api_main_ts', api_write)",
  "async def patch():",
  "    lines = await rpc.call('code.lines', {'path': 'main.ts', 'start': 1, 'end': 1})",
  "    r = lines['range']",
  "    await rpc.call('code.patch', {'edits': [{'range': r, 'text': '// patched\\n'}]})",
  "await attempt_async('code_patch', patch)",
  "print('RESULT ' + json.dumps(out))",
  "wait()",
].join("\n");

Deno.test("in the default layout a cell cannot change klbr's code or plant a git hook; self_edit lifts the first only", async () => {
  const checkout = await checkoutCopy();
  try {
    const main = await Deno.readTextFile(join(checkout, "main.ts"));
    const gitConfig = await Deno.readTextFile(join(checkout, ".git", "config"));
    await withDaemon({ repoRoot: checkout, workspace: checkout }, async (daemon, fake) => {
      assert.match(
        daemon.logs(),
        /self-edit {2}off: klbr's own code \(main\.ts, runtime, store, workbench, ui, deno\.json, deno\.lock\) is read-only to cells; the git hooks and config stay read-only/,
      );
      const out = resultOf(await cell(daemon, fake, TAMPER));
      for (const name of ["main_ts", "runtime", "git_hook", "git_config"]) {
        assert.match(String(out[name]), /^OSError: \[Errno (30|16)\]/, `${name}: ${out[name]}`);
      }
      for (const name of ["rename_runtime", "rename_git"]) {
        assert.match(String(out[name]), /^OSError: \[Errno 16\] Device or resource busy/, name);
      }
      assert.match(
        String(out.api_main_ts),
        /^ReadOnlyPath: cannot write main\.ts: it is read-only to cells/,
      );
      assert.match(
        String(out.code_patch),
        /^RpcError: code\.patch failed \(forbidden\): cannot write main\.ts: klbr's own code is read-only to the agent; workspace \{ self_edit #true \} allows it/,
      );
    });
    assert.equal(await Deno.readTextFile(join(checkout, "main.ts")), main);
    assert.equal(await Deno.readTextFile(join(checkout, ".git", "config")), gitConfig);
    await assert.rejects(Deno.stat(join(checkout, ".git", "hooks", "pre-commit")));
    await assert.rejects(Deno.stat(join(checkout, "runtime", "planted.ts")));
    await Deno.stat(join(checkout, ".git", "HEAD"));

    const selfEdit = {
      repoRoot: checkout,
      workspace: checkout,
      extraConfig: "workspace { self_edit #true }\n",
    };
    await withDaemon(selfEdit, async (daemon, fake) => {
      assert.match(daemon.logs(), /self-edit {2}ON \(workspace \{ self_edit #true \}\)/);
      const out = resultOf(await cell(daemon, fake, TAMPER));
      for (const name of ["main_ts", "runtime", "api_main_ts"]) {
        assert.equal(out[name], "allowed", `${name}: ${out[name]}`);
      }
      // Not refused; the copy's grammars lie outside what its daemon may read, so it may
      // still fail to parse.
      assert.doesNotMatch(String(out.code_patch), /forbidden/);
      for (const name of ["git_hook", "git_config"]) {
        assert.match(String(out[name]), /^OSError: \[Errno (30|16)\]/, `${name}: ${out[name]}`);
      }
      assert.match(String(out.rename_git), /^OSError: \[Errno 16\]/);
    });
    assert.match(await Deno.readTextFile(join(checkout, "main.ts")), /^\/\/ (replaced|patched)\n$/);
    assert.equal(await Deno.readTextFile(join(checkout, ".git", "config")), gitConfig);
    await assert.rejects(Deno.stat(join(checkout, ".git", "hooks", "pre-commit")));
  } finally {
    await Deno.remove(checkout, { recursive: true });
  }
});

/** A fork bomb bounded in the test itself: 2,000 forks and 20 s at most, children gone in 25 s. */
const FORK_BOMB = [
  "import os, time",
  "start, forks = time.time(), 0",
  "while forks < 2000 and time.time() - start < 20:",
  "    try:",
  "        pid = os.fork()",
  "    except OSError:",
  "        time.sleep(0.01)",
  "        continue",
  "    if pid == 0:",
  "        time.sleep(25)",
  "        os._exit(0)",
  "    forks += 1",
  "print('survived', forks)",
].join("\n");

/**
 * The cgroup directories of the daemon of `stateDir` under the pids hierarchy (v1) or anywhere
 * in a v2 tree, read by a shell (Deno reads nothing under /sys without --allow-all).
 */
async function cgroupsOf(stateDir: string): Promise<string[]> {
  const name = cgroupName(await Deno.realPath(stateDir));
  const out = await new Deno.Command("sh", {
    args: [
      "-c",
      'find /sys/fs/cgroup/pids /sys/fs/cgroup/unified -type d -path "*/$1*" 2>/dev/null',
      "sh",
      name,
    ],
  }).output();
  return new TextDecoder().decode(out.stdout).split("\n").filter(Boolean).sort();
}

Deno.test("a fork bomb ends its cell killed at the process limit; the daemon answers /health and the next message", async () => {
  const extraConfig = "sandbox { max_processes 64 }\n";
  await withDaemon({ extraConfig }, async (daemon, fake) => {
    const health = await (await fetch(`${daemon.url}/health`)).json();
    assert.match(health.sandbox_limits, /^cgroup[12]$/, health.sandbox_limits_reason);
    const bombed = await cell(daemon, fake, FORK_BOMB);
    assert.equal(bombed.outcome, "killed", JSON.stringify(bombed).slice(0, 400));
    assert.equal(
      (bombed.error as { message: string }).message,
      "the workbench was killed: the cell reached the process limit (64)",
    );
    const after = await fetch(`${daemon.url}/health`);
    assert.equal(after.status, 200);
    assert.equal((await after.json()).ok, true);
    const next = await cell(daemon, fake, "print('still here')\nwait()");
    assert.equal(next.outcome, "ok", JSON.stringify(next.error));
    assert.equal(next.stdout, "still here\n");
  });
});

Deno.test("a SIGKILLed daemon's cgroups are removed by the next start, and a clean stop removes its own", async () => {
  const fake = startFakeOpenAI({ fallback: () => WAIT_CELL });
  const first = await startTestDaemon({ modelUrl: fake.url });
  try {
    await cell(first, fake, "print(1)\nwait()");
    const live = await cgroupsOf(first.stateDir);
    // The daemon's directory and at least the workbench's tree in it.
    assert.ok(live.length >= 2, `cgroups: ${live.join(", ")}`);
    await first.kill();
    assert.deepEqual(await cgroupsOf(first.stateDir), live, "a SIGKILL leaves them");
    const second = await first.restart();
    const now = await cgroupsOf(first.stateDir);
    assert.deepEqual(live.slice(1).filter((leaf) => now.includes(leaf)), [], "removed at start");
    await second.stop();
    assert.deepEqual(await cgroupsOf(first.stateDir), [], "a clean stop removes its own");
  } finally {
    await first.kill().catch(() => {});
    await fake.close();
    await Deno.remove(first.stateDir, { recursive: true }).catch(() => {});
    await Deno.remove(first.workspace, { recursive: true }).catch(() => {});
  }
});

Deno.test("a cell that fills the disk it shares with the store costs a retriable refusal, not admission; /health names the directories", async () => {
  const fs = await mountSmallFs(32 * 1024);
  const stateDir = join(fs.dir, "state");
  const workspace = join(fs.dir, "ws");
  await Deno.mkdir(stateDir);
  await Deno.mkdir(workspace);
  try {
    await withDaemon({ stateDir, workspace }, async (daemon, fake) => {
      const fill = [
        "n = 0",
        "try:",
        "    with open('fill', 'wb') as f:",
        "        for i in range(200):",
        "            f.write(b'x' * (1 << 20))",
        "            f.flush()",
        "            n += 1",
        "except OSError as e:",
        "    print('full after', n, 'MiB:', e.strerror)",
        "wait()",
      ].join("\n");
      fake.enqueue({ toolCall: { code: fill } });
      const client = await connectLane({ port: daemon.port, token: daemon.token });
      try {
        await client.request({ kind: "input", client_msg_id: "fill", text: "fill" });
        // The next message: refused at most while the store finds the disk full, then admitted.
        fake.enqueue({ toolCall: { code: "await local.send('still answering')\nwait()" } });
        let ack: Awaited<ReturnType<typeof client.request>> | undefined;
        for (let attempt = 0; attempt < 10 && ack?.kind !== "ack"; attempt++) {
          ack = await client.request({ kind: "input", client_msg_id: "next", text: "next" });
          if (ack.kind === "error") assert.equal(ack.code, "store_unavailable", ack.message);
        }
        assert.equal(ack?.kind, "ack", JSON.stringify(ack));
        await client.waitFor(
          (m) => m.kind === "record" && m.type === "send" && m.data.text === "still answering",
          60_000,
        );
      } finally {
        await client.close();
      }
      const health = await (await fetch(`${daemon.url}/health`)).json();
      assert.equal(health.disk.state, "full");
      assert.equal(health.disk.reserve_released, true);
      assert.ok(
        health.reasons.includes(
          `disk full: the file system of the state directory ${stateDir} is full (the workspace ${workspace} is on it too, and may be what grew); free space there`,
        ),
        JSON.stringify(health.reasons),
      );
      assert.match(
        daemon.logs(),
        /disk\.full disk full: .*the store's reserve \(\d.* was released/,
      );
    });
  } finally {
    await fs.unmount();
  }
});
