// The lane protocol under arbitrary input, against the real daemon: any sequence of text or
// binary messages gets at most one reply per message, never crashes the daemon and leaves
// every other connection served; a flood of sockets that never say hello is bounded apart
// from the lanes (the oldest closed to make room, the rest at the hello deadline), and the
// lanes' cap refuses viewers, never the operator.

import assert from "node:assert/strict";
import fc from "fast-check";
import { startFakeOpenAI } from "../../fakes/openai_server.ts";
import { startTestDaemon, type TestDaemon } from "../../_helpers/daemon.ts";
import { connectLane } from "../../_helpers/lane_client.ts";
import { rawSocket } from "../../_helpers/raw_http.ts";

const LIMIT = 8;
const PENDING = 12;

/** The bounds the flood tests run under; a viewer may watch, so the lanes' cap can be met. */
const BOUNDED = `lanes {\n    view_without_token #true\n    max_connections ${LIMIT}\n` +
  `    max_pending_hello ${PENDING}\n    hello_timeout_ms 1000\n}\n`;

async function withDaemon(
  fn: (daemon: TestDaemon) => Promise<void>,
  extraConfig = `lanes {\n    max_connections ${LIMIT}\n    hello_timeout_ms 1000\n}\n`,
): Promise<void> {
  const fake = startFakeOpenAI({ fallback: () => ({ toolCall: { code: "wait()" } }) });
  const daemon = await startTestDaemon({ modelUrl: fake.url, extraConfig });
  try {
    await fn(daemon);
  } finally {
    await daemon.stop();
    await fake.close();
    await Deno.remove(daemon.stateDir, { recursive: true }).catch(() => {});
    await Deno.remove(daemon.workspace, { recursive: true }).catch(() => {});
  }
}

/** One message a client might send: text (JSON or not) or binary. */
type Sent = { text: string } | { binary: Uint8Array } | { hello: true };

const lone = fc.constantFrom("\ud800", "\udbff", "a\udc00", "\u0000", "\ufffd");
const field = fc.oneof(fc.string({ maxLength: 40 }), lone, fc.integer(), fc.constant(null));
const message: fc.Arbitrary<Sent> = fc.oneof(
  { weight: 2, arbitrary: fc.constant({ hello: true } as Sent) },
  fc.string({ maxLength: 200 }).map((text) => ({ text })),
  fc.uint8Array({ maxLength: 64 }).map((binary) => ({ binary })),
  fc.constant({ text: "\u0000" }),
  // A 10 MB body: far past the input limit, and past most buffers.
  fc.constant({
    text: JSON.stringify({
      kind: "input",
      request: "big",
      client_msg_id: "big",
      text: "x".repeat(10_000_000),
    }),
  }),
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constantFrom("hello", "input", "ping", "op.status", "op.activate", "record", "no"),
      request: field,
      client_msg_id: field,
      text: field,
      since: fc.oneof(fc.nat(), fc.constant("head"), fc.integer(), fc.constant(1e9)),
      session: fc.oneof(fc.constant("default"), field),
      epoch: field,
      release: field,
      token: field,
    }, { requiredKeys: ["kind"] }).map((value) => ({ text: JSON.stringify(value) })),
  },
);

const REPLY_KINDS = new Set(["error", "pong", "ack", "op.result", "welcome"]);

/** Sends `sequence` on a fresh socket; returns the replies and whether it was closed. */
async function play(daemon: TestDaemon, sequence: Sent[], run: number) {
  const ws = new WebSocket(`ws://127.0.0.1:${daemon.port}/v2`);
  const received: { kind: string; request?: string }[] = [];
  let closed = false;
  const sentinel = `sentinel-${run}`;
  const done = Promise.withResolvers<void>();
  ws.onmessage = (event) => {
    const reply = JSON.parse(String(event.data));
    received.push(reply);
    if (reply.request === sentinel) done.resolve();
  };
  ws.onclose = () => {
    closed = true;
    done.resolve();
  };
  await new Promise((resolve, reject) => {
    ws.onopen = resolve;
    ws.onerror = reject;
  });
  for (const item of sequence) {
    if (ws.readyState !== WebSocket.OPEN) break;
    if ("hello" in item) {
      ws.send(JSON.stringify({ kind: "hello", token: daemon.token, client: `p${run}` }));
    } else if ("binary" in item) ws.send(item.binary);
    else ws.send(item.text);
  }
  if (ws.readyState === WebSocket.OPEN) {
    ws.send(JSON.stringify({ kind: "ping", request: sentinel }));
  }
  const timer = setTimeout(() => done.reject(new Error(`no sentinel reply in run ${run}`)), 30_000);
  await done.promise.finally(() => clearTimeout(timer));
  if (!closed) {
    ws.close();
    await new Promise((resolve) => (ws.onclose = resolve));
  }
  return { replies: received.filter((m) => REPLY_KINDS.has(m.kind) && m.request !== sentinel) };
}

