// `klbr backup` of a live store: the backup directory holds the files its manifest and module
// comment list and nothing else (no `runtime.sqlite-shm` or `-wal` of the copy), before and
// after a restore has read it.

import assert from "node:assert/strict";
import { join, relative } from "node:path";
import { backupState, restoreState } from "../../../runtime/backup/mod.ts";
import { KlbrError } from "../../../runtime/core/mod.ts";
import { initStateDir } from "../../../runtime/setup/mod.ts";
import { openStore } from "../../../store/store.ts";
import { keepAttachment, readArtifact } from "../../../store/tables/artifacts.ts";
import { tempDir } from "../../_helpers/temp.ts";

/** Every file under `dir`, relative to it, sorted. */
async function filesUnder(dir: string, root = dir): Promise<string[]> {
  const out: string[] = [];
  for await (const entry of Deno.readDir(dir)) {
    const path = join(dir, entry.name);
    if (entry.isDirectory) out.push(...await filesUnder(path, root));
    else out.push(relative(root, path));
  }
  return out.sort();
}

Deno.test("`backupState()` of a live store leaves only the files it lists, also once restored from", async () => {
  const parent = await tempDir();
  const state = join(parent, "state");
  await initStateDir(state, { store: false });
  // The daemon's own connection stays open: the store is live, in WAL mode.
  const store = openStore(state, { create: true });
  try {
    const target = join(parent, "backup");
    const manifest = await backupState(state, target);
    assert.deepEqual(manifest.releases, []);
    assert.deepEqual(manifest.artifacts, []);
    const expected = ["backup.json", "config.kdl", "operator.token", "runtime.sqlite"];
    assert.deepEqual(await filesUnder(target), expected);
    await restoreState(target, join(parent, "restored"));
    assert.deepEqual(await filesUnder(target), expected, "reading the backup left nothing");
    assert.deepEqual(await filesUnder(join(parent, "restored")), [
      "config.kdl",
      "operator.token",
      "runtime.sqlite",
    ]);
  } finally {
    store.close();
  }
});

Deno.test("`backupState()` copies every kept attachment, and the restored state reads it", async () => {
  const parent = await tempDir();
  const state = join(parent, "state");
  await initStateDir(state, { store: false });
  const store = openStore(state, { create: true });
  try {
    const kept = await keepAttachment(state, new TextEncoder().encode("col\n1\n"));
    const target = join(parent, "backup");
    const manifest = await backupState(state, target);
    assert.deepEqual(manifest.artifacts, [kept.id]);
    assert.ok((await filesUnder(target)).includes(join("artifacts", "kept", kept.id)));
    // A tampered copy is caught by the check every restore runs.
    await Deno.writeTextFile(join(target, "artifacts", "kept", kept.id), "tampered");
    await assert.rejects(restoreState(target, join(parent, "bad")), /does not match its hash/);
    await Deno.writeTextFile(join(target, "artifacts", "kept", kept.id), "col\n1\n");
    const restored = join(parent, "restored");
    await restoreState(target, restored);
    const read = await readArtifact(restored, kept.id);
    assert.equal(new TextDecoder().decode(read.data), "col\n1\n");
  } finally {
    store.close();
  }
});

Deno.test("a backup into a file, or a restore onto one, is refused in one line and the file is left as it was", async () => {
  const parent = await tempDir();
  const state = join(parent, "state");
  await initStateDir(state);
  const file = join(parent, "notes.txt");
  await Deno.writeTextFile(file, "");
  await assert.rejects(backupState(state, file), (error: unknown) => {
    assert.ok(error instanceof KlbrError, String(error));
    assert.equal(error.code, "invalid_input");
    assert.equal(
      error.message,
      `cannot back up: ${file} is not an empty directory; give a new or empty one (got ${file})`,
    );
    return true;
  });
  const backup = join(parent, "backup");
  await backupState(state, backup);
  await assert.rejects(restoreState(backup, file), (error: unknown) => {
    assert.ok(error instanceof KlbrError, String(error));
    assert.equal(error.code, "invalid_input");
    assert.match(error.message, /^cannot restore into .*: it is not empty; pass --replace /);
    return true;
  });
  assert.equal(await Deno.readTextFile(file), "");
  // Nothing was made beside them: no temporary copy is left.
  const names = [];
  for await (const entry of Deno.readDir(parent)) names.push(entry.name);
  assert.deepEqual(names.sort(), ["backup", "notes.txt", "state"]);
});
