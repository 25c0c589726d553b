/**
 * Online backups of a state directory and their restore: `klbr backup <dir>` and
 * `klbr restore <dir>`.
 *
 * @module
 */

export { type BackupManifest, backupState } from "./_backup.ts";
export { type RestoreOptions, type RestoreReport, restoreState } from "./_restore.ts";
