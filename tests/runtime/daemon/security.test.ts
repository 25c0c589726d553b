// End-to-end acceptance of the security boundaries against the real daemon (started exactly
// as `serve` starts it), the real Python workbench inside bubblewrap and the fake model:
// who can reach the daemon, what a cell can touch, and the bounds on each client.

import assert from "node:assert/strict";
import { join } from "node:path";
import { startFakeOpenAI } from "../../fakes/openai_server.ts";
import { startTestDaemon, type TestDaemon } from "../../_helpers/daemon.ts";
import { connectLane, type LaneClient } from "../../_helpers/lane_client.ts";
import { rawRequest, rawSocket } from "../../_helpers/raw_http.ts";
import type { LaneRecord } from "../../../runtime/core/mod.ts";

const WAIT_CELL = { toolCall: { code: "wait()" } };

const waitRecord = (client: LaneClient, type: string) =>
  client.waitFor<LaneRecord>((m) => m.kind === "record" && m.type === type, 60_000);

/** Starts a daemon with a fake model; `fn` runs; both are stopped and their dirs removed. */
async function withDaemon(
  options: Parameters<typeof startTestDaemon>[0] & { script?: unknown[] },
  fn: (daemon: TestDaemon, fake: ReturnType<typeof startFakeOpenAI>) => Promise<void>,
): Promise<void> {
  const fake = startFakeOpenAI({ fallback: () => WAIT_CELL });
  for (const response of options.script ?? []) fake.enqueue(response as never);
  const daemon = await startTestDaemon({ modelUrl: fake.url, ...options });
  try {
    await fn(daemon, fake);
  } finally {
    await daemon.stop();
    await fake.close();
    await Deno.remove(daemon.stateDir, { recursive: true }).catch(() => {});
    await Deno.remove(daemon.workspace, { recursive: true }).catch(() => {});
  }
}

/** The result of the first cell one input makes the (scripted) fake model run. */
/** Posts the daemon's token to `/auth` from its own page's origin, as the token screen does. */
function postAuth(daemon: TestDaemon) {
  return rawRequest(daemon.port, {
    method: "POST",
    path: "/auth",
    headers: {
      host: `127.0.0.1:${daemon.port}`,
      origin: `http://127.0.0.1:${daemon.port}`,
      "content-type": "application/json",
    },
    body: JSON.stringify({ token: daemon.token }),
  });
}

async function runCell(daemon: TestDaemon): Promise<Record<string, unknown>> {
  const client = await connectLane({ port: daemon.port, token: daemon.token });
  try {
    await client.request({ kind: "input", client_msg_id: crypto.randomUUID(), text: "go" });
    const finished = await waitRecord(client, "cell.finished");
    return finished.data.result as Record<string, unknown>;
  } finally {
    await client.close();
  }
}

