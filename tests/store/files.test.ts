/**
 * `replaceFile()`: the one way klbr replaces a small file whole (the operator token, the daemon
 * address, a skill, a draft file, hook bindings, the seccomp filter, the service unit).
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { replaceFile } from "../../store/tables/files.ts";
import { withDir } from "./_store_support.ts";

Deno.test("`replaceFile()` replaces a file whole, with exactly its mode, and leaves no temp file", async () => {
  await withDir(async (dir) => {
    const path = join(dir, "operator-token");
    await Deno.writeTextFile(path, "old\n", { mode: 0o644 });
    const previous = Deno.umask(0o077);
    try {
      await replaceFile(path, "new\n", { mode: 0o644 });
    } finally {
      Deno.umask(previous);
    }
    assert.equal(await Deno.readTextFile(path), "new\n");
    assert.equal((await Deno.stat(path)).mode! & 0o777, 0o644, "the umask does not narrow it");
    await replaceFile(path, new Uint8Array(200_000).fill(65), { mode: 0o600 });
    assert.equal((await Deno.readFile(path)).length, 200_000);
    assert.equal((await Deno.stat(path)).mode! & 0o777, 0o600);
    assert.deepEqual([...Deno.readDirSync(dir)].map((e) => e.name), ["operator-token"]);
  });
});

Deno.test("`replaceFile()` that cannot rename leaves the old file and removes its temp file", async () => {
  await withDir(async (dir) => {
    const path = join(dir, "taken");
    await Deno.mkdir(path);
    await Deno.writeTextFile(join(path, "inside"), "kept");
    await assert.rejects(replaceFile(path, "text", { mode: 0o644 }));
    assert.deepEqual([...Deno.readDirSync(dir)].map((e) => e.name), ["taken"]);
    assert.equal(await Deno.readTextFile(join(path, "inside")), "kept");
  });
});
