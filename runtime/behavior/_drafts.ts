/**
 * Drafts on disk: `<state>/drafts/<id>/`, a writable copy of a release that never lives in
 * the workspace.
 *
 * @module
 */

import { join, normalize, relative, resolve } from "node:path";
import { z } from "zod";
import { snapshotTree } from "../../store/maintenance/snapshot_hash.ts";
import type { Store } from "../../store/store.ts";
import { type BehaviorRef, KlbrError } from "../core/mod.ts";

/** A draft id, `dr_…`. */
export const DraftId = z.string().regex(/^dr_[0-9A-HJKMNP-TV-Z]{26}$/, "expected a draft id");

/** A published release's id: the sha256 of its tree. */
export const ReleaseId = z.string().regex(/^[0-9a-f]{64}$/, "expected a release id");

/** The directory of draft `id` (which may not exist). */
export function draftDir(store: Store, id: string): string {
  return join(store.stateDir, "drafts", id);
}

/** Where a draft's last failed test is kept beside it, as JSON. */
export function draftDiagnosticsFile(store: Store, id: string): string {
  return join(store.stateDir, "drafts", `${id}.diagnostics.json`);
}

/** Returns the draft's directory. @throws {KlbrError} `not_found` when it does not exist. */
export async function requireDraft(store: Store, id: string): Promise<string> {
  const dir = draftDir(store, id);
  try {
    if ((await Deno.lstat(dir)).isDirectory) return dir;
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
  throw new KlbrError("not_found", `cannot use draft ${id}: it does not exist`);
}

/**
 * The draft as a tree to run, its revision `draft-<tree hash>`.
 *
 * @throws {KlbrError} `not_found` when it does not exist.
 */
export async function draftRef(store: Store, id: string): Promise<BehaviorRef> {
  const dir = await requireDraft(store, id);
  return { revision: `draft-${(await snapshotTree(dir)).id}`, path: dir };
}

/** Resolves a path inside a draft. @throws {KlbrError} `path_escape` for anything outside. */
export function draftFile(dir: string, path: string): string {
  const file = resolve(dir, normalize(path));
  const rel = relative(dir, file);
  if (
    path.startsWith("/") || rel === "" || rel.startsWith("..") ||
    rel.split("/").some((p) => p.startsWith("."))
  ) {
    throw new KlbrError(
      "path_escape",
      `cannot use draft path: it must be relative, inside the draft, without dot segments (got ${path})`,
    );
  }
  return file;
}

/** Copies a release tree into a new, writable draft directory. */
export async function copyTree(from: string, to: string): Promise<void> {
  await Deno.mkdir(to, { recursive: true });
  for await (const entry of Deno.readDir(from)) {
    const source = join(from, entry.name);
    const target = join(to, entry.name);
    if (entry.isDirectory) await copyTree(source, target);
    else if (entry.isFile) {
      await Deno.copyFile(source, target);
      await Deno.chmod(target, ((await Deno.stat(source)).mode ?? 0o644) | 0o600);
    }
  }
}
