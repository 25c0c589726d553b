import assert from "node:assert/strict";
import { LaneConnection, type LaneHost } from "../../../runtime/lanes/mod.ts";
import type { LaneRecord, ServerMessage } from "../../../runtime/core/mod.ts";
import type { LaneSignal } from "../../../runtime/core/mod.ts";

const TOKEN = "a".repeat(64);

/** A host whose log holds `count` records and that refuses nothing. */
function hostWith(
  count: number,
): LaneHost & { listeners: ((s: LaneSignal) => void)[]; log: LaneRecord[] } {
  const log: LaneRecord[] = Array.from({ length: count }, (_, i) => ({
    kind: "record",
    session: "default",
    seq: i + 1,
    at: 0,
    type: "test",
    data: { i },
  }));
  const listeners: ((s: LaneSignal) => void)[] = [];
  return {
    version: "test",
    token: TOKEN,
    log,
    listeners,
    headSeq: () => log.length,
    readRecords: (_s, since, limit) => log.filter((r) => r.seq > since).slice(0, limit),
    subscribe: (_s, listener) => {
      listeners.push(listener);
      return () => {};
    },
    admitMany: () => [],
    operate: () => Promise.resolve({}),
    logRefusal: () => {},
  };
}

Deno.test("`LaneConnection` sends a catch-up page by page, waiting for the transport between pages", async () => {
  const host = hostWith(5);
  const sent: ServerMessage[] = [];
  const gates: (() => void)[] = [];
  const connection = new LaneConnection(host, {
    hasOrigin: false,
    pageSize: 2,
    send: (m) => sent.push(m),
    close: () => {},
    writable: () => new Promise<void>((resolve) => gates.push(resolve)),
  });
  const hello = connection.receive(JSON.stringify({ kind: "hello", since: 0, token: TOKEN }));
  await Promise.resolve();
  const seqs = () => sent.filter((m) => m.kind === "record").map((m) => (m as LaneRecord).seq);
  // One page, then nothing until the transport says it can take more.
  assert.deepEqual(seqs(), [1, 2]);
  gates.shift()!();
  await new Promise((r) => setTimeout(r, 0));
  assert.deepEqual(seqs(), [1, 2, 3, 4]);
  gates.shift()!();
  await new Promise((r) => setTimeout(r, 0));
  gates.shift()?.();
  await hello;
  assert.deepEqual(seqs(), [1, 2, 3, 4, 5]);
  // `replayed` comes only after the whole catch-up, naming the last seq sent.
  assert.deepEqual(sent.at(-1), { kind: "replayed", session: "default", head: 5 });
});

Deno.test("`LaneConnection` sends records committed during a catch-up once, in order", async () => {
  const host = hostWith(3);
  const sent: ServerMessage[] = [];
  let release!: () => void;
  const connection = new LaneConnection(host, {
    hasOrigin: false,
    pageSize: 2,
    send: (m) => sent.push(m),
    close: () => {},
    writable: () => new Promise<void>((resolve) => (release = resolve)),
  });
  const hello = connection.receive(JSON.stringify({ kind: "hello", since: 0, token: TOKEN }));
  await Promise.resolve();
  // A record lands and its wake arrives while the first page waits on the transport.
  host.log.push({ kind: "record", session: "default", seq: 4, at: 0, type: "test", data: {} });
  for (const listener of host.listeners) listener({ kind: "wake" });
  for (let i = 0; i < 5; i++) {
    release();
    await new Promise((r) => setTimeout(r, 0));
  }
  await hello;
  const seqs = sent.filter((m) => m.kind === "record").map((m) => (m as LaneRecord).seq);
  assert.deepEqual(seqs, [1, 2, 3, 4]);
  assert.equal(connection.cursor, 4);
});
