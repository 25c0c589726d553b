/**
 * The page's record log: one copy per `seq`, in order, surviving a reload only when the
 * stored copy is really this session's.
 *
 * @module
 */

import assert from "node:assert/strict";
import fc from "fast-check";
import type { LaneRecord } from "../../runtime/core/mod.ts";
import { isLaneRecord, RecordLog } from "../../ui/src/record_log.ts";

function record(seq: number, type = "scratchpad", session = "default"): LaneRecord {
  return { kind: "record", session, seq, at: 1_736_933_400_000 + seq, type, data: { seq } };
}

Deno.test("`RecordLog.add()` keeps one copy per seq however often a replay repeats it", () => {
  const log = new RecordLog("default");
  assert.equal(log.add(record(1)), true);
  assert.equal(log.add(record(2)), true);
  assert.equal(log.add(record(1)), false);
  assert.equal(log.add({ ...record(2), type: "send" }), false);
  assert.deepEqual(log.records().map((r) => [r.seq, r.type]), [[1, "scratchpad"], [
    2,
    "scratchpad",
  ]]);
  assert.equal(log.lastSeq, 2);
});

Deno.test("`RecordLog.records()` is in seq order whatever the arrival order", () => {
  fc.assert(
    fc.property(fc.array(fc.integer({ min: 1, max: 50 }), { maxLength: 80 }), (seqs) => {
      const log = new RecordLog("default");
      for (const seq of seqs) log.add(record(seq));
      const unique = [...new Set(seqs)].sort((a, b) => a - b);
      assert.deepEqual(log.records().map((r) => r.seq), unique);
      assert.equal(log.lastSeq, unique.at(-1) ?? 0);
      assert.equal(log.size, unique.length);
    }),
  );
});

Deno.test("`RecordLog.add()` refuses values that are not records", () => {
  const log = new RecordLog("default");
  const bad = [
    { ...record(1), kind: "token" },
    { ...record(1), seq: 0 },
    { ...record(1), seq: 1.5 },
    { ...record(1), seq: "1" },
    { ...record(1), data: null },
    { ...record(1), data: [] },
    { ...record(1), type: 7 },
    { ...record(1), at: "now" },
  ];
  for (const value of bad) {
    assert.equal(log.add(value as unknown as LaneRecord), false, JSON.stringify(value));
    assert.equal(isLaneRecord(value), false);
  }
  assert.equal(log.size, 0);
  assert.equal(log.revision, 0);
});

Deno.test("`RecordLog.clear()` forgets every record and moves the revision", () => {
  const log = new RecordLog("default");
  log.add(record(1));
  const before = log.revision;
  log.clear();
  assert.deepEqual([log.size, log.lastSeq, log.records().length], [0, 0, 0]);
  assert.ok(log.revision > before);
  assert.equal(log.add(record(1)), true);
});

Deno.test("`RecordLog.fromSnapshot()` restores what `toSnapshot()` stored", () => {
  const log = new RecordLog("default");
  for (const seq of [3, 1, 2]) log.add(record(seq));
  const copy = RecordLog.fromSnapshot(JSON.parse(JSON.stringify(log.toSnapshot())), "default");
  assert.deepEqual(copy.records(), log.records());
  assert.equal(copy.lastSeq, 3);
});

Deno.test("`RecordLog.fromSnapshot()` starts empty for another session's snapshot", () => {
  const log = new RecordLog("other");
  log.add(record(1, "scratchpad", "other"));
  assert.equal(RecordLog.fromSnapshot(log.toSnapshot(), "default").size, 0);
});

Deno.test("`RecordLog.fromSnapshot()` starts empty for a corrupt or unknown-version snapshot", () => {
  const good = new RecordLog("default");
  good.add(record(1));
  const snapshot = good.toSnapshot();
  for (
    const value of [
      null,
      "text",
      [],
      { ...snapshot, version: 2 },
      { ...snapshot, records: "no" },
      { ...snapshot, session: undefined },
    ]
  ) {
    assert.equal(RecordLog.fromSnapshot(value, "default").size, 0, JSON.stringify(value));
  }
});

Deno.test("`RecordLog.fromSnapshot()` drops single bad or foreign records and keeps the rest", () => {
  const snapshot = {
    version: 1,
    session: "default",
    lastSeq: 9,
    records: [record(1), { ...record(2), seq: -2 }, record(3, "x", "other"), record(4)],
  };
  const log = RecordLog.fromSnapshot(snapshot, "default");
  assert.deepEqual(log.records().map((r) => r.seq), [1, 4]);
  // The resume point is what the log holds, never a number the snapshot merely claims.
  assert.equal(log.lastSeq, 4);
});

Deno.test("`RecordLog` knows its oldest seq and forgets the oldest records past a bound", () => {
  const log = new RecordLog("default");
  assert.equal(log.firstSeq, 0);
  assert.equal(log.completeFrom() > 1, false);
  for (const seq of [7, 5, 6, 8, 9]) {
    log.add({ kind: "record", session: "default", seq, at: 0, type: "t", data: {} });
  }
  assert.equal(log.firstSeq, 5);
  assert.equal(log.completeFrom() > 1, true);
  const before = log.revision;
  log.trimOldest(3);
  assert.deepEqual(log.records().map((r) => r.seq), [7, 8, 9]);
  assert.equal(log.lastSeq, 9);
  assert.ok(log.revision > before);
  log.trimOldest(3);
  assert.equal(log.size, 3);
  // A forgotten record can be added again (a later "load earlier").
  assert.equal(
    log.add({ kind: "record", session: "default", seq: 6, at: 0, type: "t", data: {} }),
    true,
  );
  assert.deepEqual(log.records().map((r) => r.seq), [6, 7, 8, 9]);
});

Deno.test("`RecordLog` holds a conversation paged on its own from its reach, and no other below the run", () => {
  const log = new RecordLog("default");
  for (let seq = 500; seq <= 800; seq++) log.add(record(seq));
  assert.deepEqual([log.completeFrom(), log.completeFrom("local:main")], [500, 500]);
  // A page of local:main reaches seq 40: its records, and one of another conversation's.
  log.holdCompleteFrom();
  for (const seq of [40, 41, 42, 120, 121]) log.add(record(seq));
  log.noteConversationFrom("local:main", 40);
  assert.equal(log.completeFrom("local:main"), 40);
  assert.equal(log.completeFrom(), 500, "the run below 500 is not whole");
  assert.equal(log.completeFrom("discord:9"), 500, "nor is any other conversation");
  assert.equal(log.hasEarlierIn("local:main"), true);
  // Its start: nothing of it before.
  log.noteConversationFrom("local:main", 1);
  assert.equal(log.hasEarlierIn("local:main"), false);
  // A reload keeps what is whole where.
  const again = RecordLog.fromSnapshot(JSON.parse(JSON.stringify(log.toSnapshot())), "default");
  assert.deepEqual(
    [again.completeFrom(), again.completeFrom("local:main"), again.size],
    [500, 1, log.size],
  );
  // Forgetting the oldest records makes nothing below the oldest kept whole any more.
  again.trimOldest(250);
  const first = again.firstSeq;
  assert.ok(first > 500);
  assert.deepEqual([again.completeFrom(), again.completeFrom("local:main")], [first, first]);
  // A session page below the run extends it.
  const plain = new RecordLog("default");
  for (let seq = 500; seq <= 800; seq++) plain.add(record(seq));
  plain.holdCompleteFrom();
  for (let seq = 200; seq < 500; seq++) plain.add(record(seq));
  plain.noteCompleteFrom(200);
  assert.equal(plain.completeFrom("anything"), 200);
});
