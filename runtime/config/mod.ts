/**
 * The KDL configuration: model routes, prompt-cache profiles, Discord, the budgets of unattended
 * work, the cleanup policy, the sandbox and the lanes' bounds; validated by zod,
 * with errors naming the file, the line and the field.
 *
 * @module
 */

export { type Config, type DiscordConfig, loadConfig, parseConfig, type Route } from "./_config.ts";
export { Secret } from "./_secret.ts";
export { defaultConfigText } from "./_default_text.ts";
export type { BudgetConfig, CleanupConfig } from "./_settings.ts";
export type { BackupConfig } from "./_backup.ts";
export { redactRoute, resolveApiKey, resolveDiscordToken, routeRequestFields } from "./_resolve.ts";
export type { ServeOptions } from "./_serve_options.ts";