Deno.test("the lane protocol answers any message sequence at most once per message, and the daemon serves on", async () => {
  await withDaemon(async (daemon) => {
    const witness = await connectLane({ port: daemon.port, token: daemon.token });
    let run = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(message, { maxLength: 12 }), async (sequence) => {
        run++;
        const { replies } = await play(daemon, sequence, run);
        assert.ok(
          replies.length <= sequence.length,
          `${replies.length} replies to ${sequence.length} messages`,
        );
        // Every other connection is still served, and the daemon is healthy.
        const pong = await witness.request({ kind: "ping" }, 10_000);
        assert.equal(pong.kind, "pong");
        const health = await fetch(`${daemon.url}/health`);
        assert.equal(health.status, 200);
        await health.body?.cancel();
      }),
      { numRuns: 30, endOnFailure: true },
    );
    assert.doesNotMatch(daemon.logs(), /uncaught|panicked/i);
    await witness.close();
  });
});

/** Reads a raw socket until its close frame; returns the close code, or null at end of stream. */
async function closeCode(socket: Awaited<ReturnType<typeof rawSocket>>): Promise<number | null> {
  for (let i = 0; i < 100; i++) {
    const frame = await socket.read();
    if (frame === null) return null;
    if (frame[0] === 0x88) return (frame[2] << 8) | frame[3];
  }
  return null;
}

Deno.test("a flood of silent sockets is bounded apart from the lanes: the oldest make room, the rest close at the deadline", async () => {
  await withDaemon(async (daemon) => {
    // Twenty upgrades at once against twelve waiting places: every upgrade is answered 101,
    // and the eight oldest are closed (1013) to make room for newer ones.
    const sockets = [];
    for (let i = 0; i < 20; i++) sockets.push(await rawSocket(daemon.port));
    assert.deepEqual(new Set(sockets.map((s) => s.response.status)), new Set([101]));
    const during = await (await fetch(`${daemon.url}/health`)).json();
    assert.equal(during.lanes.pending, PENDING);
    assert.equal(during.lanes.evicted_pending, 20 - PENDING);
    assert.equal(during.lanes.connections, 0, "none of them is a lane");
    // The operator is let in meanwhile: its upgrade takes a waiting place (closing the next
    // oldest silent one), and its hello makes it a lane.
    const operator = await connectLane({ port: daemon.port, token: daemon.token });
    assert.equal(operator.messages[0].kind, "welcome");

    const codes = [];
    for (const socket of sockets) {
      codes.push(await closeCode(socket));
      socket.close();
    }
    const evicted = 20 - PENDING + 1;
    assert.deepEqual(codes, [...Array(evicted).fill(1013), ...Array(20 - evicted).fill(4408)]);
    const after = await (await fetch(`${daemon.url}/health`)).json();
    assert.equal(after.lanes.pending, 0);
    assert.equal(after.lanes.connections, 1);
    await operator.close();
    assert.match(
      daemon.logs(),
      /lane\.evicted closed a socket that had not said hello, to make room/,
    );
    assert.match(daemon.logs(), /lane\.hello_timeout closed a lane that did not say hello/);
  }, BOUNDED);
});

Deno.test("the lanes' cap refuses a viewer with a clear error and closes it; the operator is let in past it", async () => {
  await withDaemon(async (daemon) => {
    const viewers = [];
    for (let i = 0; i < LIMIT; i++) viewers.push(await connectLane({ port: daemon.port }));
    assert.ok(viewers.every((v) => v.messages[0].kind === "welcome"));
    const refused = await connectLane({ port: daemon.port });
    assert.deepEqual(refused.messages, [{
      kind: "error",
      code: "too_many_connections",
      message:
        `cannot open a lane: the daemon holds its limit of ${LIMIT} lanes, past which only the operator is let in (got a viewer's hello)`,
    }]);
    assert.equal((await refused.closed).code, 1013);
    const operator = await connectLane({ port: daemon.port, token: daemon.token });
    const welcome = operator.messages[0];
    assert.equal(welcome.kind === "welcome" && welcome.role, "operator");
    const health = await (await fetch(`${daemon.url}/health`)).json();
    assert.equal(health.lanes.connections, LIMIT + 1);
    assert.equal(health.lanes.refused_connections, 1);
    // A place given back is free again, for a viewer too.
    await viewers.pop()!.close();
    await operator.close();
    const again = await connectLane({ port: daemon.port });
    assert.equal(again.messages[0].kind, "welcome");
    for (const client of [...viewers, again]) await client.close();
  }, BOUNDED);
});
