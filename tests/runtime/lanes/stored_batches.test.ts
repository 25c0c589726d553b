// A batched catch-up encodes stored records straight into `records` messages
// (`storedBatches`), without a `{seq, text}` object per record. These tests hold its messages
// to the ones the two-step path gives (`textBatches(encodeStoredRecords(...))`, itself held to
// `JSON.stringify` of the parsed records in record_batches.test.ts), on real SQLite in a temp
// dir, for every documented record type, any JSON body and any bound.

import assert from "node:assert/strict";
import fc from "fast-check";
import {
  encodeStoredRecords,
  storedBatches,
  type StoredRecord,
  textBatches,
} from "../../../runtime/lanes/mod.ts";
import { appendEvent, readEventTexts } from "../../../store/tables/events.ts";
import type { Store } from "../../../store/store.ts";
import { appendRecordExamples } from "../../_helpers/record_examples.ts";
import { withStore } from "../../_helpers/store.ts";

function stored(store: Store, since = 0): StoredRecord[] {
  return readEventTexts(store, "default", { since, limit: 10_000 });
}

function twoStep(session: string, rows: StoredRecord[], bound: number) {
  return textBatches(session, encodeStoredRecords(session, rows), bound);
}

Deno.test("`storedBatches()` gives every documented record type the messages of the two-step path, at every bound", async () => {
  await withStore((store) => {
    const written = appendRecordExamples(store);
    appendEvent(store, "default", "test.null", null);
    assert.ok(written > 20, `only ${written} examples`);
    const rows = stored(store);
    for (const bound of [1, 300, 1_000, 4_000, 256 * 1024]) {
      const batches = storedBatches("default", rows, bound);
      assert.deepEqual(batches, twoStep("default", rows, bound), `bound ${bound}`);
      assert.equal(batches.reduce((n, b) => n + b.count, 0), rows.length);
    }
    // The default bound is the two-step path's default, and a null body is sent as {}.
    const batches = storedBatches("default", rows);
    assert.deepEqual(batches, textBatches("default", encodeStoredRecords("default", rows)));
    assert.deepEqual(JSON.parse(batches.at(-1)!.text).records.at(-1).data, {});
  });
});

Deno.test("`storedBatches()` keeps each message under its bound, a larger record alone, every record once in order, for any bodies", async () => {
  await withStore(async (store) => {
    await fc.assert(
      fc.property(
        fc.array(fc.jsonValue({ maxDepth: 3 }), { minLength: 1, maxLength: 12 }),
        fc.integer({ min: 1, max: 2_000 }),
        fc.constantFrom("default", 'a "quoted" session \u00e9'),
        (bodies, bound, session) => {
          const since = stored(store).at(-1)?.seq ?? 0;
          for (const body of bodies) appendEvent(store, "default", "test.any", body);
          const rows = stored(store, since);
          const batches = storedBatches(session, rows, bound);
          assert.deepEqual(batches, twoStep(session, rows, bound));
          const seqs = batches.flatMap((batch) => {
            const message = JSON.parse(batch.text);
            assert.equal(message.kind, "records");
            assert.equal(message.session, session);
            assert.equal(message.records.length, batch.count);
            assert.equal(batch.lastSeq, message.records.at(-1).seq);
            assert.ok(batch.text.length <= bound || batch.count === 1);
            return message.records.map((record: { seq: number }) => record.seq);
          });
          assert.deepEqual(seqs, rows.map((row) => row.seq));
        },
      ),
      { numRuns: 60 },
    );
  });
  assert.deepEqual(storedBatches("default", []), []);
});
