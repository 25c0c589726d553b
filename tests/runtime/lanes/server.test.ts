/**
 * The HTTP side of the lane server: errors through the same mapping as the socket, the
 * `Host` and `Origin` checks on every route, and the token exchanged for a session cookie.
 *
 * @module
 */

import assert from "node:assert/strict";
import { KlbrError, type Logger } from "../../../runtime/core/mod.ts";
import {
  AttemptLimiter,
  createApp,
  type LaneHost,
  OperatorAuth,
  RefusalLog,
} from "../../../runtime/lanes/mod.ts";

function keptLog(): { lines: string[]; log: Logger } {
  const lines: string[] = [];
  const line = (event: string, message: string) => lines.push(`${event}: ${message}`);
  return { lines, log: { info: line, warn: line, error: line } };
}

const NO_LANES = {} as LaneHost;
const TOKEN = "c".repeat(64);
const KEY = "7".repeat(64);
const PORT = 8765;
const OWN = `http://127.0.0.1:${PORT}`;

function app(
  health: () => Record<string, unknown> & { ok: boolean },
  log: Logger,
  auth = new OperatorAuth({ stateDir: "/nonexistent", token: TOKEN, sessionKey: KEY }),
) {
  return createApp({
    lanes: NO_LANES,
    auth,
    address: () => ({ host: "127.0.0.1", port: PORT }),
    log,
    health,
  });
}

/** A request as a browser on the daemon's own page sends it. */
function own(path: string, init: RequestInit = {}): Request {
  return new Request(`${OWN}${path}`, {
    ...init,
    headers: { host: `127.0.0.1:${PORT}`, ...init.headers as Record<string, string> },
  });
}

Deno.test("`createApp()` answers a KlbrError with its code, message and status", async () => {
  const { lines, log } = keptLog();
  const server = app(() => {
    throw new KlbrError("shutting_down", "cannot answer: the daemon is shutting down", {
      status: 503,
    });
  }, log);
  const response = await server.request(own("/health"));
  assert.equal(response.status, 503);
  assert.deepEqual(await response.json(), {
    code: "shutting_down",
    message: "cannot answer: the daemon is shutting down",
  });
  assert.deepEqual(lines, [], "a refusal is not a bug");
});

Deno.test("`createApp()` answers an unexpected error `internal` and logs its stack", async () => {
  const { lines, log } = keptLog();
  const server = app(() => {
    throw new RangeError("secret detail");
  }, log);
  const response = await server.request(own("/health"));
  assert.equal(response.status, 500);
  const body = await response.json();
  assert.deepEqual(body, { code: "internal", message: "internal error" });
  assert.equal(lines.length, 1);
  assert.match(lines[0], /^internal: unexpected error: RangeError: secret detail\n\s+at /);
});

// Each variant a page on another origin, or a rebound DNS name, could send. The daemon
// answers state only to its own origin (or to a native client, which sends none).
const ORIGINS: [string, string][] = [
  ["null", "a sandboxed frame or a file: page"],
  ["http://127.0.0.1:3000", "another port on the same host"],
  ["http://localhost:8765", "another name for the same port: a different origin"],
  ["http://127.0.0.1.evil.com:8765", "a name that starts like loopback"],
  ["http://localhost:1@evil.com", "userinfo before a foreign host"],
  ["http://[::1]:8765", "IPv6 loopback, which the daemon does not listen on"],
  ["HTTP://127.0.0.1:8765", "upper case: never how a browser writes an origin"],
  ["https://127.0.0.1:8765", "another scheme"],
];

Deno.test("`createApp()` refuses every Origin but its own on /health, /auth and /v2", async () => {
  const { log } = keptLog();
  const server = app(() => ({ ok: true }), log);
  for (const [origin, why] of ORIGINS) {
    for (const [method, path] of [["GET", "/health"], ["POST", "/auth"], ["GET", "/v2"]]) {
      const response = await server.request(own(path, { method, headers: { origin } }));
      assert.equal(response.status, 403, `${why}: ${method} ${path}`);
      assert.deepEqual(await response.json(), {
        code: "forbidden",
        message: `cannot answer: Origin must be the daemon's own origin ${OWN} (got ${
          JSON.stringify(origin)
        })`,
      }, why);
    }
  }
  // Its own origin, and no Origin at all (a native client), are answered.
  assert.equal((await server.request(own("/health", { headers: { origin: OWN } }))).status, 200);
  assert.equal((await server.request(own("/health"))).status, 200);
});

