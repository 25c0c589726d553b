/**
 * What a route and the Discord node resolve to when used: API keys and the bot token from the
 * environment (never printed), the cache fields a request carries, and a printable copy.
 *
 * @module
 */

import { KlbrError } from "../core/mod.ts";
import type { DiscordConfig, Route } from "./_config.ts";
import { Secret } from "./_secret.ts";

/**
 * Returns the Discord bot token from the `token_env` variable, wrapped so no printed form
 * shows it.
 *
 * @throws {KlbrError} `invalid_config` when the variable is not set or empty.
 * @example
 * ```ts
 * const token = resolveDiscordToken(config.discord, Deno.env.toObject()); // Secret
 * ```
 */
export function resolveDiscordToken(
  discord: DiscordConfig,
  env: Record<string, string | undefined>,
): Secret {
  const token = env[discord.token_env];
  if (!token) {
    throw new KlbrError(
      "invalid_config",
      `cannot resolve the discord token: environment variable is not set (got ${discord.token_env})`,
    );
  }
  return new Secret(token);
}

/**
 * Returns the cache fields a request on this route carries, from its declared profile only.
 *
 * `openai_prompt_cache_key` sends `prompt_cache_key`; `openai_prompt_cache_retention` adds
 * `prompt_cache_retention` (`in_memory` | `24h`); `openai_prompt_cache_options` sends `30m` as
 * `prompt_cache_options: {ttl: "30m"}` and the other retentions as `prompt_cache_retention`.
 * A route without a profile gets `{}`.
 */
export function routeRequestFields(route: Route): Record<string, unknown> {
  const fields: Record<string, unknown> = {};
  if (route.cache_profile === undefined) return fields;
  if (route.cache_affinity !== undefined) fields.prompt_cache_key = route.cache_affinity;
  const retention = route.cache_retention;
  if (retention === "30m") fields.prompt_cache_options = { ttl: "30m" };
  else if (retention !== undefined) fields.prompt_cache_retention = retention;
  return fields;
}

/** A route as it may be printed: the key is replaced by where it comes from. */
export type RedactedRoute = Omit<Route, "api_key" | "api_key_env"> & { api_key: string };

/**
 * Returns a printable copy of a route; the key itself never appears in it.
 *
 * @example
 * ```ts
 * console.log(redactRoute(config.routes.main).api_key); // "env OPENAI_API_KEY" | "file" | "none"
 * ```
 */
export function redactRoute(route: Route): RedactedRoute {
  const { api_key, api_key_env, ...rest } = route;
  const source = api_key_env !== undefined
    ? `env ${api_key_env}`
    : api_key !== undefined
    ? "file"
    : "none";
  return { ...structuredClone(rest), api_key: source };
}

/**
 * Returns the route's API key: from the file, else from its `api_key_env` variable, else none.
 *
 * @throws {KlbrError} `invalid_config` when `api_key_env` names a variable that is not set.
 */
export function resolveApiKey(
  route: Route,
  env: Record<string, string | undefined>,
): string | undefined {
  if (route.api_key !== undefined) return route.api_key.reveal();
  if (route.api_key_env === undefined) return undefined;
  const key = env[route.api_key_env];
  if (!key) {
    throw new KlbrError(
      "invalid_config",
      `cannot resolve api key for llm "${route.name}": environment variable is not set (got ${route.api_key_env})`,
    );
  }
  return key;
}
