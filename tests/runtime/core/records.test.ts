/**
 * The durable record union: `docs/protocol.md`'s record table stays true to it, reading
 * tolerates unknown fields and unknown types and names what is wrong, and every type a writer
 * in `runtime/` or `store/` appends is in it.
 *
 * @module
 */

import assert from "node:assert/strict";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  DurableRecord,
  isRecordType,
  KnownRecord,
  readRecord,
  RECORD_TYPES,
} from "../../../runtime/core/mod.ts";
import { recordExamples } from "../../_helpers/record_examples.ts";

const REPO = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");

Deno.test("docs/protocol.md lists every record type with an example that parses", () => {
  const examples = recordExamples();
  const documented = examples.map((e) => e.type);
  assert.deepEqual(documented.filter((t) => !isRecordType(t)), [], "documented without a schema");
  assert.deepEqual(RECORD_TYPES.filter((t) => !documented.includes(t)), [], "schema not listed");
  assert.equal(new Set(documented).size, documented.length, "a type listed twice");
  for (const example of examples) {
    assert.notEqual(example.data, undefined, `no example data: ${example.row}`);
    const read = readRecord(example.type, example.data);
    assert.ok(read.ok, `${example.type}: ${read.ok ? "" : read.problem}`);
    assert.ok(KnownRecord.safeParse({ type: example.type, data: example.data }).success);
  }
});

Deno.test("`readRecord()` keeps fields a type does not name", () => {
  const data = {
    frame_id: "fr_1",
    text: "thinking",
    partial: false,
    from_a_newer_writer: { nested: [1] },
  };
  const read = readRecord("scratchpad", data);
  assert.ok(read.ok);
  assert.deepEqual(read.record, { type: "scratchpad", data });
});

Deno.test("`readRecord()` reports an unknown type as such, with its data untouched", () => {
  const data = { job_id: "job_1" };
  assert.deepEqual(readRecord("job.started", data), {
    ok: false,
    type: "job.started",
    data,
    reason: "unknown_type",
    problem: "",
  });
});

Deno.test("`readRecord()` names every field of a known type's body that is wrong", () => {
  assert.deepEqual(readRecord("turn.started", { frame_id: 7, frame: 1.5 }), {
    ok: false,
    type: "turn.started",
    data: { frame_id: 7, frame: 1.5 },
    reason: "invalid_body",
    problem: "frame_id: Invalid input: expected string, received number; " +
      "frame: Invalid input: expected int, received number; " +
      "resumed: Invalid input: expected boolean, received undefined",
  });
  const notObject = readRecord("send", "hello");
  assert.ok(!notObject.ok);
  assert.equal(notObject.problem, "(root): Invalid input: expected object, received string");
  // A key the prototype has is no record type.
  assert.equal(readRecord("toString", {}).ok, false);
  assert.equal(isRecordType("toString"), false);
});

Deno.test("`DurableRecord` takes an unknown type as it is and refuses a known type with a bad body", () => {
  assert.ok(DurableRecord.safeParse({ type: "job.started", data: "anything" }).success);
  assert.ok(!DurableRecord.safeParse({ type: "send", data: { text: "no ids" } }).success);
  const [example] = recordExamples();
  assert.ok(DurableRecord.safeParse({ type: example.type, data: example.data }).success);
});

async function sources(dir: string): Promise<string[]> {
  const out: string[] = [];
  for await (const entry of Deno.readDir(join(REPO, dir))) {
    const path = join(dir, entry.name);
    if (entry.isDirectory) out.push(...await sources(path));
    else if (entry.name.endsWith(".ts")) out.push(path);
  }
  return out;
}

Deno.test("every record type written in runtime/ and store/ is in the union, and each is written", async () => {
  // The typed append checks a known type's body; a misspelt type would be stored as unknown,
  // so the writers' types are checked here, on the source.
  const calls = [
    /(?:appendEvent|insertEvent)\(\s*[^,()]+,\s*[^,()]+,\s*(?:"([^"]+)"|`([^`]+)`)/g,
    // A type chosen by a condition: `state === "abandoned" ? "frame.abandoned" : "frame.finished"`.
    /(?:appendEvent|insertEvent)\(\s*[^,()]+,\s*[^,()]+,\s*[^,?]+\?\s*"([^"]+)"\s*:\s*"([^"]+)"/g,
    /(?:#record|\brecord|\bnote)\(\s*"([^"]+)"/g,
    // A record at a sequence number taken for a batch: `insertEventAt(store, session, seq, type, …)`.
    /insertEventAt\(\s*[^,()]+,\s*[^,()]+,\s*[^,()]+,\s*"([^"]+)"/g,
  ];
  const written = new Map<string, string>();
  for (const file of [...await sources("runtime"), ...await sources("store")]) {
    const text = await Deno.readTextFile(join(REPO, file));
    for (const pattern of calls) {
      for (const match of text.matchAll(pattern)) {
        for (const type of match.slice(1)) if (type !== undefined) written.set(type, file);
      }
    }
  }
  const covers = (type: string, written: string) =>
    written.includes("${") ? type.startsWith(written.split("${")[0]) : type === written;
  const strays = [...written].filter(([w]) => !RECORD_TYPES.some((t) => covers(t, w)));
  assert.deepEqual(strays, [], "written types without a schema");
  const unwritten = RECORD_TYPES.filter((t) => ![...written.keys()].some((w) => covers(t, w)));
  assert.deepEqual(unwritten, [], "schema types no writer appends");
});