Deno.test("`createApp()` refuses a Host that is not loopback with the daemon's port (DNS rebinding)", async () => {
  const { log } = keptLog();
  const server = app(() => ({ ok: true }), log);
  const hosts: [string | undefined, string][] = [
    ["evil.com:8765", "a rebound name"],
    ["evil.com", "a rebound name without a port"],
    ["127.0.0.1.evil.com:8765", "a name that starts like loopback"],
    ["localhost:1@evil.com", "userinfo before a foreign host"],
    ["127.0.0.1:3000", "another port"],
    ["127.999.0.1:8765", "not an address"],
    ["127.0.0.1", "no port"],
    [undefined, "missing"],
  ];
  for (const [host, why] of hosts) {
    const request = new Request(`${OWN}/health`, {
      headers: host === undefined ? {} : { host },
    });
    const response = await server.request(request);
    assert.equal(response.status, 403, why);
    const body = await response.json();
    assert.equal(body.code, "forbidden", why);
    assert.equal(
      body.message,
      host === undefined
        ? "cannot answer: the request has no Host header (got none)"
        : `cannot answer: Host must be a loopback host with port ${PORT} (got ${
          JSON.stringify(host)
        })`,
      why,
    );
  }
  // Loopback names with the port are answered; upper case is the same host name.
  for (const host of ["127.0.0.1:8765", "localhost:8765", "LOCALHOST:8765", "[::1]:8765"]) {
    assert.equal(
      (await server.request(new Request(`${OWN}/health`, { headers: { host } })))
        .status,
      200,
      host,
    );
  }
});

Deno.test("`createApp()` sends a page asked for under another loopback name to its own origin", async () => {
  const { log } = keptLog();
  const server = app(() => ({ ok: true }), log);
  const response = await server.request(
    new Request(`http://localhost:${PORT}/index.html`, { headers: { host: `localhost:${PORT}` } }),
  );
  assert.equal(response.status, 307);
  assert.equal(response.headers.get("location"), `${OWN}/index.html`);
});

Deno.test("`createApp()` keeps the query of a page it sends to its own origin (`?session=` picks the page's session)", async () => {
  const { log } = keptLog();
  const server = app(() => ({ ok: true }), log);
  const response = await server.request(
    new Request(`http://localhost:${PORT}/?session=work`, {
      headers: { host: `localhost:${PORT}` },
    }),
  );
  assert.equal(response.status, 307);
  assert.equal(response.headers.get("location"), `${OWN}/?session=work`);
});

/** Posts `token` to `/auth` from the daemon's own page. */
function postAuth(server: ReturnType<typeof app>, token: unknown) {
  return server.request(own("/auth", {
    method: "POST",
    headers: { origin: OWN, "content-type": "application/json" },
    body: JSON.stringify({ token }),
  }));
}

Deno.test("`POST /auth` exchanges the token for an HttpOnly SameSite=Strict cookie; a wrong one gets none", async () => {
  const { lines, log } = keptLog();
  const auth = new OperatorAuth({ stateDir: "/nonexistent", token: TOKEN, sessionKey: KEY });
  const server = app(() => ({ ok: true }), log, auth);
  const good = await postAuth(server, TOKEN);
  assert.equal(good.status, 200);
  const cookie = good.headers.get("set-cookie") ?? "";
  assert.match(
    cookie,
    /^klbr_8765_[0-9a-f]{12}=\d+\.[0-9a-f]{32}\.[0-9a-f]{16}\.[0-9a-f]{64}; Max-Age=2592000; Path=\/; HttpOnly; SameSite=Strict$/,
  );
  assert.doesNotMatch(cookie, /Domain=/i, "host-only: no Domain attribute");
  assert.equal(auth.readCookie(cookie.split(";")[0], PORT), "valid");
  assert.equal(auth.readCookie(cookie.split(";")[0], PORT + 1), "absent", "another port's name");
  assert.equal((await postAuth(server, TOKEN.toUpperCase())).status, 200, "case is no secret");

  const cases: [unknown, number, string][] = [
    [undefined, 401, "token_missing"],
    ["x".repeat(10), 400, "token_malformed"],
    ["d".repeat(64), 401, "token_wrong"],
    ["D".repeat(64), 401, "token_wrong"],
  ];
  for (const [token, status, code] of cases) {
    const response = await postAuth(server, token);
    assert.equal(response.status, status, code);
    assert.equal((await response.json()).code, code);
    assert.equal(response.headers.get("set-cookie"), null, `${code}: no cookie`);
  }
  // Refusals of one kind from one source within a minute: the first is written, the rest
  // counted (the two wrong ones are one kind).
  const tail = "(from unknown; more like it in the next 60 s are counted in one line)";
  assert.deepEqual(lines.filter((l) => l.startsWith("auth.refused")), [
    `auth.refused: refused /auth: cannot authorise: no operator token was given ${tail}`,
    `auth.refused: refused /auth: cannot authorise: a token is 64 hex characters, 0-9 and a-f (got 10 characters) ${tail}`,
    `auth.refused: refused /auth: cannot authorise: the operator token is wrong ${tail}`,
  ]);
});

