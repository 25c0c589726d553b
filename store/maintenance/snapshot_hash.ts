/**
 * Content-addressed release trees: hashing a directory, publishing it once, verifying it.
 *
 * The id of a tree is the sha256 of an unambiguous encoding of its regular files: the magic
 * `klbr-tree-v1\n`, the file count as a u64, then per file, in bytewise order of their UTF-8
 * relative POSIX paths, three length-prefixed fields (u64 big-endian length, then the bytes):
 * the path, the mode as ASCII octal (`755` when any executable bit is set, else `644`; no other
 * mode bit is part of the identity) and the content. Empty directories carry no content and are
 * ignored. A symlink anywhere in the tree, or any entry that is neither a file nor a directory,
 * is refused rather than followed.
 *
 * @module
 */

import { createHash, type Hash } from "node:crypto";
import { basename, join } from "node:path";
import { KlbrError } from "../../runtime/core/mod.ts";
import { recordRelease } from "../tables/releases.ts";
import type { Store } from "../store.ts";
import { pathExists, syncPath } from "../tables/files.ts";

/** One file of a snapshot. */
export interface TreeFile {
  /** Relative POSIX path, e.g. `hooks/attention.py`. */
  path: string;
  /** `0o755` when any executable bit is set, else `0o644`. */
  mode: 0o755 | 0o644;
  size: number;
}

/** A hashed tree: its id and its files in hashing order. */
export interface TreeSnapshot {
  /** sha256 hex of the encoding described in the module comment. */
  id: string;
  files: TreeFile[];
}

/** Limits on a tree, so a runaway directory cannot make hashing unbounded. */
export interface SnapshotLimits {
  /** At most this many files and directories. @default 10000 */
  maxEntries?: number;
  /** At most this many content bytes in all. @default 268435456 (256 MiB) */
  maxBytes?: number;
}

/** What {@linkcode publishRelease} takes besides the store. */
export interface PublishOptions extends SnapshotLimits {
  /** The tree to publish. */
  sourceDir: string;
  /** Where releases live: the release becomes `<releasesDir>/<id>`. */
  releasesDir: string;
  /**
   * The id the tree hashed to when it was tested: a tree that hashes to another (it changed
   * since) is refused and nothing is written.
   */
  expectedId?: string;
}

/** A release {@linkcode publishRelease} wrote or found. */
export interface PublishedRelease extends TreeSnapshot {
  /** `<releasesDir>/<id>`. */
  path: string;
  /** `false` when the release already existed and was verified instead of rewritten. */
  created: boolean;
}

const MAGIC = new TextEncoder().encode("klbr-tree-v1\n");
const encoder = new TextEncoder();

function u64(n: number): Uint8Array {
  const bytes = new Uint8Array(8);
  new DataView(bytes.buffer).setBigUint64(0, BigInt(n));
  return bytes;
}

function field(hash: Hash, bytes: Uint8Array): void {
  hash.update(u64(bytes.length));
  hash.update(bytes);
}

function compareBytes(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return a[i] - b[i];
  return a.length - b.length;
}

interface Entry extends TreeFile {
  absolute: string;
  key: Uint8Array;
}

function refuse(dir: string, reason: string, got: string): KlbrError {
  return new KlbrError("release_invalid", `cannot snapshot tree ${dir}: ${reason} (got ${got})`);
}

