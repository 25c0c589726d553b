/**
 * `klbr backup <dir>`: a consistent copy of a state directory, taken while its daemon runs,
 * with the releases and artifacts the copied store refers to, verified before it is kept.
 *
 * A backup directory holds `runtime.sqlite` (the store, copied by SQLite's online backup in
 * one read transaction), `releases/<id>` for every release the store records, `artifacts/<id>` for
 * every artifact a cell result names that was still there, `artifacts/kept/<id>` for every
 * kept attachment (the files inputs carry), the managed `skills/`,
 * `config.kdl` and `operator.token` when present, and `backup.json`, its manifest. It is
 * written to a temporary sibling and renamed into place: complete or absent.
 *
 * @module
 */

import { pathExists } from "../../store/tables/files.ts";
import { artifactPath, keptAttachmentIds } from "../../store/tables/artifacts.ts";
import { basename, dirname, join } from "node:path";
import { z } from "zod";
import { copyStore, describeStoreCopy, type StoreCopy } from "../../store/maintenance/backup.ts";
import { verifyRelease } from "../../store/maintenance/snapshot_hash.ts";
import { STORE_FILE } from "../../store/store.ts";
import { KlbrError } from "../core/mod.ts";
import { copyFileSynced, copyTree, diskRefusal, fileSha256, isEmptyOrAbsent } from "./_files.ts";

/** The manifest a backup carries, `backup.json`. */
export const BackupManifest = z.object({
  format: z.literal("klbr-backup"),
  version: z.literal(1),
  created_at: z.string(),
  source: z.string(),
  schema_version: z.number().int(),
  inputs: z.number().int(),
  sessions: z.array(z.object({ id: z.string(), head_seq: z.number().int() })),
  releases: z.array(z.string()),
  /** Artifacts copied, by id (= their sha256). */
  artifacts: z.array(z.string()),
  /** Artifacts a cell names that the state directory no longer had (evicted by the budget). */
  artifacts_missing: z.array(z.string()),
});

/** A backup's manifest. */
export type BackupManifest = z.infer<typeof BackupManifest>;

const EXTRA_FILES = ["config.kdl", "operator.token"];

/**
 * Backs `stateDir` up into `target`, which must be absent or empty, while its daemon runs.
 *
 * On return `target` holds a verified backup (see {@linkcode verifyBackup}); otherwise it is as
 * it was. Proven by "window backup: a backup taken during a burst restores every input
 * acknowledged before it began" in `tests/crash/backup_restore.test.ts`.
 *
 * @throws {KlbrError} `invalid_input` for a target that holds something or is a file;
 *   `state_missing` for a state directory without a store; `release_invalid`/`store_corrupt`
 *   when the copy does not verify; `state_unusable` for a target on a full or read-only disk
 *   ("window backup-disk-full" in `tests/crash/backup_restore.test.ts`).
 * @example
 * ```ts
 * const manifest = await backupState(".klbr", "/backups/klbr-2024-06-01");
 * ```
 */
export async function backupState(stateDir: string, target: string): Promise<BackupManifest> {
  if (!(await isEmptyOrAbsent(target))) {
    throw new KlbrError(
      "invalid_input",
      `cannot back up: ${target} is not an empty directory; give a new or empty one (got ${target})`,
    );
  }
  const store = join(stateDir, STORE_FILE);
  if (!(await pathExists(store))) {
    throw new KlbrError(
      "state_missing",
      `cannot back up: there is no store in ${stateDir} (got ${store})`,
    );
  }
  const temp = join(dirname(target), `.${basename(target)}.tmp-${crypto.randomUUID()}`);
  try {
    await Deno.mkdir(temp, { recursive: true });
    await copyStore(store, join(temp, STORE_FILE));
    const copy = describeStoreCopy(join(temp, STORE_FILE));
    requireIntact(copy, temp);
    for (const id of copy.releases) {
      await copyTree(join(stateDir, "releases", id), join(temp, "releases", id));
    }
    const ids = [...copy.artifacts, ...await keptAttachmentIds(stateDir)];
    const { copied, missing } = await copyArtifacts(stateDir, temp, ids);
    if (await pathExists(join(stateDir, "skills"))) {
      await copyTree(join(stateDir, "skills"), join(temp, "skills"));
    }
    for (const name of EXTRA_FILES) {
      if (await pathExists(join(stateDir, name))) {
        await copyFileSynced(join(stateDir, name), join(temp, name));
      }
    }
    const manifest = manifestOf(stateDir, copy, copied, missing);
    await Deno.writeTextFile(join(temp, "backup.json"), JSON.stringify(manifest, null, 2) + "\n");
    await verifyBackup(temp);
    await Deno.remove(target).catch(() => {});
    await Deno.rename(temp, target);
    return manifest;
  } catch (error) {
    await Deno.remove(temp, { recursive: true }).catch(() => {});
    throw diskRefusal("back up into", target, error) ?? error;
  }
}

