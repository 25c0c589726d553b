/**
 * The KDL configuration: model routes, prompt-cache profiles, Discord; validated by zod,
 * with errors naming the file, the line and the field.
 *
 * @module
 */

export {
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