Deno.test("`POST /auth` answers 429 with Retry-After past a source's rate; the right token is never refused", async () => {
  const { log } = keptLog();
  const server = app(() => ({ ok: true }), log);
  const statuses: number[] = [];
  let limited: Response | undefined;
  for (let i = 0; i < 40; i++) {
    const response = await postAuth(server, "d".repeat(64));
    statuses.push(response.status);
    if (response.status === 429) limited ??= response;
    else await response.body?.cancel();
  }
  assert.deepEqual(statuses.slice(0, 10), Array(10).fill(401), "a burst of 10 is answered");
  assert.ok(limited !== undefined, `statuses: ${statuses.join(",")}`);
  assert.match(limited.headers.get("retry-after") ?? "", /^[1-9]\d*$/);
  assert.deepEqual(await limited.json(), {
    code: "too_many_attempts",
    message: `cannot authorise: too many refused attempts from unknown; try again in ${
      limited.headers.get("retry-after")
    } s (got token_wrong)`,
  });
  assert.equal((await postAuth(server, TOKEN)).status, 200, "checked before the rate");
  const health = await (await server.request(own("/health"))).json();
  assert.equal(health.lanes.auth_refused, 40);
  assert.equal(health.lanes.auth_limited, statuses.filter((s) => s === 429).length);
});

Deno.test("`AttemptLimiter` lets a burst through, then one attempt per refill; full sources are forgotten", () => {
  let now = 0;
  const limiter = new AttemptLimiter({ perSecond: 2, burst: 3, maxSources: 2, now: () => now });
  assert.deepEqual([1, 2, 3, 4, 5].map(() => limiter.refused("a")), [0, 0, 0, 1, 1]);
  now += 500;
  assert.deepEqual([limiter.refused("a"), limiter.refused("a")], [0, 1], "one refilled");
  // Two sources are followed; a third that comes while both are limited shares a bucket.
  assert.deepEqual([1, 2, 3, 4].map(() => limiter.refused("b")), [0, 0, 0, 1]);
  assert.deepEqual([1, 2, 3, 4].map(() => limiter.refused("c")), [0, 0, 0, 1]);
  assert.equal(limiter.refused("d"), 1, "c and d share the other sources' bucket");
  // Once a's bucket has refilled, a is forgotten and a new source gets its own.
  now += 2_000;
  assert.deepEqual([1, 2, 3, 4].map(() => limiter.refused("e")), [0, 0, 0, 1]);
});

Deno.test("`RefusalLog` writes one line per event, kind and source a window, then their count", () => {
  const { lines, log } = keptLog();
  let now = 0;
  const refusals = new RefusalLog(log, { windowMs: 60_000, maxSources: 3, now: () => now });
  const wrong = (source: string, message: string) =>
    refusals.warn("auth.refused", { source, kind: "token_wrong", message });
  for (let i = 0; i < 5; i++) wrong("127.0.0.1", `wrong ${i}`);
  refusals.warn("auth.refused", { source: "127.0.0.1", kind: "token_missing", message: "none" });
  refusals.warn("lane.refused", { source: "127.0.0.1", kind: "token_wrong", message: "at hello" });
  // Three windows are followed: later sources, whatever their kind, are counted together.
  wrong("127.0.0.2", "from elsewhere");
  refusals.warn("auth.refused", { source: "127.0.0.3", kind: "other", message: "and elsewhere" });
  const tail = "more like it in the next 60 s are counted in one line";
  assert.deepEqual(lines, [
    `auth.refused: wrong 0 (from 127.0.0.1; ${tail})`,
    `auth.refused: none (from 127.0.0.1; ${tail})`,
    `lane.refused: at hello (from 127.0.0.1; ${tail})`,
    `auth.refused: from elsewhere (from (other sources); ${tail})`,
  ]);
  lines.length = 0;
  now += 59_999;
  refusals.flush();
  assert.deepEqual(lines, [], "the window is still open");
  now += 1;
  refusals.flush();
  assert.deepEqual(lines, [
    "auth.refused: 4 more like it from 127.0.0.1 in 60 s (the last: wrong 4)",
    "auth.refused: 1 more like it from (other sources) in 60 s (the last: and elsewhere)",
  ]);
  lines.length = 0;
  wrong("127.0.0.1", "a new window");
  assert.equal(lines.length, 1);
});

