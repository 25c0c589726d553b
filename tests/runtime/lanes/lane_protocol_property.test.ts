// The lane protocol under arbitrary input, against the real daemon: any sequence of text or
// binary messages gets at most one reply per message, never crashes the daemon and leaves
// every other connection served; a bounded flood of connections is refused past the limit
// with a clear error, and a lane that never says hello is closed.

import assert from "node:assert/strict";
import fc from "fast-check";
import { startFakeOpenAI } from "../../fakes/openai_server.ts";
import { startTestDaemon, type TestDaemon } from "../../_helpers/daemon.ts";
import { connectLane } from "../../_helpers/lane_client.ts";
import { rawSocket } from "../../_helpers/raw_http.ts";

const LIMIT = 8;

async function withDaemon(fn: (daemon: TestDaemon) => Promise<void>): Promise<void> {
  const fake = startFakeOpenAI({ fallback: () => ({ toolCall: { code: "wait()" } }) });
  const daemon = await startTestDaemon({
    modelUrl: fake.url,
    extraConfig: `lanes {\n    max_connections ${LIMIT}\n    hello_timeout_ms 1000\n}\n`,
  });
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

Deno.test("a bounded flood of connections is refused past the limit with a clear error; a lane without hello is closed", async () => {
  await withDaemon(async (daemon) => {
    // Twenty at once, then no more: the flood stops by itself.
    const sockets = await Promise.all(
      Array.from({ length: 20 }, () => rawSocket(daemon.port)),
    );
    const accepted = sockets.filter((s) => s.response.status === 101);
    const refused = sockets.filter((s) => s.response.status !== 101);
    assert.equal(accepted.length, LIMIT);
    for (const socket of refused) {
      assert.equal(socket.response.status, 503);
      assert.deepEqual(JSON.parse(socket.response.body), {
        code: "too_many_connections",
        message:
          `cannot open /v2: the daemon holds its limit of ${LIMIT} lane connections (got one more)`,
      });
    }
    const during = await (await fetch(`${daemon.url}/health`)).json();
    assert.equal(during.lanes.connections, LIMIT);
    assert.equal(during.lanes.refused_connections, 20 - LIMIT);

    // None of them says hello: each is closed with 4408 once the hello timeout passes.
    for (const socket of accepted) {
      const frame = await socket.read();
      assert.ok(frame !== null && frame[0] === 0x88, "a close frame");
      assert.equal((frame[2] << 8) | frame[3], 4408);
      socket.close();
    }
    for (const socket of refused) socket.close();
    // Their places are free again.
    const after = await connectLane({ port: daemon.port, token: daemon.token });
    assert.equal(after.messages[0].kind, "welcome");
    await after.close();
    assert.match(daemon.logs(), /lane\.refused_cap refused a lane: 8 are open/);
    assert.match(daemon.logs(), /lane\.hello_timeout closed a lane that did not say hello/);
  });
});
