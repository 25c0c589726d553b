// Tests of the bench's lean lane client against a scripted WebSocket server on 127.0.0.1.

import assert from "node:assert/strict";
import { openLane } from "../lane_driver.ts";

interface Script {
  /** Answers hello: the messages to send, in order. */
  hello: (hello: { since: number; token: string }) => Record<string, unknown>[];
  /** Sees each input; returns the replies to send now (any number). */
  input?: (input: { request: string; client_msg_id: string }) => Record<string, unknown>[];
}

function startLaneServer(script: Script) {
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, (req) => {
    const { socket, response } = Deno.upgradeWebSocket(req);
    socket.onmessage = (event) => {
      const message = JSON.parse(String(event.data));
      const replies = message.kind === "hello"
        ? script.hello(message)
        : script.input?.(message) ?? [];
      for (const reply of replies) {
        if (reply.kind === "close") socket.close(4401, "bye");
        else socket.send(JSON.stringify(reply));
      }
    };
    return response;
  });
  return { port: server.addr.port, [Symbol.asyncDispose]: () => server.shutdown() };
}

const record = (seq: number) => ({
  kind: "record",
  session: "default",
  seq,
  at: 1,
  type: "input.admitted",
  data: {},
});
const welcome = (head: number) => ({ kind: "welcome", session: "default", role: "operator", head });
const replayed = (head: number) => ({ kind: "replayed", session: "default", head });

Deno.test("`openLane()` counts a catch-up after since and finds it contiguous", async () => {
  await using server = startLaneServer({
    hello: ({ since }) => [
      welcome(10),
      ...[6, 7, 8, 9, 10].filter((s) => s > since).map(record),
      replayed(10),
    ],
  });
  const { lane, replay } = await openLane({
    port: server.port,
    token: "t",
    client: "c",
    since: 5,
  });
  assert.equal(replay.head, 10);
  assert.equal(replay.records, 5);
  assert.equal(replay.contiguous, true);
  assert.ok(replay.elapsedMs >= 0);
  assert.equal(lane.lastSeq, 10);
  await lane.close();
});

Deno.test("`openLane()` reports a catch-up with a gap as not contiguous", async () => {
  await using server = startLaneServer({
    hello: () => [welcome(4), record(1), record(2), record(4), replayed(4)],
  });
  const { lane, replay } = await openLane({ port: server.port, token: "t", client: "c" });
  assert.equal(replay.records, 3);
  assert.equal(replay.contiguous, false);
  await lane.close();
});

Deno.test("`openLane()` reports a repeated record as not contiguous", async () => {
  await using server = startLaneServer({
    hello: () => [welcome(2), record(1), record(1), record(2), replayed(2)],
  });
  const { lane, replay } = await openLane({ port: server.port, token: "t", client: "c" });
  assert.equal(replay.contiguous, false);
  await lane.close();
});

Deno.test("`openLane()` refuses when the daemon answers hello with an error", async () => {
  await using server = startLaneServer({
    hello: () => [{ kind: "error", code: "token_wrong", message: "wrong" }, { kind: "close" }],
  });
  await assert.rejects(() => openLane({ port: server.port, token: "bad", client: "c" }), {
    code: "worker_failed",
    message: "cannot open lane: the daemon refused hello (got token_wrong)",
  });
});

Deno.test("`openLane()` fails when the socket closes before replayed", async () => {
  await using server = startLaneServer({ hello: () => [welcome(3), record(1), { kind: "close" }] });
  await assert.rejects(() => openLane({ port: server.port, token: "t", client: "c" }), {
    code: "worker_failed",
    message: "cannot open lane: the socket closed before replayed (got code 4401)",
  });
});

Deno.test("`openLane()` fails when nothing listens", async () => {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  await assert.rejects(() => openLane({ port, token: "t", client: "c" }), {
    code: "worker_failed",
  });
});

Deno.test("`admitMany()` never has more than the window unacknowledged", async () => {
  // The server holds acks until `window` inputs are waiting, so a client that overran the
  // window would be seen with more than `window` pending.
  const window = 8;
  const held: string[] = [];
  let maxHeld = 0;
  let n = 0;
  await using server = startLaneServer({
    hello: () => [welcome(0), replayed(0)],
    input: ({ request }) => {
      held.push(request);
      maxHeld = Math.max(maxHeld, held.length);
      if (held.length < window) return [];
      return held.splice(0).map((r) => ({
        kind: "ack",
        request: r,
        input_id: `in_${++n}`,
        seq: n,
        duplicate: false,
      }));
    },
  });
  const { lane } = await openLane({ port: server.port, token: "t", client: "c" });
  const result = await lane.admitMany(40, { window, prefix: "w" });
  assert.equal(result.acks, 40);
  assert.equal(result.admitted, 40);
  assert.equal(maxHeld, window);
  await lane.close();
});

Deno.test("`admitMany()` counts duplicates as acknowledged but not admitted", async () => {
  let n = 0;
  await using server = startLaneServer({
    hello: () => [welcome(0), replayed(0)],
    input: ({ request }) => {
      n++;
      return [{
        kind: "ack",
        request,
        input_id: `in_${n % 2 === 0 ? 1 : n}`,
        seq: n,
        duplicate: n % 2 === 0,
      }];
    },
  });
  const { lane } = await openLane({ port: server.port, token: "t", client: "c" });
  const result = await lane.admitMany(10, { window: Infinity, prefix: "d" });
  assert.equal(result.acks, 10);
  assert.equal(result.admitted, 5);
  await lane.close();
});

Deno.test("`admitMany()` rejects with the daemon's code when an input is refused", async () => {
  await using server = startLaneServer({
    hello: () => [welcome(0), replayed(0)],
    input: ({ request }) => [{
      kind: "error",
      request,
      code: "shutting_down",
      message: "cannot admit input: the daemon is shutting down",
    }],
  });
  const { lane } = await openLane({ port: server.port, token: "t", client: "c" });
  await assert.rejects(() => lane.admitMany(3, { window: 1, prefix: "x" }), {
    code: "invalid_input",
    message: "cannot admit input: shutting_down: cannot admit input: the daemon is shutting down",
  });
  await lane.close();
});
