// The clean-close mark against real SQLite files in a temp dir: the owner's clean close leaves
// a mark of the store file's identity; a large store whose mark still matches opens without its
// whole-file check; a write to the file after the close (here: a damaged page) breaks the mark
// and the damaged store is refused; opening removes the mark, so a crash leaves none; a small
// store is always checked, mark or not.

import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { join } from "node:path";
import { KlbrError } from "../../runtime/core/mod.ts";
import { ALWAYS_CHECK_BELOW_BYTES } from "../../store/_clean_close.ts";
import { openStore } from "../../store/store.ts";

const mark = (dir: string) => join(dir, "runtime.sqlite.clean");
const exists = (path: string) => {
  try {
    Deno.statSync(path);
    return true;
  } catch {
    return false;
  }
};

/** A klbr store in `dir`, padded past the always-check size when `large`, closed by its owner. */
function closedStore(dir: string, large: boolean): void {
  openStore(dir).close();
  if (large) {
    const db = new DatabaseSync(join(dir, "runtime.sqlite"));
    db.exec("CREATE TABLE pad (b BLOB)");
    db.prepare("INSERT INTO pad VALUES (zeroblob(?))").run(ALWAYS_CHECK_BELOW_BYTES + 1_000_000);
    db.close();
    openStore(dir).close(); // the owner's clean close after that write
  }
}

/** Overwrites the start of the inputs table's root page, as start-damaged-page does. */
function damage(dir: string): void {
  const path = join(dir, "runtime.sqlite");
  const db = new DatabaseSync(path, { readOnly: true });
  const { rootpage } = db.prepare("SELECT rootpage FROM sqlite_schema WHERE name = 'inputs'")
    .get() as { rootpage: number };
  const { page_size } = db.prepare("PRAGMA page_size").get() as { page_size: number };
  db.close();
  const file = Deno.openSync(path, { write: true });
  file.seekSync((rootpage - 1) * page_size, Deno.SeekMode.Start);
  file.writeSync(new Uint8Array(64).fill(0xff));
  file.close();
}

/** Writes a mark that matches the file as it is now (as if klbr had closed it like this). */
function forgeMark(dir: string): void {
  const info = Deno.statSync(join(dir, "runtime.sqlite"));
  Deno.writeTextFileSync(
    mark(dir),
    JSON.stringify({
      ino: info.ino ?? null,
      size: info.size,
      mtime: info.mtime?.getTime() ?? null,
      ctime: info.ctime?.getTime() ?? null,
    }),
  );
}

function refusedAsDamaged(dir: string): void {
  assert.throws(() => openStore(dir), (error) => {
    assert.ok(error instanceof KlbrError, String(error));
    assert.match(error.message, /damaged/);
    return true;
  });
}

Deno.test("an owner's clean close leaves a mark; opening removes it", async () => {
  const dir = await Deno.makeTempDir({ prefix: "klbr-clean-" });
  try {
    closedStore(dir, true);
    assert.ok(exists(mark(dir)), "a clean close leaves the mark");
    const store = openStore(dir);
    try {
      assert.ok(!exists(mark(dir)), "an open store has no mark: a crash leaves none");
    } finally {
      store.close();
    }
    assert.ok(exists(mark(dir)));
    openStore(dir, { owner: false }).close();
    assert.ok(exists(mark(dir)), "a reader neither removes nor writes the mark");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a large store damaged after its clean close is refused: the write broke the mark", async () => {
  const dir = await Deno.makeTempDir({ prefix: "klbr-clean-" });
  try {
    closedStore(dir, true);
    damage(dir);
    refusedAsDamaged(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a large store whose mark matches opens without the whole-file check", async () => {
  const dir = await Deno.makeTempDir({ prefix: "klbr-clean-" });
  try {
    closedStore(dir, true);
    damage(dir);
    // The damage is of a page no open reads: only quick_check would find it. A mark that
    // matches says nothing wrote the file since the owner closed it, so the check is skipped.
    forgeMark(dir);
    openStore(dir, { owner: false }).close();
    Deno.removeSync(mark(dir));
    refusedAsDamaged(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a small store is checked at every open, even with a matching mark", async () => {
  const dir = await Deno.makeTempDir({ prefix: "klbr-clean-" });
  try {
    closedStore(dir, false);
    damage(dir);
    forgeMark(dir);
    refusedAsDamaged(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
