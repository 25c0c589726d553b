/**
 * Online backups of a state directory and their restore: `klbr backup <dir>` and
 * `klbr restore <dir>`, the daemon's scheduled backups and the one before a store migration.
 *
 * @module
 */

export { type BackupManifest, backupState } from "./_backup.ts";
export { type RestoreOptions, type RestoreReport, restoreState } from "./_restore.ts";
export {
  backupBeforeMigration,
  type BackupSchedule,
  type BackupScheduleOptions,
  startBackupSchedule,
} from "./_schedule.ts";
