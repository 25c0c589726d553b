/**
 * Who a lane lets in, and what it refuses before any input: no credentials, a stale cookie,
 * a malformed or wrong token (any case of the right one is right), a read-only viewer's input,
 * a cursor beyond the head (closed at once), a lane its transport will not admit, identifiers
 * with lone surrogates.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  type CookieState,
  type LaneAuth,
  LaneConnection,
  type LaneHost,
  OperatorAuth,
} from "../../../runtime/lanes/mod.ts";
import {
  type ClientRole,
  KlbrError,
  type LaneRecord,
  type ServerMessage,
} from "../../../runtime/core/mod.ts";

const TOKEN = "e".repeat(64);
const KEY = "5".repeat(64);

function hostWith(count: number) {
  const log: LaneRecord[] = Array.from({ length: count }, (_, i) => ({
    kind: "record",
    session: "default",
    seq: i + 1,
    at: 0,
    type: "test",
    data: { i },
  }));
  const admitted: string[] = [];
  const host: LaneHost = {
    version: "test",
    headSeq: () => log.length,
    readRecords: (_s, since, limit) => log.filter((r) => r.seq > since).slice(0, limit),
    subscribe: () => () => {},
    admitMany: (_s, _c, inputs) =>
      inputs.map((input) => {
        admitted.push(input.client_msg_id);
        return { ack: { input_id: `in_${admitted.length}`, seq: 1, duplicate: false } };
      }),
    operate: () => Promise.resolve({ ok: true }),
  };
  return { host, admitted };
}

function connect(
  count: number,
  options: {
    cookie?: CookieState;
    view?: boolean;
    rotate?: () => Promise<void>;
    admit?: (role: ClientRole) => void;
  } = {},
) {
  const { host, admitted } = hostWith(count);
  const sent: ServerMessage[] = [];
  const closes: [number, string][] = [];
  const checker = new OperatorAuth({ stateDir: "/nonexistent", token: TOKEN, sessionKey: KEY });
  const auth: LaneAuth = {
    cookie: options.cookie ?? "absent",
    viewWithoutToken: options.view ?? false,
    checkToken: (token) => checker.checkToken(token),
    rotate: options.rotate ?? (() => Promise.resolve()),
  };
  const connection = new LaneConnection(host, {
    auth,
    send: (m) => sent.push(m),
    close: (code, reason) => closes.push([code, reason]),
    admit: options.admit,
  });
  const say = (...messages: Record<string, unknown>[]) =>
    connection.receiveAll(messages.map((m) => JSON.stringify(m)));
  return { connection, sent, closes, say, admitted };
}

const input = (request: string, extra: Record<string, unknown> = {}) => ({
  kind: "input",
  request,
  client_msg_id: request,
  text: "hi",
  ...extra,
});

Deno.test("`LaneConnection` refuses a hello without token or cookie, says how to get one, and closes", async () => {
  const c = connect(3);
  await c.say({ kind: "input", request: "early", client_msg_id: "m0", text: "x" }, {
    kind: "hello",
  }, input("late"));
  assert.deepEqual(c.sent, [
    {
      kind: "error",
      request: "early",
      code: "invalid_input",
      message: "cannot accept input: say hello first",
    },
    {
      kind: "error",
      request: undefined,
      code: "token_missing",
      message:
        "cannot authorise: this lane needs the operator token (hello.token) or a session cookie; run `deno task klbr url` and open the address it prints",
    },
  ]);
  assert.deepEqual(c.closes, [[4401, "token_missing"]]);
  assert.deepEqual(c.admitted, [], "nothing is admitted, before or after");
});

Deno.test("`LaneConnection` makes a valid session cookie an operator and refuses a stale one", async () => {
  const valid = connect(2, { cookie: "valid" });
  await valid.say({ kind: "hello" }, input("a"));
  const welcome = valid.sent.find((m) => m.kind === "welcome");
  assert.deepEqual(welcome && "role" in welcome && welcome.role, "operator");
  assert.deepEqual(valid.admitted, ["a"]);

  const stale = connect(2, { cookie: "stale" });
  await stale.say({ kind: "hello" }, input("b"));
  assert.equal(stale.sent[0].kind, "error");
  assert.equal((stale.sent[0] as { code: string }).code, "token_revoked");
  assert.match(
    (stale.sent[0] as { message: string }).message,
    /the token was rotated, or it expired/,
  );
  assert.deepEqual(stale.closes, [[4401, "token_revoked"]]);
  assert.deepEqual(stale.admitted, []);

  // A token shown at hello is checked even with a valid cookie: a wrong one is refused.
  const wrong = connect(0, { cookie: "valid" });
  await wrong.say({ kind: "hello", token: "f".repeat(64) });
  assert.equal((wrong.sent[0] as { code: string }).code, "token_wrong");
});

Deno.test("`LaneConnection` lets a viewer watch read-only where the configuration allows it", async () => {
  const c = connect(2, { view: true });
  await c.say({ kind: "hello" }, input("a"), { kind: "op.status", request: "s" }, {
    kind: "ping",
    request: "p",
  });
  assert.equal((c.sent[0] as { role: string }).role, "viewer");
  assert.deepEqual(c.sent.filter((m) => m.kind === "record").length, 2, "records replay");
  const errors = c.sent.filter((m) => m.kind === "error") as { request: string; code: string }[];
  assert.deepEqual(errors.map((e) => [e.request, e.code]), [
    ["a", "role_forbidden"],
    ["s", "role_forbidden"],
  ]);
  assert.deepEqual(c.admitted, []);
  assert.ok(c.sent.some((m) => m.kind === "pong"));
  assert.deepEqual(c.closes, []);
});

Deno.test('`LaneConnection` refuses hello.since beyond the head, naming the head, and closes at once; "head" skips the catch-up', async () => {
  const c = connect(4);
  await c.say({ kind: "hello", since: 9, token: TOKEN }, { kind: "hello", since: 4, token: TOKEN });
  assert.deepEqual(c.sent, [{
    kind: "error",
    request: undefined,
    code: "since_beyond_head",
    message: "cannot say hello: since is beyond the head of session default (got since 9, head 4)",
    head: 4,
  }]);
  // The same socket would only be refused again: it is closed at once, not at the deadline.
  assert.deepEqual(c.closes, [[4409, "since_beyond_head"]]);
  assert.equal(c.connection.role, undefined);

  const again = connect(4);
  await again.say({ kind: "hello", since: 4, token: TOKEN });
  assert.equal(again.sent[0].kind, "welcome");
  assert.deepEqual(again.sent[1], { kind: "replayed", session: "default", head: 4 });

  const live = connect(4);
  await live.say({ kind: "hello", since: "head", token: TOKEN });
  assert.deepEqual(live.sent.map((m) => m.kind), ["welcome", "replayed"]);
  assert.equal(live.connection.cursor, 4);
});

Deno.test("`LaneConnection` takes the token in any case; what is not 64 hex characters is malformed", async () => {
  const upper = connect(1);
  await upper.say({ kind: "hello", token: TOKEN.toUpperCase() });
  assert.equal((upper.sent[0] as { role: string }).role, "operator");

  const cases: [string, string, string][] = [
    ["F".repeat(64), "token_wrong", "cannot authorise: the operator token is wrong"],
    [
      "x".repeat(10),
      "token_malformed",
      "cannot authorise: a token is 64 hex characters, 0-9 and a-f (got 10 characters)",
    ],
    [
      "g".repeat(64),
      "token_malformed",
      "cannot authorise: a token is 64 hex characters, 0-9 and a-f (got 64 characters, not all hex)",
    ],
  ];
  for (const [token, code, message] of cases) {
    const c = connect(1);
    await c.say({ kind: "hello", token });
    assert.deepEqual(c.sent, [{ kind: "error", request: undefined, code, message }], token);
    assert.deepEqual(c.closes, [[4401, code]]);
  }
});

Deno.test("`LaneConnection` asks its transport to admit the lane at hello; a refusal is answered and closes", async () => {
  const roles: string[] = [];
  const admitted = connect(1, { admit: (role) => void roles.push(role) });
  await admitted.say({ kind: "hello", token: TOKEN });
  assert.deepEqual(roles, ["operator"]);
  assert.equal(admitted.sent[0].kind, "welcome");

  const refused = connect(1, {
    view: true,
    admit: () => {
      throw new KlbrError(
        "too_many_connections",
        "cannot open a lane: full (got a viewer's hello)",
      );
    },
  });
  await refused.say({ kind: "hello" }, { kind: "ping", request: "p" });
  assert.deepEqual(refused.sent, [{
    kind: "error",
    request: undefined,
    code: "too_many_connections",
    message: "cannot open a lane: full (got a viewer's hello)",
  }]);
  assert.deepEqual(refused.closes, [[1013, "too_many_connections"]]);
  assert.equal(refused.connection.role, undefined);
});

Deno.test("`LaneConnection` refuses identifiers with lone surrogates, so distinct ids never share a key", async () => {
  const c = connect(0);
  await c.say(
    { kind: "hello", token: TOKEN },
    input("r1", { client_msg_id: "\ud800" }),
    input("r2", { client_msg_id: "\udbff" }),
    input("r3", { client_msg_id: "\ufffd" }),
    input("r4", { client_msg_id: "a\udc00b" }),
    input("r5", { conversation: "local:\ud83d" }),
  );
  const errors = c.sent.filter((m) => m.kind === "error") as { request: string; message: string }[];
  assert.deepEqual(errors.map((e) => e.request), ["r1", "r2", "r4", "r5"]);
  for (const error of errors) {
    assert.match(error.message, /expected well-formed Unicode \(a lone surrogate is not\)/);
  }
  // U+FFFD itself is a character like any other.
  assert.deepEqual(c.admitted, ["\ufffd"]);

  const named = connect(0);
  await named.say({ kind: "hello", token: TOKEN, client: "web-\ud800" });
  assert.equal((named.sent[0] as { code: string }).code, "invalid_input");
  assert.match(
    (named.sent[0] as { message: string }).message,
    /hello client: expected well-formed/,
  );
});

Deno.test("`LaneConnection` never says the token was rotated when the rotation failed (the token file could not be written)", async () => {
  const c = connect(0, {
    rotate: () =>
      Promise.reject(
        new KlbrError(
          "store_unavailable",
          "cannot rotate the operator token: No space left on device (os error 28)",
        ),
      ),
  });
  await c.say({ kind: "hello", token: TOKEN }, { kind: "op.token_rotate", request: "rot" });
  // welcome and replayed, then only the refusal.
  assert.deepEqual(c.sent.slice(2), [
    {
      kind: "error",
      request: "rot",
      code: "store_unavailable",
      message: "cannot rotate the operator token: No space left on device (os error 28)",
      retriable: true,
    },
  ]);
});

Deno.test("`LaneConnection` answers op.token_rotate, then rotates; only an operator may ask", async () => {
  let rotated = 0;
  const c = connect(0, {
    rotate: () => {
      rotated++;
      return Promise.resolve();
    },
  });
  await c.say({ kind: "hello", token: TOKEN }, { kind: "op.token_rotate", request: "rot" });
  assert.deepEqual(c.sent.at(-1), {
    kind: "op.result",
    request: "rot",
    op: "op.token_rotate",
    result: {
      rotated: true,
      message: "the operator token was replaced; old tokens and cookies are refused",
    },
  });
  assert.equal(rotated, 1);

  const viewer = connect(0, { view: true, rotate: () => Promise.reject(new Error("never")) });
  await viewer.say({ kind: "hello" }, { kind: "op.token_rotate", request: "rot" });
  assert.equal((viewer.sent.at(-1) as { code: string }).code, "role_forbidden");
});
