// A catch-up splices each stored body into its record message instead of parsing it and
// encoding it again. These tests hold the spliced text to what `JSON.stringify` gives the
// parsed record (what a record message carried before), against real SQLite in a temp dir,
// and hold the text path of `LaneConnection` to the same messages, order and resume as the
// object path.

import assert from "node:assert/strict";
import fc from "fast-check";
import {
  encodeStoredRecords,
  LaneConnection,
  type LaneHost,
  type StoredRecord,
  textBatches,
} from "../../../runtime/lanes/mod.ts";
import type { LaneRecord, ServerMessage } from "../../../runtime/core/mod.ts";
import { appendEvent, readEvents, readEventTexts } from "../../../store/tables/events.ts";
import type { Store } from "../../../store/store.ts";
import { appendRecordExamples } from "../../_helpers/record_examples.ts";
import { withStore } from "../../_helpers/store.ts";
import { AUTH, TOKEN } from "./_native_auth.ts";

/** Each record of the log as the object path encodes it: parsed, then `JSON.stringify`. */
function parsedTexts(store: Store, since = 0): string[] {
  return readEvents(store, "default", { since, limit: 10_000 }).map((event) =>
    JSON.stringify({
      kind: "record",
      session: "default",
      seq: event.seq,
      at: event.at,
      type: event.kind,
      data: event.body ?? {},
    })
  );
}

function splicedTexts(store: Store, since = 0): string[] {
  const rows = readEventTexts(store, "default", { since, limit: 10_000 });
  return encodeStoredRecords("default", rows).map((record) => record.text);
}

Deno.test("`encodeStoredRecords()` gives every documented record type the text of its parsed record", async () => {
  await withStore((store) => {
    const written = appendRecordExamples(store);
    assert.ok(written > 20, `only ${written} examples`);
    const spliced = splicedTexts(store);
    assert.equal(spliced.length, written);
    assert.deepEqual(spliced, parsedTexts(store));
  });
});

Deno.test("`encodeStoredRecords()` gives any JSON body the text of its parsed record; a null body is sent as {}", async () => {
  await withStore(async (store) => {
    appendEvent(store, "default", "test.null", null);
    const [nullRecord] = splicedTexts(store);
    assert.deepEqual(JSON.parse(nullRecord).data, {});
    await fc.assert(
      fc.property(fc.array(fc.jsonValue({ maxDepth: 3 }), { maxLength: 8 }), (bodies) => {
        const since = readEvents(store, "default", { since: 0, limit: 10_000 }).length;
        for (const body of bodies) appendEvent(store, "default", "test.any", body);
        const spliced = splicedTexts(store, since);
        assert.deepEqual(spliced, parsedTexts(store, since));
        // Each text is one JSON value whose data is the body as written (a null body as {}).
        spliced.forEach((text, i) => {
          const expected = JSON.parse(JSON.stringify(bodies[i])) ?? {};
          assert.deepEqual(JSON.parse(text).data, expected);
        });
      }),
      { numRuns: 60 },
    );
  });
});

Deno.test("`textBatches()` keeps each message under its bound, a larger record alone, every record once in order", () => {
  const records = Array.from({ length: 60 }, (_, i) => ({
    seq: 101 + i,
    text: JSON.stringify({ seq: 101 + i, pad: "x".repeat(i === 30 ? 3_000 : 40 + (i % 7) * 10) }),
  }));
  for (const bound of [200, 1_000, 1 << 20]) {
    const batches = textBatches("default", records, bound);
    let next = 0;
    for (const batch of batches) {
      const message = JSON.parse(batch.text);
      assert.equal(message.kind, "records");
      assert.equal(message.session, "default");
      const members = records.slice(next, next + batch.count);
      assert.deepEqual(message.records, members.map((r) => JSON.parse(r.text)));
      assert.equal(batch.lastSeq, members.at(-1)!.seq);
      assert.ok(batch.text.length <= bound || batch.count === 1, `${batch.text.length} > ${bound}`);
      next += batch.count;
    }
    assert.equal(next, records.length, `every record once under bound ${bound}`);
  }
  assert.ok(textBatches("default", records, 1_000).some((b) => b.count === 1 && b.lastSeq === 131));
  assert.equal(textBatches("default", records, 1 << 20).length, 1);
  assert.deepEqual(textBatches("default", []), []);
});

/** A host over `count` records; with `stored`, it also serves them as stored JSON text. */
function host(count: number, stored: boolean): LaneHost & { storedReads: number } {
  const log: LaneRecord[] = Array.from({ length: count }, (_, i) => ({
    kind: "record",
    session: "default",
    seq: i + 1,
    at: 1_000 + i,
    type: i % 3 === 0 ? "send" : "test.other",
    data: { n: i, text: `record ${i} "quoted" \u00e9 \n`, nested: { list: [i, null, true] } },
  }));
  const result: LaneHost & { storedReads: number } = {
    version: "test",
    storedReads: 0,
    headSeq: () => log.length,
    readRecords: (_s, since, limit) => log.filter((r) => r.seq > since).slice(0, limit),
    subscribe: () => () => {},
    admitMany: () => [],
    operate: () => Promise.resolve({}),
  };
  if (stored) {
    result.readStoredRecords = (_s, since, limit): StoredRecord[] => {
      result.storedReads++;
      return log.filter((r) => r.seq > since).slice(0, limit).map((r) => ({
        seq: r.seq,
        kind: r.type,
        at: r.at,
        body: JSON.stringify(r.data),
      }));
    };
  }
  return result;
}

Deno.test("`LaneConnection` sends stored records as spliced text: the same messages as parsed ones, in order, resuming after a seq", async () => {
  for (const batch of [false, true]) {
    for (const since of [0, 7]) {
      const hello = JSON.stringify({ kind: "hello", since, token: TOKEN, batch });
      const objects: ServerMessage[] = [];
      await new LaneConnection(host(25, false), {
        auth: AUTH,
        pageSize: 4,
        send: (m) => objects.push(m),
        close: () => {},
      }).receive(hello);
      const texts: string[] = [];
      const textHost = host(25, true);
      let waits = 0;
      const connection = new LaneConnection(textHost, {
        auth: AUTH,
        pageSize: 4,
        send: (m) => texts.push(JSON.stringify(m)),
        sendText: (text) => texts.push(text),
        close: () => {},
        writable: () => {
          waits++;
          return Promise.resolve();
        },
      });
      await connection.receive(hello);
      assert.ok(textHost.storedReads > 0, "the stored records were read");
      assert.equal(waits, Math.ceil((25 - since) / 4), "one wait for the transport a page");
      assert.deepEqual(texts.map((t) => JSON.parse(t)), objects, `batch ${batch} since ${since}`);
      const seqs = objects.flatMap((m) =>
        m.kind === "record" ? [m.seq] : m.kind === "records" ? m.records.map((r) => r.seq) : []
      );
      assert.deepEqual(seqs, Array.from({ length: 25 - since }, (_, i) => since + i + 1));
      assert.equal(connection.cursor, 25);
    }
  }
});