Deno.test("`OperatorAuth.readCookie()` ignores a cookie it did not sign and calls its own from an older token revoked", async () => {
  const stateDir = await Deno.makeTempDir({ prefix: "klbr-auth-" });
  try {
    let now = 1_000_000_000_000;
    const auth = new OperatorAuth({ stateDir, token: TOKEN, sessionKey: KEY, now: () => now });
    const cookie = auth.issueCookie(PORT).split(";")[0];
    assert.equal(auth.readCookie(`a=b; ${cookie}; c=d`, PORT), "valid");
    const [name, value] = cookie.split("=");
    const forged = `${name}=${value.slice(0, -1)}${value.endsWith("0") ? "1" : "0"}`;
    assert.equal(auth.readCookie(forged, PORT), "absent", "a changed MAC is not ours");
    assert.equal(auth.readCookie(`${name}=garbage`, PORT), "absent");
    assert.equal(auth.readCookie(undefined, PORT), "absent");
    // Another daemon's cookie (another session key) under this daemon's name: not ours either.
    const other = new OperatorAuth({ stateDir, token: TOKEN, sessionKey: "8".repeat(64) });
    const foreign = `${name}=${other.issueCookie(PORT).split(";")[0].split("=")[1]}`;
    assert.notEqual(other.cookieName(PORT), name, "each daemon names its cookie apart");
    assert.equal(auth.readCookie(foreign, PORT), "absent");
    // Junk beside the real one, in either order (a longer path is sent first), is ignored.
    assert.equal(auth.readCookie(`${name}=junk; ${cookie}`, PORT), "valid");
    assert.equal(auth.readCookie(`${cookie}; ${forged}`, PORT), "valid");
    now += 31 * 24 * 3600 * 1000;
    assert.equal(auth.readCookie(cookie, PORT), "stale", "expired after 30 days");
    now -= 31 * 24 * 3600 * 1000;
    let told = 0;
    auth.onRotate(() => told++);
    await auth.rotate();
    assert.equal(told, 1);
    assert.equal(auth.cookieName(PORT), name, "the name outlives the token");
    assert.equal(auth.readCookie(cookie, PORT), "stale", "made under the old token");
    assert.equal(auth.readCookie(`${name}=junk; ${cookie}`, PORT), "stale");
    const renewed = auth.issueCookie(PORT).split(";")[0];
    assert.equal(auth.readCookie(`${cookie}; ${renewed}`, PORT), "valid", "a new login wins");
    assert.throws(() => auth.checkToken(TOKEN), (e) => (e as KlbrError).code === "token_wrong");
    const written = (await Deno.readTextFile(`${stateDir}/operator.token`)).trim();
    assert.match(written, /^[0-9a-f]{64}$/);
    assert.equal((await Deno.stat(`${stateDir}/operator.token`)).mode! & 0o777, 0o600);
    auth.checkToken(written);
  } finally {
    await Deno.remove(stateDir, { recursive: true });
  }
});

Deno.test("`POST /auth` with a JSON body that is not an object is refused token_missing, never an internal error", async () => {
  const { lines, log } = keptLog();
  const server = app(() => ({ ok: true }), log);
  for (const body of ["null", "7", '"abc"', "[]"]) {
    const response = await server.request(own("/auth", {
      method: "POST",
      headers: { origin: OWN, "content-type": "application/json" },
      body,
    }));
    assert.equal(response.status, 401, body);
    assert.equal((await response.json()).code, "token_missing", body);
    assert.equal(response.headers.get("set-cookie"), null);
  }
  assert.deepEqual(lines.filter((line) => line.startsWith("internal")), []);
});

Deno.test("`OperatorAuth.rotate()` announces once the new token is in force, before the listeners close old sessions", async () => {
  const stateDir = await Deno.makeTempDir({ prefix: "klbr-auth-" });
  try {
    const auth = new OperatorAuth({ stateDir, token: TOKEN, sessionKey: KEY });
    const order: string[] = [];
    auth.onRotate(() => order.push("listeners"));
    await auth.rotate({
      announce: () => {
        assert.throws(() => auth.checkToken(TOKEN), (e) => (e as KlbrError).code === "token_wrong");
        order.push("announced");
      },
    });
    assert.deepEqual(order, ["announced", "listeners"]);
    // A rotation whose token file cannot be written announces nothing and tells no listener.
    const broken = new OperatorAuth({
      stateDir: `${stateDir}/missing/dir`,
      token: TOKEN,
      sessionKey: KEY,
    });
    broken.onRotate(() => order.push("broken listeners"));
    await assert.rejects(broken.rotate({ announce: () => order.push("broken announced") }));
    assert.deepEqual(order, ["announced", "listeners"]);
    broken.checkToken(TOKEN);
  } finally {
    await Deno.remove(stateDir, { recursive: true });
  }
});

