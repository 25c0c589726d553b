/**
 * Artifacts: content-addressed files in `<state>/artifacts/`, complete or absent. Two kinds
 * share the one id space and the one reader:
 *
 * - spooled outputs, `artifacts/<id>`: a cell's output too long to keep in a record is written
 *   here whole and the record keeps an excerpt and the id, so nothing a cell printed is
 *   discarded and no record is huge. The directory's total is bounded by evicting the oldest.
 * - kept attachments, `artifacts/kept/<id>`: a file an input carries (the page's composer, a
 *   Discord message). It is part of the input, so it is never evicted, and its directory entry
 *   is fsynced before its writer returns: written before the input is admitted, it is as
 *   durable as the input.
 *
 * @module
 */

import { join } from "node:path";
import { faultPoint, KlbrError } from "../../runtime/core/mod.ts";
import { ifExists, pathExists, syncPath } from "./files.ts";

/** What {@linkcode spoolArtifact} returns. */
export interface ArtifactRef {
  /** The sha256 of the bytes, hex; also the file name. */
  id: string;
  /** The artifact's size in bytes. */
  bytes: number;
}

const ARTIFACT_ID = /^[0-9a-f]{64}$/;
/** The folder of kept attachments, under `artifacts/`. */
const KEPT = "kept";

/** Largest total the artifacts directory keeps before it evicts the oldest: 256 MiB. */
export const DEFAULT_ARTIFACT_BUDGET_BYTES = 256 * 1024 * 1024;

/**
 * Writes `data` as an artifact and returns its id; writing the same bytes twice is one file.
 *
 * On return the artifact is complete on disk (temp file, fsync, rename), or absent when this
 * throws (a failed write removes its temp file). Then the oldest artifacts are evicted until the directory fits `budgetBytes`; the
 * new one is never evicted, and bytes spooled before count as new again. Proven by
 * "`spoolArtifact()` writes once and evicts the oldest" and "`spoolArtifact()` of bytes spooled
 * before makes them the newest: the oldest evicted is another".
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
  const ref = await writeArtifact(dir, data);
  await evictOldest(dir, budgetBytes, ref.id);
  return ref;
}

/**
 * Writes `data` as a kept attachment and returns its id; the same bytes twice are one file.
 *
 * On return the file and its directory entry are fsynced, so an input admitted afterwards
 * that names it never outlives it; it is never evicted. Proven by "`keepAttachment()` is never
 * evicted and reads like any artifact".
 *
 * @throws what the write throws (a full disk): then nothing is left behind.
 * @example
 * ```ts
 * const ref = await keepAttachment(stateDir, await file.bytes());
 * ```
 */
export async function keepAttachment(stateDir: string, data: Uint8Array): Promise<ArtifactRef> {
  const dir = join(stateDir, "artifacts", KEPT);
  const ref = await writeArtifact(dir, data);
  await syncPath(dir);
  return ref;
}

/**
 * The size of kept attachment `id`, or `undefined` when there is none: admission checks every
 * attachment an input names with it (synchronously, inside its transaction).
 *
 * @example
 * ```ts
 * if (keptAttachmentSize(stateDir, id) === undefined) throw new KlbrError("not_found", "…");
 * ```
 */
export function keptAttachmentSize(stateDir: string, id: string): number | undefined {
  if (!ARTIFACT_ID.test(id)) return undefined;
  const info = ifExists(() => Deno.statSync(join(stateDir, "artifacts", KEPT, id)));
  return info?.isFile ? info.size : undefined;
}

/**
 * Every kept attachment's id (`artifacts/kept/`), sorted: a backup copies them all, since each
 * is part of an input.
 *
 * @example
 * ```ts
 * for (const id of await keptAttachmentIds(stateDir)) console.log(id);
 * ```
 */
export async function keptAttachmentIds(stateDir: string): Promise<string[]> {
  const ids: string[] = [];
  try {
    for await (const entry of Deno.readDir(join(stateDir, "artifacts", KEPT))) {
      if (entry.isFile && ARTIFACT_ID.test(entry.name)) ids.push(entry.name);
    }
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
  return ids.sort();
}

/**
 * The path of artifact `id` under `stateDir` relative to it (`artifacts/<id>` for a spooled
 * output, `artifacts/kept/<id>` for an attachment), or `undefined` when there is none.
 *
 * @example
 * ```ts
 * const at = await artifactPath(stateDir, id); // "artifacts/kept/3fa2…"
 * ```
 */
export async function artifactPath(stateDir: string, id: string): Promise<string | undefined> {
  if (!ARTIFACT_ID.test(id)) return undefined;
  for (const path of placesOf(id)) {
    if (await pathExists(join(stateDir, path))) return path;
  }
  return undefined;
}

/** Where artifact `id` may be, relative to the state directory: spooled, then kept. */
function placesOf(id: string): string[] {
  return [join("artifacts", id), join("artifacts", KEPT, id)];
}

/** Opens artifact `id` for reading wherever it is, or `undefined` when it is in neither place. */
async function openArtifact(stateDir: string, id: string): Promise<Deno.FsFile | undefined> {
  for (const path of placesOf(id)) {
    try {
      return await Deno.open(join(stateDir, path), { read: true });
    } catch (error) {
      if (!(error instanceof Deno.errors.NotFound)) throw error;
    }
  }
  return undefined;
}

/**
 * Writes `data` into `dir` under its sha256 (temp file, fsync, rename) unless it is there; one
 * that is there is marked as written now, since eviction takes the oldest first.
 */
async function writeArtifact(dir: string, data: Uint8Array): Promise<ArtifactRef> {
  await Deno.mkdir(dir, { recursive: true });
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", data as BufferSource));
  const id = Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("");
  const path = join(dir, id);
  if (!(await touched(path))) {
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
  return { id, bytes: data.length };
}

/** Sets the modification time of the file at `path` to now; `false` when there is none. */
async function touched(path: string): Promise<boolean> {
  const now = new Date();
  try {
    await Deno.utime(path, now, now);
    return true;
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return false;
    throw error;
  }
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
  const file = await openArtifact(stateDir, id);
  if (file === undefined) {
    throw new KlbrError(
      "not_found",
      `cannot read artifact ${id.slice(0, 12)}: it does not exist or was evicted`,
    );
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
