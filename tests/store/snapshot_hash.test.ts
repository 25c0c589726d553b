/**
 * Release snapshots: a tree hashed into one id, published once, verified byte for byte.
 *
 * Every test runs against real SQLite files in a fresh temporary directory.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import fc from "fast-check";
import { getRelease } from "../../store/tables/releases.ts";
import {
  publishRelease,
  snapshotTree,
  verifyRelease,
} from "../../store/maintenance/snapshot_hash.ts";
import { count, listDir, rejectsKlbr, withDir, withStore } from "./_store_support.ts";

async function writeTree(root: string, files: Record<string, string | [string, number]>) {
  for (const [path, spec] of Object.entries(files)) {
    const [text, mode] = typeof spec === "string" ? [spec, 0o644] : spec;
    const absolute = join(root, path);
    await Deno.mkdir(absolute.slice(0, absolute.lastIndexOf("/")), { recursive: true });
    await Deno.writeTextFile(absolute, text);
    await Deno.chmod(absolute, mode);
  }
}

const TREE = {
  "hooks/attention.py": "def plan(x):\n    return x\n",
  "hooks/model.py": "ROUTE = 'a'\n",
  "run.sh": ["#!/bin/sh\necho hi\n", 0o755] as [string, number],
  "README.md": "behaviour\n",
};

Deno.test("`snapshotTree()` gives the same id for the same tree", async () => {
  await withDir(async (dir) => {
    await writeTree(join(dir, "a"), TREE);
    // The same files written in another order, with other non-executable mode bits.
    const reversed = Object.fromEntries(Object.entries(TREE).reverse());
    await writeTree(join(dir, "b"), reversed);
    await Deno.chmod(join(dir, "b", "README.md"), 0o600);
    const a = await snapshotTree(join(dir, "a"));
    const b = await snapshotTree(join(dir, "b"));
    assert.match(a.id, /^[0-9a-f]{64}$/);
    assert.equal(a.id, b.id);
    assert.deepEqual(a.files, [
      { path: "README.md", mode: 0o644, size: 10 },
      { path: "hooks/attention.py", mode: 0o644, size: 26 },
      { path: "hooks/model.py", mode: 0o644, size: 12 },
      { path: "run.sh", mode: 0o755, size: 18 },
    ]);
  });
});

Deno.test("`snapshotTree()` gives another id for a changed byte, mode or name", async () => {
  await withDir(async (dir) => {
    await writeTree(join(dir, "base"), TREE);
    const base = (await snapshotTree(join(dir, "base"))).id;
    const variants: Record<string, (root: string) => Promise<void>> = {
      byte: (root) => Deno.writeTextFile(join(root, "hooks/model.py"), "ROUTE = 'b'\n"),
      mode: (root) => Deno.chmod(join(root, "README.md"), 0o744),
      name: (root) => Deno.rename(join(root, "README.md"), join(root, "README.txt")),
      move: (root) => Deno.rename(join(root, "hooks/model.py"), join(root, "model.py")),
      added: (root) => Deno.writeTextFile(join(root, "empty"), ""),
    };
    const ids = new Set([base]);
    for (const [name, change] of Object.entries(variants)) {
      const root = join(dir, name);
      await writeTree(root, TREE);
      await change(root);
      const id = (await snapshotTree(root)).id;
      assert.notEqual(id, base, `${name} changes the id`);
      ids.add(id);
    }
    assert.equal(ids.size, Object.keys(variants).length + 1);
  });
});

Deno.test("`snapshotTree()` keeps fields apart: moving bytes between name and content changes the id", async () => {
  await withDir(async (dir) => {
    let n = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.string({ minLength: 1, maxLength: 6, unit: fc.constantFrom("a", "b", "c") }),
        fc.string({ maxLength: 6, unit: fc.constantFrom("a", "b", "c") }),
        fc.nat({ max: 5 }),
        async (name, content, cut) => {
          // {name: content} against {name + content[:cut]: content[cut:]}: same concatenation.
          if (cut === 0 || cut > content.length) return;
          const one = join(dir, `one${n}`);
          const two = join(dir, `two${n++}`);
          await writeTree(one, { [name]: content });
          await writeTree(two, { [name + content.slice(0, cut)]: content.slice(cut) });
          assert.notEqual((await snapshotTree(one)).id, (await snapshotTree(two)).id);
        },
      ),
      { numRuns: 40 },
    );
  });
});

Deno.test("`snapshotTree()` ignores empty directories", async () => {
  await withDir(async (dir) => {
    await writeTree(join(dir, "a"), TREE);
    await writeTree(join(dir, "b"), TREE);
    await Deno.mkdir(join(dir, "b", "drafts", "deeper"), { recursive: true });
    assert.equal((await snapshotTree(join(dir, "a"))).id, (await snapshotTree(join(dir, "b"))).id);
  });
});

Deno.test("`snapshotTree()` refuses a symlink anywhere in the tree, naming it", async () => {
  await withDir(async (dir) => {
    const root = join(dir, "tree");
    await writeTree(root, TREE);
    await Deno.symlink(join(root, "README.md"), join(root, "hooks", "link.py"));
    await rejectsKlbr(
      () => snapshotTree(root),
      "release_invalid",
      `cannot snapshot tree ${root}: hooks/link.py is a symlink (got hooks/link.py)`,
    );
    await Deno.remove(join(root, "hooks", "link.py"));
    await Deno.symlink(dir, join(root, "dirlink"));
    await rejectsKlbr(() => snapshotTree(root), "release_invalid", /dirlink is a symlink/);
    await Deno.symlink(root, join(dir, "rootlink"));
    await rejectsKlbr(
      () => snapshotTree(join(dir, "rootlink")),
      "release_invalid",
      /the root is a symlink/,
    );
  });
});

Deno.test("`snapshotTree()` refuses a missing directory, a file and a tree over its limits", async () => {
  await withDir(async (dir) => {
    await rejectsKlbr(
      () => snapshotTree(join(dir, "absent")),
      "not_found",
      `cannot snapshot tree: no such directory (got ${join(dir, "absent")})`,
    );
    await writeTree(dir, { "f.txt": "12345" });
    await rejectsKlbr(() => snapshotTree(join(dir, "f.txt")), "release_invalid", /not a directory/);
    await rejectsKlbr(
      () => snapshotTree(dir, { maxBytes: 4 }),
      "release_invalid",
      /more than 4 bytes/,
    );
    await writeTree(dir, { "g.txt": "1" });
    await rejectsKlbr(
      () => snapshotTree(dir, { maxEntries: 1 }),
      "release_invalid",
      /more than 1 entries/,
    );
  });
});

Deno.test("`publishRelease()` writes a release once and records it", async () => {
  await withStore(async (store, dir) => {
    const source = join(dir, "behavior");
    const releasesDir = join(dir, "releases");
    await writeTree(source, TREE);
    const expected = await snapshotTree(source);
    const published = await publishRelease(store, { sourceDir: source, releasesDir });
    assert.equal(published.id, expected.id);
    assert.equal(published.created, true);
    assert.equal(published.path, join(releasesDir, expected.id));
    assert.deepEqual(listDir(releasesDir), [expected.id], "no temp directory is left");
    assert.equal(Deno.statSync(join(published.path, "run.sh")).mode! & 0o777, 0o755);
    assert.equal(Deno.readTextFileSync(join(published.path, "hooks/model.py")), "ROUTE = 'a'\n");
    assert.deepEqual((await verifyRelease(published.path)).files, expected.files);
    const row = getRelease(store, expected.id)!;
    assert.deepEqual([row.path, row.fileCount, row.byteCount], [published.path, 4, 66]);
    // Publishing again verifies the existing copy instead of rewriting it.
    const mtime = Deno.statSync(join(published.path, "README.md")).mtime?.getTime();
    const again = await publishRelease(store, { sourceDir: source, releasesDir });
    assert.deepEqual([again.id, again.created], [expected.id, false]);
    assert.equal(Deno.statSync(join(published.path, "README.md")).mtime?.getTime(), mtime);
    assert.deepEqual(listDir(releasesDir), [expected.id]);
    assert.equal(count(store, "SELECT COUNT(*) AS n FROM releases"), 1);
  });
});

Deno.test("`publishRelease()` sets a tampered release directory aside and installs a good copy", async () => {
  await withStore(async (store, dir) => {
    const source = join(dir, "behavior");
    const releasesDir = join(dir, "releases");
    await writeTree(source, TREE);
    const { path, id } = await publishRelease(store, { sourceDir: source, releasesDir });
    await Deno.writeTextFile(join(path, "README.md"), "tampered\n");
    // The source is authoritative for its own id: the damaged copy is kept for diagnosis.
    const again = await publishRelease(store, { sourceDir: source, releasesDir });
    assert.equal(again.id, id);
    assert.equal(again.created, true);
    await verifyRelease(path);
    const names = listDir(releasesDir);
    assert.equal(names.length, 2);
    assert.ok(names.includes(id));
    assert.ok(names.some((n) => n.startsWith(`.broken-${id}-`)));
  });
});

Deno.test("`publishRelease()` leaves nothing behind when the source holds a symlink", async () => {
  await withStore(async (store, dir) => {
    const source = join(dir, "behavior");
    const releasesDir = join(dir, "releases");
    await writeTree(source, TREE);
    await Deno.symlink("/etc/passwd", join(source, "hooks", "secret"));
    await rejectsKlbr(
      () => publishRelease(store, { sourceDir: source, releasesDir }),
      "release_invalid",
      /hooks\/secret is a symlink/,
    );
    assert.deepEqual(listDir(releasesDir), []);
    assert.equal(count(store, "SELECT COUNT(*) AS n FROM releases"), 0);
  });
});

Deno.test("`verifyRelease()` refuses a changed file, a missing release and a name that is no hash", async () => {
  await withStore(async (store, dir) => {
    const source = join(dir, "behavior");
    await writeTree(source, TREE);
    const { path, id } = await publishRelease(store, {
      sourceDir: source,
      releasesDir: join(dir, "r"),
    });
    await Deno.chmod(join(path, "README.md"), 0o755);
    await rejectsKlbr(() => verifyRelease(path), "release_invalid", /its content hashes to/);
    await Deno.chmod(join(path, "README.md"), 0o644);
    await verifyRelease(path);
    await rejectsKlbr(
      () => verifyRelease(join(dir, "r", "f".repeat(64))),
      "release_invalid",
      `cannot verify release ffffffffffff: it does not exist (got ${
        join(dir, "r", "f".repeat(64))
      })`,
    );
    await rejectsKlbr(
      () => verifyRelease(source),
      "release_invalid",
      `cannot verify release: its directory name is not a sha256 id (got ${source})`,
    );
    assert.ok(id);
  });
});
