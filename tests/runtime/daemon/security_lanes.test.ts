// The lanes' side of "no lock-out without the token", against the real daemon (started as
// `serve` starts it, as root in CI): sockets that never say hello do not hold the connection
// cap, `/auth` refusals are rate-limited with a bounded log, a cookie the daemon did not issue
// is ignored, a refused `since` closes its socket at once, and the token's case is not a
// reason to refuse it.

import assert from "node:assert/strict";
import { join } from "node:path";
import { loadConfig } from "../../../runtime/config/mod.ts";
import { startFakeOpenAI } from "../../fakes/openai_server.ts";
import { startTestDaemon, type TestDaemon } from "../../_helpers/daemon.ts";
import { connectLane } from "../../_helpers/lane_client.ts";
import { rawRequest, rawSocket } from "../../_helpers/raw_http.ts";

/** Starts a daemon with a fake model; `fn` runs; both are stopped and their dirs removed. */
async function withDaemon(
  options: Parameters<typeof startTestDaemon>[0],
  fn: (daemon: TestDaemon) => Promise<void>,
): Promise<void> {
  const fake = startFakeOpenAI({ fallback: () => ({ toolCall: { code: "wait()" } }) });
  const daemon = await startTestDaemon({ modelUrl: fake.url, ...options });
  try {
    await fn(daemon);
  } finally {
    await daemon.stop();
    await fake.close();
    await Deno.remove(daemon.stateDir, { recursive: true }).catch(() => {});
    await Deno.remove(daemon.workspace, { recursive: true }).catch(() => {});
  }
}

/** Runs `deno task klbr …` as the owner runs it (the task's own flags). */
async function klbr(args: string[]) {
  const { REPO_ROOT } = await import("../../_helpers/daemon.ts");
  const config = JSON.parse(await Deno.readTextFile(join(REPO_ROOT, "deno.json")));
  const flags = (config.tasks.klbr as string).split(/\s+/).filter((p) => p.startsWith("--allow-"));
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", ...flags, join(REPO_ROOT, "main.ts"), ...args],
    cwd: REPO_ROOT,
    env: { NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const decode = (b: Uint8Array) => new TextDecoder().decode(b);
  return { code: out.code, stdout: decode(out.stdout), stderr: decode(out.stderr) };
}

/** Posts `token` to `/auth` from the daemon's own page's origin, as the token screen does. */
function postAuth(daemon: TestDaemon, token: string) {
  return rawRequest(daemon.port, {
    method: "POST",
    path: "/auth",
    headers: {
      host: `127.0.0.1:${daemon.port}`,
      origin: `http://127.0.0.1:${daemon.port}`,
      "content-type": "application/json",
    },
    body: JSON.stringify({ token }),
  });
}

/** Reads a raw socket until its close frame; returns the close code, or null at end of stream. */
async function closeCode(socket: Awaited<ReturnType<typeof rawSocket>>): Promise<number | null> {
  for (let i = 0; i < 100; i++) {
    const frame = await socket.read();
    if (frame === null) return null;
    if (frame[0] === 0x88) return (frame[2] << 8) | frame[3];
  }
  return null;
}

/** The lines of the daemon's log that name `event`. */
function linesOf(daemon: TestDaemon, event: string): string[] {
  return daemon.logs().split("\n").filter((line) => line.includes(` ${event} `));
}

Deno.test("as many silent sockets as max_connections do not stop `klbr status` or a token hello; each is closed at the hello deadline", async () => {
  await withDaemon({}, async (daemon) => {
    const { config } = await loadConfig(join(daemon.stateDir, "test-config.kdl"), { env: {} });
    const limit = config.lanes.max_connections;
    // The attack as measured: upgraded sockets that never send a byte.
    const silent = await Promise.all(Array.from({ length: limit }, () => rawSocket(daemon.port)));
    assert.deepEqual(new Set(silent.map((s) => s.response.status)), new Set([101]));

    const status = await klbr(["status", "--json", "--state", daemon.stateDir]);
    assert.equal(status.code, 0, status.stderr);
    assert.equal(JSON.parse(status.stdout).sessions.default.state, "running");
    const lane = await connectLane({ port: daemon.port, token: daemon.token });
    const welcome = lane.messages.find((m) => m.kind === "welcome");
    assert.equal(welcome?.kind === "welcome" && welcome.role, "operator");
    assert.equal((await lane.request({ kind: "ping" })).kind, "pong");

    const health = await (await fetch(`${daemon.url}/health`)).json();
    assert.equal(health.lanes.pending, limit, "the silent sockets wait for hello, apart");
    assert.equal(health.lanes.connections, 1, "only the lane that said hello counts");

    // None of them says hello: each is closed 4408 at the deadline, and the log says so once.
    for (const socket of silent) {
      assert.equal(await closeCode(socket), 4408);
      socket.close();
    }
    const after = await (await fetch(`${daemon.url}/health`)).json();
    assert.equal(after.lanes.pending, 0);
    await lane.close();
    const timeouts = linesOf(daemon, "lane.hello_timeout");
    assert.ok(timeouts.length >= 1 && timeouts.length <= 2, timeouts.join("\n"));
  });
});

/**
 * Opens `n` TCP connections one after another that never complete a request: the odd ones send
 * nothing, the even ones the first line of one. `closed[i]` turns true at EOF.
 */
async function silentConnections(port: number, n: number) {
  const conns: Deno.TcpConn[] = [];
  const closed: boolean[] = [];
  const partial = new TextEncoder().encode("GET /health HTTP/1.1\r\n");
  for (let i = 0; i < n; i++) {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port });
    if (i % 2 === 0) await conn.write(partial);
    conns.push(conn);
    closed.push(false);
    conn.read(new Uint8Array(64)).then(
      (read) => void (read === null && (closed[i] = true)),
      () => void (closed[i] = true),
    );
  }
  const close = () => conns.forEach((conn) => conn.close());
  return { closed, close };
}