/**
 * Checks a backup: its manifest, the store copy's integrity, every release re-hashed against
 * its id, every artifact's sha256 against its id.
 *
 * @throws {KlbrError} `invalid_input` for a directory that is not a backup; `store_corrupt`
 *   when the store copy cannot be read or fails its integrity check; `release_invalid` for a
 *   release or an artifact that does not match its id. Proven by "window backup-damaged" in
 *   `tests/crash/backup_restore.test.ts`.
 */
export async function verifyBackup(dir: string): Promise<BackupManifest> {
  let manifest: BackupManifest;
  try {
    manifest = BackupManifest.parse(JSON.parse(await Deno.readTextFile(join(dir, "backup.json"))));
  } catch (cause) {
    throw new KlbrError(
      "invalid_input",
      `cannot use backup ${dir}: it has no valid backup.json (got ${cause})`,
      { cause },
    );
  }
  const copy = readStoreCopy(dir);
  requireIntact(copy, dir);
  for (const id of copy.releases) {
    const snapshot = await verifyRelease(join(dir, "releases", id));
    if (snapshot.id !== id) {
      throw new KlbrError(
        "release_invalid",
        `cannot use backup ${dir}: release ${id.slice(0, 12)} does not verify`,
      );
    }
  }
  for (const id of manifest.artifacts) {
    const path = await artifactPath(dir, id) ?? join("artifacts", id);
    const found = await fileSha256(join(dir, path)).catch(() => "absent");
    if (found !== id) {
      throw new KlbrError(
        "release_invalid",
        `cannot use backup ${dir}: artifact ${id.slice(0, 12)} does not match its hash (got ${
          found.slice(0, 12)
        })`,
      );
    }
  }
  return manifest;
}

/** What a person does about a backup whose store copy is damaged. */
const DAMAGED = "the backup is damaged: restore another one, or take a new one with `klbr backup`";

/**
 * Reads a backup's store copy. SQLite's own error for a file it cannot read (not a database,
 * cut short, absent) becomes a `store_corrupt` naming the backup and what to do, so `klbr
 * restore` prints one line instead of a stack trace.
 *
 * @throws {KlbrError} `store_corrupt` for a copy SQLite cannot read; `foreign_store` for one
 *   that is not a klbr store.
 */
function readStoreCopy(dir: string): StoreCopy {
  try {
    return describeStoreCopy(join(dir, STORE_FILE));
  } catch (cause) {
    if (cause instanceof KlbrError) throw cause;
    const message = cause instanceof Error ? cause.message : String(cause);
    throw new KlbrError(
      "store_corrupt",
      `cannot use backup ${dir}: its store copy cannot be read (got ${message}); ${DAMAGED}`,
      { cause },
    );
  }
}

function requireIntact(copy: StoreCopy, dir: string): void {
  if (copy.integrity.join() !== "ok") {
    throw new KlbrError(
      "store_corrupt",
      `cannot use backup ${dir}: the store copy fails its integrity check (got ${
        copy.integrity.slice(0, 3).join("; ")
      }); ${DAMAGED}`,
    );
  }
}

async function copyArtifacts(
  stateDir: string,
  temp: string,
  ids: string[],
): Promise<{ copied: string[]; missing: string[] }> {
  const copied: string[] = [];
  const missing: string[] = [];
  for (const id of new Set(ids)) {
    const path = await artifactPath(stateDir, id);
    if (path === undefined) {
      missing.push(id);
      continue;
    }
    await Deno.mkdir(dirname(join(temp, path)), { recursive: true });
    await copyFileSynced(join(stateDir, path), join(temp, path));
    copied.push(id);
  }
  return { copied, missing };
}

function manifestOf(
  stateDir: string,
  copy: StoreCopy,
  copied: string[],
  missing: string[],
): BackupManifest {
  return {
    format: "klbr-backup",
    version: 1,
    created_at: new Date().toISOString(),
    source: stateDir,
    schema_version: copy.schemaVersion,
    inputs: copy.inputs,
    sessions: copy.sessions.map((s) => ({ id: s.id, head_seq: s.headSeq })),
    releases: copy.releases,
    artifacts: copied,
    artifacts_missing: missing,
  };
}