Deno.test("a page on another localhost port, a page without the token and a rebound Host are refused before any input", async () => {
  await withDaemon({}, async (daemon) => {
    const own = `http://127.0.0.1:${daemon.port}`;
    // The bypass as measured: a loopback Origin on another port no longer gets a lane.
    const foreign = await rawSocket(daemon.port, { origin: "http://localhost:3000" });
    assert.equal(foreign.response.status, 403);
    assert.match(foreign.response.body, /Origin must be the daemon's own origin/);
    foreign.close();
    // The daemon's own origin without the cookie or a token: refused at hello, before input.
    const page = await connectLane({ port: daemon.port, headers: { origin: own } });
    const refusal = page.messages.find((m) => m.kind === "error");
    assert.equal(refusal?.kind === "error" && refusal.code, "token_missing");
    assert.equal((await page.closed).code, 4401);
    // A rebound DNS name reaches the port but names itself in Host.
    const rebound = await rawRequest(daemon.port, {
      path: "/health",
      headers: { host: `evil.example:${daemon.port}` },
    });
    assert.equal(rebound.status, 403);
    assert.match(rebound.body, /Host must be a loopback host/);
    const noHost = await rawRequest(daemon.port, { path: "/health" });
    assert.equal(noHost.status, 403);
    const fine = await rawRequest(daemon.port, {
      path: "/health",
      headers: { host: `127.0.0.1:${daemon.port}` },
    });
    assert.equal(fine.status, 200);
    // Nothing was admitted by any of them.
    const operator = await connectLane({ port: daemon.port, token: daemon.token });
    assert.equal(
      operator.messages.filter((m) => m.kind === "record" && m.type === "input.admitted").length,
      0,
    );
    await operator.close();
  });
});

Deno.test("the token posted to /auth gives the page a cookie its lane is let in with", async () => {
  await withDaemon({}, async (daemon) => {
    const own = `http://127.0.0.1:${daemon.port}`;
    const auth = await postAuth(daemon);
    assert.equal(auth.status, 200);
    const cookie = auth.headers["set-cookie"].split(";")[0];
    assert.match(auth.headers["set-cookie"], /HttpOnly; SameSite=Strict$/);
    const page = await connectLane({ port: daemon.port, headers: { origin: own, cookie } });
    const welcome = page.messages.find((m) => m.kind === "welcome");
    assert.equal(welcome?.kind === "welcome" && welcome.role, "operator");
    const ack = await page.request({ kind: "input", client_msg_id: "c1", text: "hi" });
    assert.equal(ack.kind, "ack");
    await page.close();
  });
});

/** What a confined process tries; every check but the workspace write must fail. */
function checksScript(parts: { state: string; outside: string; pid: number; port: number }) {
  return [
    "import json, socket",
    `STATE, OUTSIDE, DPID, PORT = ${JSON.stringify(parts.state)}, ${
      JSON.stringify(parts.outside)
    }, ${parts.pid}, ${parts.port}`,
    "WHO = '__WHO__'",
    "def attempt(fn):",
    "    try:",
    "        fn()",
    "        return 'allowed'",
    "    except Exception as e:",
    "        return type(e).__name__",
    "def plant():",
    "    with open(OUTSIDE + '/planted-' + WHO, 'w') as f:",
    "        f.write('x')",
    "def made():",
    "    with open('made-by-' + WHO + '.txt', 'w') as f:",
    "        f.write('ok')",
    "result = {",
    "    'token': attempt(lambda: open(STATE + '/operator.token').read()),",
    "    'store': attempt(lambda: open(STATE + '/runtime.sqlite', 'rb').read(16)),",
    "    'environ': attempt(lambda: open('/proc/%d/environ' % DPID, 'rb').read()),",
    "    'outside_read': attempt(lambda: open(OUTSIDE + '/secret.txt').read()),",
    "    'outside_write': attempt(plant),",
    "    'port': attempt(lambda: socket.create_connection(('127.0.0.1', PORT), timeout=3).close()),",
    "    'workspace': attempt(made),",
    "}",
    "if __name__ == '__main__':",
    "    print(json.dumps(result))",
  ].join("\n");
}

Deno.test("a cell, a subprocess of a cell and a workspace.run child cannot reach the token, the store, the daemon's environment, outside files or the daemon's port; workspace work succeeds", async () => {
  const outside = await Deno.makeTempDir({ prefix: "klbr-outside-" });
  await Deno.writeTextFile(join(outside, "secret.txt"), "not for cells");
  try {
    await withDaemon(
      { env: { KLBR_TEST_SECRET: "only-the-daemon-knows" } },
      async (daemon, fake) => {
        const health = await (await fetch(`${daemon.url}/health`)).json();
        assert.equal(
          health.sandbox,
          "bwrap",
          `the sandbox must run here: ${health.sandbox_reason}`,
        );
        const checks = checksScript({
          state: daemon.stateDir,
          outside,
          pid: daemon.pid,
          port: daemon.port,
        });
        const code = [
          "import json, subprocess, sys",
          `CHECKS = ${JSON.stringify(checks)}`,
          "g = {'__name__': 'cell'}",
          "exec(CHECKS.replace('__WHO__', 'cell'), g)",
          "out = {'cell': g['result']}",
          "sub = subprocess.run([sys.executable, '-c', CHECKS.replace('__WHO__', 'subprocess')],",
          "                     capture_output=True, text=True)",
          "out['subprocess'] = json.loads(sub.stdout or '{}') or sub.stderr",
          "r = await run(['python3', '-c', CHECKS.replace('__WHO__', 'run')], timeout=60)",
          "out['run'] = json.loads(r.stdout.decode() or '{}') or r.stderr.decode()",
          "print('RESULT ' + json.dumps(out))",
          "wait()",
        ].join("\n");
        fake.enqueue({ toolCall: { code } });
        const result = await runCell(daemon);
        const stdout = String(result.stdout);
        const line = stdout.split("\n").find((l) => l.startsWith("RESULT "));
        assert.ok(line, `no result: ${stdout} ${JSON.stringify(result.error)}`);
        const out = JSON.parse(line.slice("RESULT ".length));
        for (const who of ["cell", "subprocess", "run"]) {
          const r = out[who];
          assert.equal(typeof r, "object", `${who}: ${JSON.stringify(r)}`);
          for (
            const check of ["token", "store", "environ", "outside_read", "outside_write", "port"]
          ) {
            assert.notEqual(r[check], "allowed", `${who} could ${check}`);
          }
          assert.equal(r.workspace, "allowed", `${who} could not write its workspace`);
          assert.equal(
            await Deno.readTextFile(join(daemon.workspace, `made-by-${who}.txt`)),
            "ok",
          );
        }
        assert.deepEqual([...Deno.readDirSync(outside)].map((e) => e.name), ["secret.txt"]);
      },
    );
  } finally {
    await Deno.remove(outside, { recursive: true });
  }
});

Deno.test("in the default layout (state inside the workspace) the workspace API and the sandbox keep the state directory out", async () => {
  const workspace = await Deno.makeTempDir({ prefix: "klbr-checkout-" });
  const stateDir = join(workspace, ".klbr");
  await Deno.mkdir(stateDir);
  const code = [
    "import json",
    "out = {}",
    "async def attempt(name, make):",
    "    try:",
    "        value = await make()",
    "        out[name] = 'allowed: ' + repr(value)[:80]",
    "    except Exception as e:",
    "        out[name] = type(e).__name__ + ': ' + str(e)[:160]",
    "async def plain_read():",
    "    return open('.klbr/operator.token').read()",
    "async def plain_write():",
    "    with open('.klbr/planted', 'w') as f:",
    "        f.write('x')",
    "await attempt('open_token', lambda: open_file('.klbr/operator.token'))",
    "await attempt('plant_skill', lambda: open_file('.klbr/skills/planted/SKILL.md', create=True))",
    "await attempt('delete_config', lambda: delete('.klbr/config.kdl'))",
    "await attempt('ls_state', lambda: ls('.klbr'))",
    "await attempt('search_state', lambda: search('llm', '.klbr'))",
    "await attempt('run_in_state', lambda: run(['ls'], cwd='.klbr'))",
    "from klbr import rpc",
    "import klbr.code as code",
    // The host's code domain reads files itself: asked straight, past the Python checks.
    "await attempt('code_rpc', lambda: rpc.call('code.lines', {'path': '.klbr/config.kdl', 'start': 1, 'end': 1}))",
    "await attempt('code_find', lambda: code.find('llm', '.klbr/*'))",
    "await attempt('plain_read', plain_read)",
    "await attempt('plain_write', plain_write)",
    "out['ls'] = [e.path for e in await ls()]",
    "out['search'] = [m.path for m in (await search('llm')).matches]",
    "print('RESULT ' + json.dumps(out))",
    "wait()",
  ].join("\n");
  try {
    await withDaemon({ stateDir, workspace, script: [{ toolCall: { code } }] }, async (daemon) => {
      const token = await Deno.readTextFile(join(stateDir, "operator.token"));
      const result = await runCell(daemon);
      const line = String(result.stdout).split("\n").find((l) => l.startsWith("RESULT "));
      assert.ok(line, JSON.stringify(result));
      const out = JSON.parse(line.slice("RESULT ".length));
      for (
        const name of ["open_token", "plant_skill", "delete_config", "ls_state", "search_state"]
      ) {
        assert.match(out[name], /^WorkspaceEscape: .*inside the state directory/, name);
      }
      assert.match(
        out.code_rpc,
        /^RpcError: code.lines failed \(path_escape\): .*path is inside the state directory/,
      );
      assert.match(out.code_find, /inside the state directory/);
      // The workbench refuses it first; the host would too (the workspace.run unit tests).
      assert.match(out.run_in_state, /^WorkspaceEscape: .*inside the state directory/);
      // Inside the sandbox the state directory is an empty, read-only directory.
      assert.match(out.plain_read, /^FileNotFoundError/);
      assert.match(out.plain_write, /^OSError: .*Read-only file system/);
      assert.ok(!out.ls.includes(".klbr"), `ls shows the state directory: ${out.ls}`);
      assert.deepEqual(out.search, [], "search read the state directory");
      assert.equal(await Deno.readTextFile(join(stateDir, "operator.token")), token);
      await Deno.stat(join(stateDir, "config.kdl"));
      await assert.rejects(Deno.stat(join(stateDir, "skills", "planted")));
      await assert.rejects(Deno.stat(join(stateDir, "planted")));
    });
  } finally {
    await Deno.remove(workspace, { recursive: true }).catch(() => {});
  }
});

Deno.test("inputs whose client_msg_id holds a lone surrogate are refused, so three ids never share a key", async () => {
  await withDaemon({}, async (daemon) => {
    const client = await connectLane({ port: daemon.port, token: daemon.token, client: "sur" });
    const replies = [];
    for (const id of ["\ud800", "\udbff", "\ufffd"]) {
      replies.push(await client.request({ kind: "input", client_msg_id: id, text: `id ${id}` }));
    }
    assert.deepEqual(replies.map((r) => r.kind === "error" ? r.code : r.kind), [
      "invalid_input",
      "invalid_input",
      "ack",
    ]);
    assert.equal(replies[2].kind === "ack" && replies[2].duplicate, false);
    const admitted = await waitRecord(client, "input.admitted");
    assert.equal(admitted.data.body, "id \ufffd");
    await client.close();
  });
});

Deno.test('without bubblewrap the daemon starts unconfined and says so; sandbox "required" refuses to start', async () => {
  const env = { KLBR_BWRAP: "/nonexistent/bwrap" };
  await withDaemon({ env }, async (daemon) => {
    const health = await (await fetch(`${daemon.url}/health`)).json();
    assert.equal(health.sandbox, "none");
    assert.equal(
      health.sandbox_reason,
      "bubblewrap is not installed (no /nonexistent/bwrap; Debian package bubblewrap)",
    );
    assert.match(daemon.logs(), /WARN {2}sandbox\.unconfined the workbench is UNCONFINED/);
  });
  await assert.rejects(
    withDaemon({ env, extraConfig: 'sandbox "required"\n' }, () => Promise.resolve()),
    /cannot serve: the configuration says sandbox "required" but the workbench cannot be confined \(got bubblewrap is not installed/,
  );
});

Deno.test("/health reports the sandbox; sandbox { network #true } gives cells the network", async () => {
  await withDaemon({ extraConfig: "sandbox { network #true }\n" }, async (daemon, fake) => {
    const health = await (await fetch(`${daemon.url}/health`)).json();
    assert.deepEqual([health.sandbox, health.sandbox_reason, health.sandbox_network], [
      "bwrap",
      null,
      true,
    ]);
    const code = [
      "import socket",
      `socket.create_connection(('127.0.0.1', ${daemon.port}), timeout=3).close()`,
      "print('connected')",
      "wait()",
    ].join("\n");
    fake.enqueue({ toolCall: { code } });
    const result = await runCell(daemon);
    assert.equal(result.stdout, "connected\n", JSON.stringify(result.error));
  });
});

Deno.test("a client that does not read loses live output instead of growing the daemon's buffers", async () => {
  const cells = 14;
  const code = [
    "import sys",
    "sys.stdout.write('x' * (1 << 20))",
    "sys.stderr.write('y' * (1 << 20))",
  ].join("\n");
  const script = Array.from({ length: cells }, () => ({ toolCall: { code } }));
  await withDaemon({ script }, async (daemon) => {
    // Says hello, then never reads again: everything sent to it piles up in the daemon.
    const stalled = await rawSocket(daemon.port);
    assert.equal(stalled.response.status, 101);
    await stalled.send(JSON.stringify({ kind: "hello", token: daemon.token, client: "stalled" }));
    const reader = await connectLane({ port: daemon.port, token: daemon.token });
    await reader.request({ kind: "input", client_msg_id: "flood", text: "print a lot" });
    await waitRecord(reader, "frame.finished");
    // The turn's step limit may end it before every scripted cell ran; ten are plenty.
    const ran = reader.messages.filter((m) => m.kind === "record" && m.type === "cell.finished");
    assert.ok(ran.length >= 10, `only ${ran.length} cells ran`);
    const { lanes } = await (await fetch(`${daemon.url}/health`)).json();
    // 2 MiB of live output per cell, 20 MiB or more in all: most of it dropped for the stalled client,
    // and what it holds stays near the 1 MiB mark instead of growing with the output.
    assert.ok(lanes.live_dropped > 100, JSON.stringify(lanes));
    assert.ok(lanes.peak_buffered_bytes < 4 * (1 << 20), JSON.stringify(lanes));
    // The reading client got its live output.
    assert.ok(reader.messages.filter((m) => m.kind === "cell.output").length >= 10 * 16);
    stalled.close();
    await reader.close();
  });
});

/** Runs `main.ts <args>` as the `klbr` task does. */
async function klbr(args: string[], env: Record<string, string> = {}) {
  const { REPO_ROOT } = await import("../../_helpers/daemon.ts");
  const config = JSON.parse(await Deno.readTextFile(join(REPO_ROOT, "deno.json")));
  const flags = (config.tasks.klbr as string).split(/\s+/).filter((p) => p.startsWith("--allow-"));
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", ...flags, join(REPO_ROOT, "main.ts"), ...args],
    cwd: REPO_ROOT,
    env: { NO_COLOR: "1", ...env },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const decode = (b: Uint8Array) => new TextDecoder().decode(b);
  return { code: out.code, stdout: decode(out.stdout), stderr: decode(out.stderr) };
}

Deno.test("token rotate refuses the old token, the old cookie and closes old sessions", async () => {
  await withDaemon({}, async (daemon) => {
    const own = `http://127.0.0.1:${daemon.port}`;
    const auth = await postAuth(daemon);
    const cookie = auth.headers["set-cookie"].split(";")[0];
    const open = await connectLane({ port: daemon.port, token: daemon.token });
    const rotated = await klbr([
      "token",
      "rotate",
      "--state",
      daemon.stateDir,
      "--port",
      String(daemon.port),
    ]);
    assert.equal(rotated.code, 0, rotated.stderr);
    assert.match(rotated.stdout, /^rotated: the daemon refuses the old token/);
    assert.equal((await open.closed).code, 4401, "the session made with the old token ends");
    const fresh = (await Deno.readTextFile(join(daemon.stateDir, "operator.token"))).trim();
    assert.notEqual(fresh, daemon.token);

    const oldToken = await connectLane({ port: daemon.port, token: daemon.token });
    const wrong = oldToken.messages.find((m) => m.kind === "error");
    assert.equal(wrong?.kind === "error" && wrong.code, "token_wrong");
    const oldCookie = await connectLane({ port: daemon.port, headers: { origin: own, cookie } });
    const revoked = oldCookie.messages.find((m) => m.kind === "error");
    assert.equal(revoked?.kind === "error" && revoked.code, "token_revoked");
    const renewed = await connectLane({ port: daemon.port, token: fresh });
    const welcome = renewed.messages.find((m) => m.kind === "welcome");
    assert.equal(welcome?.kind === "welcome" && welcome.role, "operator");
    await renewed.close();
    assert.match(daemon.logs(), /auth\.rotated the operator token was rotated/);
  });
});

Deno.test("token rotate without a running daemon replaces the file", async () => {
  const state = await Deno.makeTempDir({ prefix: "klbr-state-" });
  try {
    assert.equal((await klbr(["init", "--state", state])).code, 0);
    const before = await Deno.readTextFile(join(state, "operator.token"));
    const rotated = await klbr(["token", "rotate", "--state", state]);
    assert.equal(rotated.code, 0, rotated.stderr);
    assert.match(rotated.stdout, /no daemon was running/);
    const after = await Deno.readTextFile(join(state, "operator.token"));
    assert.match(after.trim(), /^[0-9a-f]{64}$/);
    assert.notEqual(after, before);
    assert.equal((await Deno.stat(join(state, "operator.token"))).mode! & 0o777, 0o600);
    const usage = await klbr(["token", "--state", state]);
    assert.equal(usage.code, 2);
    assert.match(usage.stderr, /usage: klbr token rotate/);
  } finally {
    await Deno.remove(state, { recursive: true });
  }
});

Deno.test("each permission flag of the daemon is what doctor prints, and the daemon cannot read outside its read set", async () => {
  await withDaemon({}, async (daemon) => {
    const { REPO_ROOT } = await import("../../_helpers/daemon.ts");
    const ps = await new Deno.Command("ps", {
      args: ["-ww", "-o", "args=", "-p", String(daemon.pid)],
      stdout: "piped",
    }).output();
    const running = new TextDecoder().decode(ps.stdout).trim().split(/\s+/)
      .filter((part) => part.startsWith("--allow-"));
    assert.equal(running.length, 6, running.join(" "));
    const config = JSON.parse(await Deno.readTextFile(join(REPO_ROOT, "deno.json")));
    const flags = (config.tasks.doctor as string).split(/\s+/).filter((p) =>
      p.startsWith("--allow-")
    );
    const doctor = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        ...flags,
        join(REPO_ROOT, "main.ts"),
        "doctor",
        "--state",
        daemon.stateDir,
        "--config",
        join(daemon.stateDir, "test-config.kdl"),
        "--port",
        "0",
      ],
      cwd: REPO_ROOT,
      env: {
        NO_COLOR: "1",
        KLBR_WORKSPACE: daemon.workspace,
        KLBR_SKILLS_DIR: join(REPO_ROOT, "skills"),
      },
      stdout: "piped",
    }).output();
    const printed = new TextDecoder().decode(doctor.stdout).split("\n")
      .filter((line) => line.startsWith("  --allow-")).map((line) => line.trim());
    assert.deepEqual(running, printed);
    for (const unscoped of ["--allow-env", "--allow-sys", "--allow-run", "--allow-read"]) {
      assert.ok(!running.includes(unscoped), `${unscoped} is unscoped`);
    }
    assert.ok(running.includes("--allow-sys=hostname"));
    assert.match(new TextDecoder().decode(doctor.stdout), /^sandbox bwrap \(/m);

    // A release outside the read set: the daemon's own permissions refuse to read it.
    const outside = await Deno.makeTempDir({ prefix: "klbr-outside-" });
    try {
      const release = join(outside, "ab".repeat(32));
      await Deno.mkdir(release);
      await Deno.writeTextFile(join(release, "attention.py"), "def plan(**_): return {}\n");
      const operator = await connectLane({ port: daemon.port, token: daemon.token });
      const reply = await operator.request({
        kind: "op.activate",
        session: "default",
        epoch: 1,
        release,
      });
      assert.equal(reply.kind, "error", JSON.stringify(reply).slice(0, 300));
      assert.equal(reply.kind === "error" && reply.code, "forbidden", JSON.stringify(reply));
      assert.match(
        reply.kind === "error" ? reply.message : "",
        /permissions do not reach there.*read access/,
      );
      await operator.close();
    } finally {
      await Deno.remove(outside, { recursive: true });
    }
  });
});

Deno.test("serve refuses an address that only looks like loopback, clearly and before any state", async () => {
  const { REPO_ROOT, serveFlags } = await import("../../_helpers/daemon.ts");
  const state = join(await Deno.makeTempDir({ prefix: "klbr-state-" }), "state");
  try {
    for (const host of ["127.999.0.1", "127.0.0.1.evil.com", "::ffff:127.0.0.1", "0:0::2"]) {
      const out = await new Deno.Command(Deno.execPath(), {
        args: [
          "run",
          ...serveFlags(),
          join(REPO_ROOT, "main.ts"),
          "serve",
          "--state",
          state,
          "--host",
          host,
        ],
        stdout: "piped",
        stderr: "piped",
      }).output();
      const stderr = new TextDecoder().decode(out.stderr);
      assert.equal(out.code, 2, stderr);
      assert.equal(
        stderr,
        `klbr: cannot serve: the bind address must be loopback (127.0.0.0/8, ::1 or localhost) (got ${host})\n`,
        "a refusal, never an uncaught crash",
      );
      await assert.rejects(Deno.stat(state), Deno.errors.NotFound, "no state was created");
    }
  } finally {
    await Deno.remove(join(state, ".."), { recursive: true });
  }
});
