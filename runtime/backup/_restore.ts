/**
 * `klbr restore <dir>`: a verified backup becomes a state directory, never over a live one.
 *
 * @module
 */

import { pathExists } from "../../store/tables/files.ts";
import { basename, dirname, join } from "node:path";
import { readOwnerLock } from "../../store/owner_lock.ts";
import { STORE_FILE } from "../../store/store.ts";
import { KlbrError } from "../core/mod.ts";
import { type BackupManifest, verifyBackup } from "./_backup.ts";
import { copyTree, diskRefusal, isEmptyOrAbsent } from "./_files.ts";

/** Options for {@linkcode restoreState}. */
export interface RestoreOptions {
  /** Move an existing (stopped) state directory aside instead of refusing it. */
  replace?: boolean;
}

/** What a restore did. */
export interface RestoreReport {
  manifest: BackupManifest;
  /** Where an existing state directory was moved, with `replace`. */
  movedAside: string | null;
}

/**
 * Restores the backup in `backupDir` into `stateDir`.
 *
 * The backup is verified first. A state directory whose owner lock is held (a daemon runs on
 * it) is always refused; one that holds anything is refused unless `replace` is set, and then
 * moved aside to `<stateDir>.replaced-<time>`, never deleted. The restored directory is written
 * to a temporary sibling and renamed into place: complete or absent. Proven by "window backup:
 * a backup taken during a burst restores every input acknowledged before it began".
 *
 * @throws {KlbrError} `owner_locked` for a live state directory; `invalid_input` for one that
 *   holds something without `replace`; `state_unusable` for one on a full or read-only disk
 *   ("window backup-disk-full"); whatever {@linkcode verifyBackup} throws.
 */
export async function restoreState(
  backupDir: string,
  stateDir: string,
  options: RestoreOptions = {},
): Promise<RestoreReport> {
  const manifest = await verifyBackup(backupDir);
  const owner = (await pathExists(stateDir)) ? readOwnerLock(stateDir) : undefined;
  if (owner?.alive) {
    throw new KlbrError(
      "owner_locked",
      `cannot restore into ${stateDir}: it is live, owned by pid ${owner.holder.pid}; stop that daemon first (kill -TERM ${owner.holder.pid} drains it; systemctl --user stop klbr when it runs as a service), then restore (got ${stateDir})`,
    );
  }
  let movedAside: string | null = null;
  if (!(await isEmptyOrAbsent(stateDir))) {
    if (!options.replace) {
      throw new KlbrError(
        "invalid_input",
        `cannot restore into ${stateDir}: it is not empty; pass --replace to move it aside first (got ${stateDir})`,
      );
    }
    movedAside = `${stateDir}.replaced-${new Date().toISOString().replaceAll(":", "-")}`;
  }
  const temp = join(dirname(stateDir), `.${basename(stateDir)}.restore-${crypto.randomUUID()}`);
  try {
    await copyTree(backupDir, temp);
    await Deno.remove(join(temp, "backup.json"));
    if (!(await pathExists(join(temp, STORE_FILE)))) throw new Error("the store copy is missing");
    for (const sub of ["releases", "drafts", "artifacts", "skills"]) {
      await Deno.mkdir(join(temp, sub), { recursive: true });
    }
    if (movedAside !== null) await Deno.rename(stateDir, movedAside);
    else await Deno.remove(stateDir).catch(() => {});
    await Deno.rename(temp, stateDir);
    return { manifest, movedAside };
  } catch (error) {
    await Deno.remove(temp, { recursive: true }).catch(() => {});
    throw diskRefusal("restore into", stateDir, error) ?? error;
  }
}