Deno.test("`ensureSessionKey()` writes a 0600 key once and keeps it; junk in its place is replaced", async () => {
  const { ensureSessionKey } = await import("../../../runtime/lanes/mod.ts");
  const stateDir = await Deno.makeTempDir({ prefix: "klbr-key-" });
  try {
    const key = await ensureSessionKey(stateDir);
    assert.match(key, /^[0-9a-f]{64}$/);
    assert.equal((await Deno.stat(`${stateDir}/session.key`)).mode! & 0o777, 0o600);
    assert.equal(await ensureSessionKey(stateDir), key, "kept across restarts");
    await Deno.writeTextFile(`${stateDir}/session.key`, "junk\n");
    const replaced = await ensureSessionKey(stateDir);
    assert.match(replaced, /^[0-9a-f]{64}$/);
    assert.notEqual(replaced, key);
  } finally {
    await Deno.remove(stateDir, { recursive: true });
  }
});

Deno.test("`requireLoopbackHost()` parses addresses: only 127.0.0.0/8, ::1 and localhost pass", async () => {
  const { requireLoopbackHost } = await import("../../../runtime/lanes/mod.ts");
  for (
    const host of [
      "127.0.0.1",
      "127.255.255.254",
      "localhost",
      "LOCALHOST",
      "::1",
      "[::1]",
      "0:0:0:0:0:0:0:1",
    ]
  ) {
    requireLoopbackHost(host);
  }
  for (
    const host of [
      "127.999.0.1",
      "127.0.0",
      "127.0.0.01",
      "0.0.0.0",
      "128.0.0.1",
      "::",
      "::2",
      "::ffff:127.0.0.1",
      "127.0.0.1.evil.com",
      "localhost.",
      "",
    ]
  ) {
    assert.throws(
      () => requireLoopbackHost(host),
      (error) =>
        (error as KlbrError).code === "not_loopback" &&
        (error as KlbrError).message ===
          `cannot serve: the bind address must be loopback (127.0.0.0/8, ::1 or localhost) (got ${host})`,
      host,
    );
  }
});

Deno.test("`POST /attachments` keeps nothing for a read-only viewer, a wrong token or another origin", async () => {
  const kept: Uint8Array[] = [];
  const server = createApp({
    lanes: NO_LANES,
    auth: new OperatorAuth({
      stateDir: "/nonexistent",
      token: TOKEN,
      sessionKey: KEY,
      viewWithoutToken: true,
    }),
    address: () => ({ host: "127.0.0.1", port: PORT }),
    log: keptLog().log,
    health: () => ({ ok: true }),
    attachments: {
      maxBytes: 16,
      keep: (data) => {
        kept.push(data);
        return Promise.resolve({ artifact: "a".repeat(64), bytes: data.length });
      },
    },
  });
  const post = (headers: Record<string, string>, body = "x,y\n") =>
    server.request(own("/attachments", { method: "POST", body, headers }));
  // A viewer may watch without the token, never upload what becomes part of an input.
  const viewer = await post({});
  assert.equal(viewer.status, 401);
  assert.equal((await viewer.json()).code, "token_missing");
  const wrong = await post({ authorization: `Bearer ${"d".repeat(64)}` });
  assert.deepEqual([wrong.status, (await wrong.json()).code], [401, "token_wrong"]);
  const foreign = await post({ authorization: `Bearer ${TOKEN}`, origin: "http://evil.example" });
  assert.equal(foreign.status, 403);
  assert.deepEqual(kept, [], "nothing was kept for any of them");
  const ok = await post({ authorization: `Bearer ${TOKEN}` });
  assert.deepEqual(await ok.json(), { artifact: "a".repeat(64), bytes: 4 });
  // Over the limit by its bytes (no Content-Length to go by): refused, nothing kept.
  const stream = new ReadableStream({
    start(controller) {
      controller.enqueue(new Uint8Array(10));
      controller.enqueue(new Uint8Array(10));
      controller.close();
    },
  });
  const big = await server.request(own("/attachments", {
    method: "POST",
    body: stream,
    headers: { authorization: `Bearer ${TOKEN}` },
    duplex: "half",
  } as RequestInit));
  assert.equal(big.status, 413);
  assert.equal(kept.length, 1);
});