async function listFiles(root: string, limits: Required<SnapshotLimits>): Promise<Entry[]> {
  let info: Deno.FileInfo;
  try {
    info = await Deno.lstat(root);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) {
      throw new KlbrError("not_found", `cannot snapshot tree: no such directory (got ${root})`);
    }
    throw error;
  }
  if (info.isSymlink) throw refuse(root, "the root is a symlink", root);
  if (!info.isDirectory) throw refuse(root, "the root is not a directory", root);
  const files: Entry[] = [];
  const pending: string[] = [""];
  let entries = 0;
  while (pending.length > 0) {
    const relDir = pending.pop()!;
    for await (const entry of Deno.readDir(join(root, relDir))) {
      if (++entries > limits.maxEntries) {
        throw refuse(root, `more than ${limits.maxEntries} entries`, `${entries}`);
      }
      const rel = relDir === "" ? entry.name : `${relDir}/${entry.name}`;
      const absolute = join(root, rel);
      if (entry.isSymlink) throw refuse(root, `${rel} is a symlink`, rel);
      if (entry.isDirectory) {
        pending.push(rel);
        continue;
      }
      const stat = await Deno.lstat(absolute);
      if (!stat.isFile) throw refuse(root, `${rel} is not a regular file`, rel);
      const mode = ((stat.mode ?? 0) & 0o111) !== 0 ? 0o755 : 0o644;
      files.push({ path: rel, mode, size: stat.size, absolute, key: encoder.encode(rel) });
    }
  }
  return files.sort((a, b) => compareBytes(a.key, b.key));
}

/**
 * Hashes `root`, handing each file's bytes (exactly those hashed) to `onFile` in order.
 */
async function hashTree(
  root: string,
  limits: SnapshotLimits,
  onFile?: (file: TreeFile, bytes: Uint8Array) => Promise<void>,
): Promise<TreeSnapshot> {
  const bounded = { maxEntries: 10_000, maxBytes: 256 * 1024 * 1024, ...limits };
  const entries = await listFiles(root, bounded);
  const hash = createHash("sha256");
  hash.update(MAGIC);
  hash.update(u64(entries.length));
  const files: TreeFile[] = [];
  let total = 0;
  for (const entry of entries) {
    const bytes = await Deno.readFile(entry.absolute);
    total += bytes.length;
    if (total > bounded.maxBytes) {
      throw refuse(root, `more than ${bounded.maxBytes} bytes`, `${total} at ${entry.path}`);
    }
    field(hash, entry.key);
    field(hash, encoder.encode(entry.mode.toString(8)));
    field(hash, bytes);
    const file: TreeFile = { path: entry.path, mode: entry.mode, size: bytes.length };
    files.push(file);
    await onFile?.(file, bytes);
  }
  return { id: hash.digest("hex"), files };
}

/**
 * Hashes the regular files of `dir` (paths, modes, bytes) into a sha256 release id.
 *
 * The same tree always gives the same id; a changed byte, mode bit (executable or not) or name
 * gives another. Proven by "`snapshotTree()` gives another id for a changed byte, mode or name".
 *
 * @throws {KlbrError} `release_invalid` naming a symlink or special file, or when a limit is
 *   exceeded; `not_found` when `dir` does not exist.
 * @example
 * ```ts
 * const { id, files } = await snapshotTree("behavior");
 * ```
 */
export function snapshotTree(dir: string, limits: SnapshotLimits = {}): Promise<TreeSnapshot> {
  return hashTree(dir, limits);
}

async function removeQuietly(path: string): Promise<void> {
  await Deno.remove(path, { recursive: true }).catch(() => {});
}

/**
 * Re-hashes the release at `path` and checks it against its directory name.
 *
 * @throws {KlbrError} `release_invalid` when the name is not a sha256 id, the directory is
 *   missing, holds a symlink, or its content hashes to another id.
 */
export async function verifyRelease(
  path: string,
  limits: SnapshotLimits = {},
): Promise<TreeSnapshot> {
  const name = basename(path);
  if (!/^[0-9a-f]{64}$/.test(name)) {
    throw new KlbrError(
      "release_invalid",
      `cannot verify release: its directory name is not a sha256 id (got ${path})`,
    );
  }
  let snapshot: TreeSnapshot;
  try {
    snapshot = await hashTree(path, limits);
  } catch (error) {
    if (error instanceof KlbrError && error.code === "not_found") {
      throw new KlbrError(
        "release_invalid",
        `cannot verify release ${name.slice(0, 12)}: it does not exist (got ${path})`,
      );
    }
    throw error;
  }
  if (snapshot.id !== name) {
    throw new KlbrError(
      "release_invalid",
      `cannot verify release ${name.slice(0, 12)}: its content hashes to ${
        snapshot.id.slice(0, 12)
      } (got ${path})`,
    );
  }
  return snapshot;
}

