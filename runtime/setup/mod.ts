/**
 * What runs before and around the daemon without loading it: the state directory and
 * `init`, `doctor`, the `serve` launcher and its derived permissions, the UI build and the
 * example.
 *
 * @module
 */

export { type DoctorOptions, runDoctor } from "./_doctor.ts";
export { doctorNetwork, launchDoctor, type LaunchDoctorOptions } from "./_doctor_launcher.ts";
export { runExample } from "./_example.ts";
export { describeInit, type DescribeInitOptions, shellWord } from "./_first_steps.ts";
export { daemonArgs, derivePermissionInput, launchDaemon } from "./_launcher.ts";
export { encodeHandoff, readHandoff } from "./_handoff.ts";
export { REPO_ROOT } from "./_repo_root.ts";
export { daemonEnv, parseRunPrograms, servePermissionFlags } from "./_serve_permissions.ts";
export {
  CONFIG_FILE,
  initStateDir,
  loadStateConfig,
  resolveConfigPath,
  resolveStateDir,
} from "./_state_dir.ts";
export { ensureUiBuilt, UI_OUTPUTS, uiIsStale } from "./_ui_build.ts";
