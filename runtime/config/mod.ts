/**
 * The KDL configuration: model routes, prompt-cache profiles, Discord; validated by zod,
 * with errors naming the file, the line and the field.
 *
 * @module
 */

export {
  type Config,
  defaultConfigText,
  type DiscordConfig,
  loadConfig,
  parseConfig,
  redactRoute,
  resolveApiKey,
  resolveDiscordToken,
  type Route,
  routeRequestFields,
  Secret,
} from "./_config.ts";
export type { ServeOptions } from "./_serve_options.ts";