/** Waits (at most `ms`) until `done()`; says whether it came. */
async function until(done: () => boolean, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (!done() && Date.now() < end) await new Promise((r) => setTimeout(r, 10));
  return done();
}

Deno.test("connections that never send a request: past max_pending_hello the oldest is closed, the rest at the hello deadline; the owner is served meanwhile", async () => {
  const lanes = "lanes {\n    max_pending_hello 8\n    hello_timeout_ms 3000\n}\n";
  await withDaemon({ extraConfig: lanes }, async (daemon) => {
    // The attack: connections that hold a file descriptor each and never finish a request.
    const flood = await silentConnections(daemon.port, 20);
    const oldest = () => flood.closed.slice(0, 12).every(Boolean);
    assert.ok(await until(oldest, 2_000), `closed: ${flood.closed}`);
    assert.deepEqual(flood.closed.slice(12), Array(8).fill(false), "the newest 8 wait");
    // The owner, meanwhile: a request and a lane that says hello.
    assert.equal((await fetch(`${daemon.url}/health`)).status, 200);
    const lane = await connectLane({ port: daemon.port, token: daemon.token });
    assert.equal((await lane.request({ kind: "ping" })).kind, "pong");
    // Nobody speaks: the newest are closed at the deadline too; the owner's lane stays.
    assert.ok(await until(() => flood.closed.every(Boolean), 6_000), `closed: ${flood.closed}`);
    assert.equal((await lane.request({ kind: "ping" })).kind, "pong");
    await lane.close();
    flood.close();
  });
});

