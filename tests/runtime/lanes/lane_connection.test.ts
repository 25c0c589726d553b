import assert from "node:assert/strict";
import fc from "fast-check";
import { LaneConnection, type LaneHost, recordBatches } from "../../../runtime/lanes/mod.ts";
import type {
  LaneRecord,
  LaneSignal,
  Logger,
  ServerMessage,
  StoredRecord,
} from "../../../runtime/core/mod.ts";
import { AUTH, TOKEN } from "./_native_auth.ts";

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
  };
}

Deno.test("`LaneConnection` sends a catch-up page by page, waiting for the transport between pages", async () => {
  const host = hostWith(5);
  const sent: ServerMessage[] = [];
  const gates: (() => void)[] = [];
  const connection = new LaneConnection(host, {
    auth: AUTH,
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
    auth: AUTH,
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

/** The stored form of a host's records, as a commit's wake carries them. */
function storedOf(records: LaneRecord[]): StoredRecord[] {
  return records.map((r) => ({ seq: r.seq, kind: r.type, at: r.at, body: JSON.stringify(r.data) }));
}

Deno.test("`LaneConnection` sends the records a wake carries without reading, once, in order, and reads when they do not follow", async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(
        fc.record({
          added: fc.integer({ min: 0, max: 4 }),
          carried: fc.constantFrom("all", "none", "gap", "overlap"),
        }),
        { maxLength: 12 },
      ),
      fc.boolean(),
      async (wakes, text) => {
        const host = hostWith(3);
        let reads = 0;
        const readRecords = host.readRecords;
        host.readRecords = (s, since, limit) => (reads++, readRecords(s, since, limit));
        const sent: LaneRecord[] = [];
        const connection = new LaneConnection(host, {
          auth: AUTH,
          send: (m) => m.kind === "record" && sent.push(m),
          ...(text ? { sendText: (t: string) => sent.push(JSON.parse(t)) } : {}),
          close: () => {},
        });
        await connection.receive(JSON.stringify({ kind: "hello", since: 0, token: TOKEN }));
        let woken = host.log.length;
        for (const wake of wakes) {
          for (let i = 0; i < wake.added; i++) {
            const seq = host.log.length + 1;
            host.log.push({
              kind: "record",
              session: "default",
              seq,
              at: seq,
              type: "test",
              data: { seq },
            });
          }
          const since = storedOf(host.log.slice(woken));
          const records = wake.carried === "all"
            ? since
            : wake.carried === "gap" && since.length > 1
            ? since.slice(1)
            : wake.carried === "overlap"
            ? storedOf(host.log.slice(Math.max(0, woken - 2)))
            : undefined;
          woken = host.log.length;
          const readsBefore = reads;
          for (const listener of host.listeners) listener({ kind: "wake", records });
          await new Promise((r) => setTimeout(r, 0));
          if (wake.carried === "all" || wake.carried === "overlap") {
            assert.equal(reads, readsBefore, "records carried after the cursor are not read");
          }
        }
        assert.deepEqual(sent.map((r) => r.seq), host.log.map((r) => r.seq));
        assert.deepEqual(sent.map((r) => r.data), host.log.map((r) => r.data));
        assert.equal(connection.cursor, host.log.length);
      },
    ),
    { numRuns: 200 },
  );
});

/** A logger that keeps each line's event and message. */
function keptLog(): { lines: string[]; log: Logger } {
  const lines: string[] = [];
  const line = (event: string, message: string) => lines.push(`${event}: ${message}`);
  return { lines, log: { info: line, warn: line, error: line } };
}

Deno.test("`LaneConnection` answers an unexpected error `internal`, logs its stack, and answers the rest of the batch", async () => {
  const host = hostWith(0);
  host.operate = () => Promise.reject(new TypeError("boom in a handler"));
  const { lines, log } = keptLog();
  const sent: ServerMessage[] = [];
  const connection = new LaneConnection(host, {
    auth: AUTH,
    send: (m) => sent.push(m),
    close: () => {},
    log,
  });
  await connection.receiveAll([
    JSON.stringify({ kind: "hello", since: 0, token: TOKEN }),
    JSON.stringify({ kind: "op.status", request: "r1" }),
    JSON.stringify({ kind: "ping", request: "r2" }),
  ]);
  const replies = sent.filter((m) => m.kind === "error" || m.kind === "pong");
  // The bug's text never reaches the client; the client still hears about its request.
  assert.deepEqual(replies, [
    { kind: "error", request: "r1", code: "internal", message: "internal error" },
    { kind: "pong", request: "r2" },
  ]);
  assert.equal(lines.length, 1);
  assert.match(lines[0], /^internal: unexpected error: TypeError: boom in a handler\n\s+at /);
});

Deno.test("`LaneConnection` answers every input of a batch whose commit threw", async () => {
  const host = hostWith(0);
  host.admitMany = () => {
    throw new Error("disk I/O error");
  };
  const { lines, log } = keptLog();
  const sent: ServerMessage[] = [];
  const connection = new LaneConnection(host, {
    auth: AUTH,
    send: (m) => sent.push(m),
    close: () => {},
    log,
  });
  const input = (request: string) =>
    JSON.stringify({ kind: "input", request, client_msg_id: request, text: "hi" });
  await connection.receiveAll([
    JSON.stringify({ kind: "hello", since: 0, token: TOKEN }),
    input("a"),
    input("b"),
    JSON.stringify({ kind: "ping", request: "c" }),
  ]);
  const replies = sent.filter((m) => m.kind === "error" || m.kind === "pong" || m.kind === "ack");
  assert.deepEqual(replies.map((m) => [m.kind, "request" in m ? m.request : undefined]), [
    ["error", "a"],
    ["error", "b"],
    ["pong", "c"],
  ]);
  assert.equal(lines.length, 1, "the failure is logged once");
  assert.match(lines[0], /disk I\/O error/);
});

Deno.test("`LaneConnection` with `batch: true` sends every record once, in order, in bounded `records` batches, and resumes after a seq", async () => {
  const host = hostWith(2_500);
  for (const since of [0, 1_200]) {
    const texts: string[] = [];
    const connection = new LaneConnection(host, {
      auth: AUTH,
      send: (m) => texts.push(JSON.stringify(m)),
      sendText: (text) => texts.push(text),
      close: () => {},
    });
    await connection.receive(JSON.stringify({ kind: "hello", since, token: TOKEN, batch: true }));
    const messages = texts.map((t) => JSON.parse(t) as ServerMessage);
    const batches = messages.filter((m) => m.kind === "records");
    assert.equal(messages.filter((m) => m.kind === "record").length, 0, "no single records");
    const seqs = batches.flatMap((b) => b.kind === "records" ? b.records.map((r) => r.seq) : []);
    assert.deepEqual(seqs, Array.from({ length: 2_500 - since }, (_, i) => since + i + 1));
    assert.ok(batches.length < seqs.length / 10, `${batches.length} messages for ${seqs.length}`);
    assert.deepEqual(messages.at(-1), { kind: "replayed", session: "default", head: 2_500 });
    assert.equal(connection.cursor, 2_500);
  }
});

Deno.test("`recordBatches()` keeps each batch under its bound, a larger record alone, in order", () => {
  const records: LaneRecord[] = Array.from({ length: 50 }, (_, i) => ({
    kind: "record",
    session: "default",
    seq: i + 1,
    at: 0,
    type: "test",
    data: { text: "x".repeat(i === 20 ? 5_000 : 100) },
  }));
  const batches = recordBatches("default", records, 1_000);
  for (const batch of batches) {
    const parsed = JSON.parse(batch.text);
    assert.deepEqual(parsed, { kind: "records", session: "default", records: batch.records });
    assert.ok(batch.text.length <= 1_000 || batch.records.length === 1);
    assert.equal(batch.lastSeq, batch.records.at(-1)!.seq);
  }
  assert.deepEqual(batches.flatMap((b) => b.records), records);
  assert.ok(batches.some((b) => b.records.length === 1 && b.records[0].seq === 21));
});

/** The seqs of every `record` and `records` message, in the order sent. */
function sentSeqs(sent: ServerMessage[]): number[] {
  return sent.flatMap((m) =>
    m.kind === "record" ? [m.seq] : m.kind === "records" ? m.records.map((r) => r.seq) : []
  );
}

Deno.test("`LaneConnection` opens at the head with `page`: the newest records, `replayed`, then live ones once", async () => {
  const host = hostWith(10);
  const sent: ServerMessage[] = [];
  const connection = new LaneConnection(host, {
    auth: AUTH,
    send: (m) => sent.push(m),
    close: () => {},
  });
  await connection.receive(
    JSON.stringify({ kind: "hello", since: "head", page: 3, batch: true, token: TOKEN }),
  );
  assert.equal(sent[0].kind, "welcome");
  assert.deepEqual(sentSeqs(sent), [8, 9, 10]);
  assert.deepEqual(sent.at(-1), { kind: "replayed", session: "default", head: 10 });
  host.log.push({ kind: "record", session: "default", seq: 11, at: 0, type: "test", data: {} });
  for (const listener of host.listeners) listener({ kind: "wake" });
  await new Promise((r) => setTimeout(r, 0));
  assert.deepEqual(sentSeqs(sent), [8, 9, 10, 11]);
});

Deno.test('`LaneConnection` refuses `page` without since "head", and a page larger than the log is the whole log', async () => {
  const sent: ServerMessage[] = [];
  const refused = new LaneConnection(hostWith(4), {
    auth: AUTH,
    send: (m) => sent.push(m),
    close: () => {},
  });
  await refused.receive(JSON.stringify({ kind: "hello", since: 2, page: 3, token: TOKEN }));
  assert.equal(sent[0].kind, "error");
  assert.equal((sent[0] as { code: string }).code, "invalid_input");
  assert.match((sent[0] as { message: string }).message, /page needs since "head" \(got since 2\)/);
  assert.equal(refused.role, undefined);
  const all: ServerMessage[] = [];
  const whole = new LaneConnection(hostWith(4), {
    auth: AUTH,
    send: (m) => all.push(m),
    close: () => {},
  });
  await whole.receive(JSON.stringify({ kind: "hello", since: "head", page: 50, token: TOKEN }));
  assert.deepEqual(sentSeqs(all), [1, 2, 3, 4]);
});

Deno.test("`LaneConnection` answers `page` with the newest records before `before`, leaving the live cursor alone", async () => {
  const host = hostWith(10);
  const sent: ServerMessage[] = [];
  const connection = new LaneConnection(host, {
    auth: AUTH,
    send: (m) => sent.push(m),
    close: () => {},
  });
  await connection.receiveAll([
    JSON.stringify({ kind: "hello", since: "head", page: 2, token: TOKEN }),
    JSON.stringify({ kind: "page", request: "p1", before: 9, limit: 3 }),
    JSON.stringify({ kind: "page", request: "p2", before: 3, limit: 5 }),
    JSON.stringify({ kind: "page", request: "p3", before: 1, limit: 5 }),
  ]);
  const pages = sent.filter((m) => m.kind === "page");
  assert.deepEqual(
    pages.map((p) => [p.request, p.before, p.records.map((r) => r.seq), p.more]),
    [["p1", 9, [6, 7, 8], true], ["p2", 3, [1, 2], false], ["p3", 1, [], false]],
  );
  assert.equal(connection.cursor, 10);
  assert.deepEqual(sentSeqs(sent), [9, 10]);
});

Deno.test("`LaneConnection` pages, for any log, head page and limits, cover the log once, newest first, within bounds", async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.nat({ max: 60 }),
      fc.integer({ min: 1, max: 20 }),
      fc.array(fc.integer({ min: 1, max: 20 }), { minLength: 1, maxLength: 80 }),
      async (count, first, limits) => {
        const host = hostWith(count);
        const sent: ServerMessage[] = [];
        const connection = new LaneConnection(host, {
          auth: AUTH,
          send: (m) => sent.push(m),
          close: () => {},
        });
        await connection.receive(
          JSON.stringify({ kind: "hello", since: "head", page: first, batch: true, token: TOKEN }),
        );
        let held = sentSeqs(sent);
        assert.ok(held.length <= first);
        assert.deepEqual(held, host.log.slice(Math.max(0, count - first)).map((r) => r.seq));
        let more = held.length > 0 ? held[0] > 1 : false;
        for (const [i, limit] of limits.entries()) {
          if (!more) break;
          const before = held[0];
          sent.length = 0;
          await connection.receive(
            JSON.stringify({ kind: "page", request: `p${i}`, before, limit }),
          );
          const page = sent.find((m) => m.kind === "page");
          assert.ok(page?.kind === "page");
          const seqs = page.records.map((r) => r.seq);
          assert.ok(seqs.length >= 1 && seqs.length <= limit);
          assert.equal(seqs.at(-1), before - 1);
          seqs.forEach((seq, j) => assert.equal(seq, seqs[0] + j));
          assert.equal(page.more, seqs[0] > 1);
          held = [...seqs, ...held];
          more = page.more;
        }
        // Whatever was paged in is a gap-free run ending at the head, each seq once.
        held.forEach((seq, j) => assert.equal(seq, count - held.length + 1 + j));
        assert.equal(connection.cursor, count);
      },
    ),
    { numRuns: 150 },
  );
});
