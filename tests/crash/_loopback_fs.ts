/**
 * A small file system of its own for a test's state directory (a size-limited tmpfs), so a
 * disk really fills up; and filling it.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";

/** A mounted tmpfs of `sizeKb`; `unmount` removes the mount point too. */
export async function mountSmallFs(
  sizeKb: number,
): Promise<{ dir: string; remount(options: string): Promise<void>; unmount(): Promise<void> }> {
  const dir = await Deno.makeTempDir({ prefix: "klbr-fs-" });
  const run = async (args: string[]) => {
    const out = await new Deno.Command("mount", { args, stderr: "piped" }).output();
    assert.equal(out.code, 0, `mount ${args.join(" ")}: ${new TextDecoder().decode(out.stderr)}`);
  };
  await run(["-t", "tmpfs", "-o", `size=${sizeKb}k`, "tmpfs", dir]);
  return {
    dir,
    remount: (options) => run(["-o", `remount,${options}`, dir]),
    async unmount() {
      await new Deno.Command("umount", { args: [dir] }).output();
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    },
  };
}

/** Writes a ballast file into `dir` until the disk is full; returns its path. */
export async function fillDisk(dir: string): Promise<string> {
  const path = join(dir, "ballast");
  const file = await Deno.open(path, { write: true, create: true });
  const chunk = new Uint8Array(64 * 1024);
  try {
    for (let i = 0; i < 100_000; i++) {
      try {
        await file.write(chunk);
      } catch (error) {
        assert.match(String(error), /No space left on device/);
        return path;
      }
    }
  } finally {
    file.close();
  }
  throw new Error(`the disk at ${dir} never filled`);
}
