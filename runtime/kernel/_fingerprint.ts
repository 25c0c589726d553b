/**
 * Fingerprints of process roles: what a worker process loaded (its interpreter and the
 * workbench package, by content), with the skill set and release it was given.
 *
 * Every role that runs `python -m klbr` — the workbench, the hook worker, a job worker —
 * reports its interpreter and package fingerprint in its `init` reply (`klbr.fingerprint`),
 * and a fresh one on a `fingerprint` request. A difference between the two in a shared
 * dependency (the interpreter file, the package) means the process runs code that is no
 * longer on disk; the owner of the role replaces it at its next boundary.
 *
 * @module
 */

import { join } from "node:path";
import { z } from "zod";

/** The roles a `python -m klbr` process plays. */
export const ProcessRole = z.enum(["workbench", "hooks", "job"]);
/** A process role. */
export type ProcessRole = z.infer<typeof ProcessRole>;

/** What a worker reports about its interpreter and package. */
export const WorkerFingerprint = z.object({
  /** The real path of `sys.executable`. */
  executable: z.string(),
  /** The interpreter's version, e.g. `3.11.7`. */
  version: z.string(),
  /** `<inode>:<size>:<mtime_ns>` of the interpreter file; a reinstall changes it. */
  interpreter: z.string(),
  /** sha256 of the package's `*.py` files ({@linkcode packageHash}). */
  package: z.string().regex(/^[0-9a-f]{64}$/),
});
/** A worker's interpreter and package fingerprint. */
export type WorkerFingerprint = z.infer<typeof WorkerFingerprint>;

/** The `ok.result` of a `fingerprint` request. */
export const FingerprintReply = z.object({
  /** Taken when the process imported the package. */
  loaded: WorkerFingerprint,
  /** Taken now, from disk. */
  current: WorkerFingerprint,
});

/** The fingerprint of one running role: what it loaded and what it was given. */
export interface RoleFingerprint extends WorkerFingerprint {
  role: ProcessRole;
  /** The generation of this role's process (each role counts its own). */
  generation: number;
  pid: number;
  /** The revision of the skill set the process was given at `init`. */
  skills: string;
  /** The behaviour release it was given at `init`, or null. */
  release: string | null;
  /** When it was recorded, in ms. */
  loadedAt: number;
}

/**
 * Says which shared dependency differs between what a process loaded and what is on disk
 * now, or returns null when neither does. Only the interpreter and the package are shared:
 * a skills or release change never replaces a running process by itself.
 *
 * @example
 * ```ts
 * environmentChange(role, current); // "the workbench package changed (3fa2… → 9c01…)"
 * ```
 */
export function environmentChange(
  loaded: WorkerFingerprint,
  current: WorkerFingerprint,
): string | null {
  const short = (s: string) => s.length > 16 ? `${s.slice(0, 12)}…` : s;
  if (loaded.executable !== current.executable || loaded.interpreter !== current.interpreter) {
    return `the interpreter changed (${loaded.executable} ${
      short(loaded.interpreter)
    } → ${current.executable} ${short(current.interpreter)})`;
  }
  if (loaded.package !== current.package) {
    return `the workbench package changed (${short(loaded.package)} → ${short(current.package)})`;
  }
  return null;
}

const encoder = new TextEncoder();

function u64(n: number): Uint8Array {
  const bytes = new Uint8Array(8);
  new DataView(bytes.buffer).setBigUint64(0, BigInt(n));
  return bytes;
}

function compareBytes(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return a[i] - b[i];
  return a.length - b.length;
}

/**
 * The sha256 of the workbench package under `<repoRoot>/workbench/klbr`, computed exactly as
 * the worker's `klbr.fingerprint.package_hash` does: `klbr-package-v1\n`, then per `*.py`
 * file in bytewise order of its relative path, the path and the content, each as an 8-byte
 * big-endian length and the bytes; `__pycache__` is skipped.
 *
 * @throws {Deno.errors.NotFound} when the package directory does not exist.
 * @example
 * ```ts
 * const hash = await packageHash(REPO_ROOT); // "5d1e…" (64 hex digits)
 * ```
 */
export async function packageHash(repoRoot: string): Promise<string> {
  const root = join(repoRoot, "workbench", "klbr");
  const files: { key: Uint8Array; path: string }[] = [];
  const walk = async (rel: string) => {
    for await (const entry of Deno.readDir(join(root, rel))) {
      const child = rel === "" ? entry.name : `${rel}/${entry.name}`;
      if (entry.isDirectory && entry.name !== "__pycache__") await walk(child);
      else if (entry.isFile && entry.name.endsWith(".py")) {
        files.push({ key: encoder.encode(child), path: join(root, child) });
      }
    }
  };
  await walk("");
  files.sort((a, b) => compareBytes(a.key, b.key));
  // Loaded here, not with the module: serve's launcher loads this folder and hashes nothing.
  const { createHash } = await import("node:crypto");
  const hash = createHash("sha256").update(encoder.encode("klbr-package-v1\n"));
  for (const file of files) {
    const data = await Deno.readFile(file.path);
    hash.update(u64(file.key.length)).update(file.key).update(u64(data.length)).update(data);
  }
  return hash.digest("hex");
}
