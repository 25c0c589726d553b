/**
 * Spooled large outputs: content-addressed files in `<state>/artifacts/`, complete or absent,
 * with the directory's total size bounded by evicting the oldest.
 *
 * A cell's output too long to keep in a record is written here whole, and the record keeps an
 * excerpt and the artifact id, so nothing a cell printed is discarded and no record is huge.
 *
 * @module
 */

import { join } from "node:path";
import { faultPoint, KlbrError } from "../../runtime/core/mod.ts";
import { pathExists } from "./files.ts";

/** What {@linkcode spoolArtifact} returns. */
export interface ArtifactRef {
  /** The sha256 of the bytes, hex; also the file name. */
  id: string;
  /** The artifact's size in bytes. */
  bytes: number;
}

const ARTIFACT_ID = /^[0-9a-f]{64}$/;

/** Largest total the artifacts directory keeps before it evicts the oldest: 256 MiB. */
export const DEFAULT_ARTIFACT_BUDGET_BYTES = 256 * 1024 * 1024;

/**
 * Writes `data` as an artifact and returns its id; writing the same bytes twice is one file.
 *
 * On return the artifact is complete on disk (temp file, fsync, rename), or absent when this
 * throws (a failed write removes its temp file). Then the oldest artifacts are evicted until the directory fits `budgetBytes`; the
 * new one is never evicted. Proven by "`spoolArtifact()` writes once and evicts the oldest".
 *
 * @example
 * ```ts
 * const ref = await spoolArtifact(stateDir, new TextEncoder().encode(stdout));
 * ```
 */
export async function spoolArtifact(
  stateDir: string,
  data: Uint8Array,
  budgetBytes: number = DEFAULT_ARTIFACT_BUDGET_BYTES,
): Promise<ArtifactRef> {
  const dir = join(stateDir, "artifacts");
  await Deno.mkdir(dir, { recursive: true });
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", data as BufferSource));
  const id = Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("");
  const path = join(dir, id);
  if (!(await pathExists(path))) {
    const temp = join(dir, `.tmp-${crypto.randomUUID()}`);
    const file = await Deno.open(temp, { write: true, createNew: true, mode: 0o600 });
    try {
      faultPoint("artifact-write", noSpace);
      let written = 0;
      while (written < data.length) written += await file.write(data.subarray(written));
      await file.sync();
    } catch (error) {
      file.close();
      await Deno.remove(temp).catch(() => {});
      throw error;
    }
    file.close();
    await Deno.rename(temp, path);
  }
  await evictOldest(dir, budgetBytes, id);
  return { id, bytes: data.length };
}

/**
 * Reads up to `length` bytes of an artifact from `offset`.
 *
 * @throws {KlbrError} `invalid_input` for a malformed id or range; `not_found` for an artifact
 * that was never written or has been evicted.
 */
export async function readArtifact(
  stateDir: string,
  id: string,
  range: { offset?: number; length?: number } = {},
): Promise<{ data: Uint8Array; bytes: number }> {
  if (!ARTIFACT_ID.test(id)) {
    throw new KlbrError(
      "invalid_input",
      `cannot read artifact: id must be 64 hex characters (got ${id})`,
    );
  }
  const { offset = 0, length = 65_536 } = range;
  if (
    !Number.isSafeInteger(offset) || offset < 0 || !Number.isSafeInteger(length) || length < 1 ||
    length > 1 << 24
  ) {
    throw new KlbrError(
      "invalid_input",
      `cannot read artifact ${
        id.slice(0, 12)
      }: offset must be >= 0 and length 1-16777216 (got ${offset}, ${length})`,
    );
  }
  let file: Deno.FsFile;
  try {
    file = await Deno.open(join(stateDir, "artifacts", id), { read: true });
  } catch (cause) {
    if (cause instanceof Deno.errors.NotFound) {
      throw new KlbrError(
        "not_found",
        `cannot read artifact ${id.slice(0, 12)}: it does not exist or was evicted`,
      );
    }
    throw cause;
  }
  try {
    const bytes = (await file.stat()).size;
    await file.seek(offset, Deno.SeekMode.Start);
    const buffer = new Uint8Array(Math.max(0, Math.min(length, bytes - offset)));
    let read = 0;
    while (read < buffer.length) {
      const n = await file.read(buffer.subarray(read));
      if (n === null) break;
      read += n;
    }
    return { data: buffer.subarray(0, read), bytes };
  } finally {
    file.close();
  }
}

async function evictOldest(dir: string, budgetBytes: number, keep: string): Promise<void> {
  const entries: { name: string; size: number; mtime: number }[] = [];
  for await (const entry of Deno.readDir(dir)) {
    if (!entry.isFile || !ARTIFACT_ID.test(entry.name)) continue;
    const info = await Deno.stat(join(dir, entry.name));
    entries.push({ name: entry.name, size: info.size, mtime: info.mtime?.getTime() ?? 0 });
  }
  let total = entries.reduce((sum, e) => sum + e.size, 0);
  entries.sort((a, b) => a.mtime - b.mtime || a.name.localeCompare(b.name));
  for (const entry of entries) {
    if (total <= budgetBytes) break;
    if (entry.name === keep) continue;
    await Deno.remove(join(dir, entry.name)).catch(() => {});
    total -= entry.size;
  }
}

/** The error a full disk gives a write, as the `artifact-write` fault point throws it. */
function noSpace(): Error {
  return new Error("No space left on device (os error 28) (injected at artifact-write)");
}