Deno.test("/auth past its rate answers 429 with Retry-After; the right token still gets its cookie at once; the log stays bounded", async () => {
  await withDaemon({}, async (daemon) => {
    const wrong = daemon.token.replace(/^./, (c) => (c === "0" ? "1" : "0"));
    const answers = [];
    for (let i = 0; i < 100; i++) answers.push(await postAuth(daemon, wrong));
    assert.equal(answers[0].status, 401);
    assert.equal(JSON.parse(answers[0].body).code, "token_wrong");
    const limited = answers.filter((a) => a.status === 429);
    assert.ok(limited.length >= 50, `429s: ${limited.length} of 100`);
    assert.match(limited[0].headers["retry-after"], /^[1-9]\d*$/);
    const body = JSON.parse(limited[0].body);
    assert.equal(body.code, "too_many_attempts");
    assert.match(body.message, /^cannot authorise: too many refused attempts from 127\.0\.0\.1/);
    assert.equal(limited[0].headers["set-cookie"], undefined);

    // Loopback gives every local process the same address: the owner's token is not kept out.
    const owner = await postAuth(daemon, daemon.token);
    assert.equal(owner.status, 200);
    assert.match(owner.headers["set-cookie"], /HttpOnly; SameSite=Strict$/);

    // One line at the first refusal; the rest are counted, not written one by one.
    const refusals = linesOf(daemon, "auth.refused");
    assert.ok(refusals.length >= 1 && refusals.length <= 2, refusals.join("\n"));
  });
});

Deno.test("a cookie the daemon did not issue is ignored; one issued under an older token is revoked", async () => {
  await withDaemon({}, async (daemon) => {
    const own = `http://127.0.0.1:${daemon.port}`;
    const issued = (await postAuth(daemon, daemon.token)).headers["set-cookie"].split(";")[0];
    const name = issued.slice(0, issued.indexOf("="));
    const hello = async (cookie: string) => {
      const page = await connectLane({ port: daemon.port, headers: { origin: own, cookie } });
      const first = page.messages.find((m) => m.kind === "welcome" || m.kind === "error");
      await page.close();
      return first?.kind === "welcome" ? first.role : first?.kind === "error" ? first.code : "";
    };
    // Junk under the daemon's name and the old naming, before and after the real cookie: the
    // order a browser sends them in (longer paths first) does not matter.
    const junk = `${name}=junk; klbr_session_${daemon.port}=1.${"a".repeat(32)}.${"b".repeat(64)}`;
    assert.equal(await hello(`${junk}; ${issued}`), "operator");
    assert.equal(await hello(`${issued}; ${junk}`), "operator");
    // Junk alone is no cookie at all: the page is asked for the token, not told it was revoked.
    assert.equal(await hello(junk), "token_missing");

    // The daemon answers the rotation before it takes effect; a lane made with the old token
    // closing is the sign that it has.
    const open = await connectLane({ port: daemon.port, token: daemon.token });
    const rotated = await klbr(["token", "rotate", "--state", daemon.stateDir]);
    assert.equal(rotated.code, 0, rotated.stderr);
    assert.equal((await open.closed).code, 4401);
    assert.equal(await hello(issued), "token_revoked");
    assert.equal(await hello(`${junk}; ${issued}`), "token_revoked");
  });
});

Deno.test("a hello with since past the head is refused and its socket closed at once", async () => {
  await withDaemon({}, async (daemon) => {
    const client = await connectLane({ port: daemon.port, token: daemon.token, since: 1_000 });
    const refusal = client.messages.find((m) => m.kind === "error");
    assert.equal(refusal?.kind === "error" && refusal.code, "since_beyond_head");
    assert.equal((await client.closed).code, 4409, "closed at once, not at the hello deadline");
  });
});

Deno.test("the token in another case is the token; a wrong one in upper case is token_wrong", async () => {
  await withDaemon({}, async (daemon) => {
    const upper = await connectLane({ port: daemon.port, token: daemon.token.toUpperCase() });
    const welcome = upper.messages.find((m) => m.kind === "welcome");
    assert.equal(welcome?.kind === "welcome" && welcome.role, "operator");
    await upper.close();
    assert.equal((await postAuth(daemon, daemon.token.toUpperCase())).status, 200);
    const wrong = daemon.token.replace(/^./, (c) => (c === "0" ? "1" : "0")).toUpperCase();
    const refused = await connectLane({ port: daemon.port, token: wrong });
    const error = refused.messages.find((m) => m.kind === "error");
    assert.deepEqual(
      error?.kind === "error" && [error.code, error.message],
      ["token_wrong", "cannot authorise: the operator token is wrong"],
    );
    await refused.closed;
  });
});