/**
 * Publishes `sourceDir` as the immutable release `<releasesDir>/<sha256>` and records it.
 *
 * The files are copied, exactly as hashed, into a temp directory under `releasesDir`, fsynced
 * and renamed into place, then re-hashed. On return the release is complete, verified and
 * recorded; otherwise it is absent (a temp directory `.tmp-…` is never a release). An existing
 * release of the same id is verified instead of rewritten. Proven by "`publishRelease()` writes
 * a release once and records it".
 *
 * @throws {KlbrError} `release_invalid` for a symlink in the source, an exceeded limit, a tree
 *   that no longer hashes to `expectedId`, or an existing release directory that does not
 *   verify; `not_found` for a missing source.
 */
export async function publishRelease(
  store: Store,
  options: PublishOptions,
): Promise<PublishedRelease> {
  const { sourceDir, releasesDir, expectedId, ...limits } = options;
  await Deno.mkdir(releasesDir, { recursive: true });
  const temp = join(releasesDir, `.tmp-${crypto.randomUUID()}`);
  await Deno.mkdir(temp);
  const dirs = new Set<string>([temp]);
  let created = false;
  let target = "";
  try {
    const snapshot = await hashTree(sourceDir, limits, async (file, bytes) => {
      const absolute = join(temp, file.path);
      const parent = absolute.slice(0, absolute.lastIndexOf("/"));
      if (!dirs.has(parent)) {
        await Deno.mkdir(parent, { recursive: true });
        for (let d = parent; d.length > temp.length; d = d.slice(0, d.lastIndexOf("/"))) {
          dirs.add(d);
        }
      }
      await Deno.writeFile(absolute, bytes, { mode: file.mode, createNew: true });
      await Deno.chmod(absolute, file.mode);
      await syncPath(absolute);
    });
    if (expectedId !== undefined && snapshot.id !== expectedId) {
      throw new KlbrError(
        "release_invalid",
        `cannot publish ${sourceDir}: it changed after it was tested (tested ${
          expectedId.slice(0, 12)
        }, now ${snapshot.id.slice(0, 12)}); test it again`,
      );
    }
    target = join(releasesDir, snapshot.id);
    if (await pathExists(target) && !(await verifiesQuietly(target, limits))) {
      // A damaged copy of this very release: keep it aside for diagnosis, install a good one.
      await Deno.rename(target, join(releasesDir, `.broken-${snapshot.id}-${Date.now()}`));
    }
    if (!(await pathExists(target))) {
      for (const dir of [...dirs].sort((a, b) => b.length - a.length)) await syncPath(dir);
      try {
        await Deno.rename(temp, target);
        created = true;
      } catch (error) {
        // Another publisher renamed the same id first; its copy is verified below.
        if (!(await pathExists(target))) throw error;
      }
      await syncPath(releasesDir);
    }
    let verified: TreeSnapshot;
    try {
      verified = await verifyRelease(target, limits);
    } catch (error) {
      if (created) await removeQuietly(target);
      throw error;
    }
    const bytes = verified.files.reduce((sum, f) => sum + f.size, 0);
    recordRelease(store, {
      id: verified.id,
      path: target,
      fileCount: verified.files.length,
      byteCount: bytes,
    });
    return { ...verified, path: target, created };
  } finally {
    if (!created) await removeQuietly(temp);
  }
}

async function verifiesQuietly(path: string, limits: SnapshotLimits): Promise<boolean> {
  try {
    await verifyRelease(path, limits);
    return true;
  } catch (error) {
    if (error instanceof KlbrError) return false;
    throw error;
  }
}
