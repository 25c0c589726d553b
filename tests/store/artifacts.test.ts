import assert from "node:assert/strict";
import { join } from "node:path";
import {
  artifactPath,
  keepAttachment,
  keptAttachmentSize,
  readArtifact,
  spoolArtifact,
} from "../../store/tables/artifacts.ts";
import { isKlbrError } from "../../runtime/core/mod.ts";
import { tempDir } from "../_helpers/temp.ts";

const bytes = (text: string) => new TextEncoder().encode(text);

Deno.test("`spoolArtifact()` writes once and evicts the oldest", async () => {
  const state = await tempDir();
  const a = await spoolArtifact(state, bytes("a".repeat(600)), 1_000);
  const again = await spoolArtifact(state, bytes("a".repeat(600)), 1_000);
  assert.deepEqual(again, a, "the same bytes are one artifact");
  assert.equal(a.bytes, 600);
  assert.match(a.id, /^[0-9a-f]{64}$/);
  // Make the first one clearly older, then go over the budget with a second.
  await Deno.utime(join(state, "artifacts", a.id), 1, 1);
  const b = await spoolArtifact(state, bytes("b".repeat(600)), 1_000);
  const names = [...Deno.readDirSync(join(state, "artifacts"))].map((e) => e.name);
  assert.deepEqual(names, [b.id], "the oldest went, the new one stayed, no temp file is left");
  // A single artifact over the budget is still kept: the newest is never evicted.
  const big = await spoolArtifact(state, bytes("c".repeat(5_000)), 1_000);
  assert.deepEqual([...Deno.readDirSync(join(state, "artifacts"))].map((e) => e.name), [big.id]);
});

Deno.test("`spoolArtifact()` of bytes spooled before makes them the newest: the oldest evicted is another", async () => {
  const state = await tempDir();
  const dir = join(state, "artifacts");
  const a = await spoolArtifact(state, bytes("a".repeat(400)), 1_000);
  const b = await spoolArtifact(state, bytes("b".repeat(400)), 1_000);
  await Deno.utime(join(dir, a.id), 1, 1);
  await Deno.utime(join(dir, b.id), 2, 2);
  // A later cell prints a's bytes again: its result names a, which is now the newest.
  assert.deepEqual(await spoolArtifact(state, bytes("a".repeat(400)), 1_000), a);
  const c = await spoolArtifact(state, bytes("c".repeat(400)), 1_000);
  const names = [...Deno.readDirSync(dir)].map((e) => e.name).sort();
  assert.deepEqual(names, [a.id, c.id].sort(), "b, the least recently spooled, was evicted");
  assert.equal((await readArtifact(state, a.id)).bytes, 400);
});

Deno.test("`readArtifact()` reads a range and refuses bad ids, ranges and evicted artifacts", async () => {
  const state = await tempDir();
  const ref = await spoolArtifact(state, bytes("0123456789"));
  const part = await readArtifact(state, ref.id, { offset: 3, length: 4 });
  assert.equal(new TextDecoder().decode(part.data), "3456");
  assert.equal(part.bytes, 10);
  assert.equal((await readArtifact(state, ref.id, { offset: 10 })).data.length, 0);
  const refuse = async (fn: () => Promise<unknown>, code: string, message: string) => {
    try {
      await fn();
      assert.fail("expected a refusal");
    } catch (error) {
      assert.ok(isKlbrError(error));
      assert.equal(error.code, code);
      assert.equal(error.message, message);
    }
  };
  await refuse(
    () => readArtifact(state, "../etc"),
    "invalid_input",
    "cannot read artifact: id must be 64 hex characters (got ../etc)",
  );
  await refuse(
    () => readArtifact(state, ref.id, { offset: -1 }),
    "invalid_input",
    `cannot read artifact ${
      ref.id.slice(0, 12)
    }: offset must be >= 0 and length 1-16777216 (got -1, 65536)`,
  );
  await refuse(
    () => readArtifact(state, "f".repeat(64)),
    "not_found",
    "cannot read artifact ffffffffffff: it does not exist or was evicted",
  );
});

Deno.test("`keepAttachment()` is never evicted and reads like any artifact", async () => {
  const state = await tempDir();
  const kept = await keepAttachment(state, bytes("k".repeat(600)));
  assert.equal(await keepAttachment(state, bytes("k".repeat(600))).then((r) => r.id), kept.id);
  assert.equal(keptAttachmentSize(state, kept.id), 600);
  await Deno.utime(join(state, "artifacts", "kept", kept.id), 1, 1);
  // Spooled outputs far over the budget evict each other, never the attachment.
  const spooled = await spoolArtifact(state, bytes("s".repeat(600)), 100);
  await spoolArtifact(state, bytes("t".repeat(600)), 100);
  assert.equal(await artifactPath(state, spooled.id), undefined, "the older spool was evicted");
  assert.equal(await artifactPath(state, kept.id), join("artifacts", "kept", kept.id));
  const read = await readArtifact(state, kept.id, { offset: 598 });
  assert.equal(new TextDecoder().decode(read.data), "kk");
  assert.equal(read.bytes, 600);
  assert.equal(keptAttachmentSize(state, spooled.id), undefined, "a spooled output is not one");
  assert.equal(keptAttachmentSize(state, "../kept"), undefined, "nor is a malformed id");
  assert.deepEqual(
    [...Deno.readDirSync(join(state, "artifacts", "kept"))].map((e) => e.name),
    [kept.id],
    "no temp file is left",
  );
});
