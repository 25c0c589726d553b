/**
 * The model configuration: `llm` routes read from a KDL file and validated by zod.
 *
 * Three routes exist, one per role: `main` runs the agent's turns, `fast` runs policy hooks
 * and other cheap calls, `long` runs compaction. Prompt caching is a route property, declared
 * with `cache_profile` and never guessed. See `docs/configuration.md`.
 *
 * @module
 */

import { z } from "zod";
import { readKdlRoutes, ROUTE_NAMES, type RouteName } from "./_kdl.ts";
import { KlbrError } from "../core/mod.ts";
import { BudgetSchema, CleanupSchema } from "./_settings.ts";
import { LanesSchema, SandboxSchema, WorkspaceSchema } from "./_blocks.ts";
import { BackupSchema } from "./_backup.ts";
import { type FieldNames, locateIssue } from "./_config_issues.ts";
import { Secret } from "./_secret.ts";
import { expected, failAt, type RawBlock, timeoutMs, url } from "./_fields.ts";
import { roleOrder, switchFields } from "./_switches.ts";

/** The cache profiles a route may declare; each names the cache fields that route accepts. */
export const CACHE_PROFILES = [
  "openai_prompt_cache_key",
  "openai_prompt_cache_retention",
  "openai_prompt_cache_options",
] as const;

/** Which `cache_retention` values each profile accepts (checked at parse time). */
const RETENTION_BY_PROFILE: Record<typeof CACHE_PROFILES[number], readonly string[]> = {
  openai_prompt_cache_key: [],
  openai_prompt_cache_retention: ["in_memory", "24h"],
  openai_prompt_cache_options: ["in_memory", "24h", "30m"],
};

/** The smallest `context_tokens` a route may declare. */
const MIN_CONTEXT_TOKENS = 2048;

/** The fields of one route; every default of the model configuration lives here. */
function routeFields(defaultUrl: string) {
  return z.strictObject({
    url: url("http").default(defaultUrl),
    model: z.string(expected("a model name")).min(1, expected("a model name")).default("default"),
    api_key_env: z.string(expected("an environment variable name"))
      .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, expected("an environment variable name")).optional(),
    api_key: z.string(expected("a key")).min(1, expected("a key"))
      .transform((key) => new Secret(key)).optional(),
    cache_profile: z.enum(CACHE_PROFILES, expected(CACHE_PROFILES.join(", "))).optional(),
    cache_affinity: z.string(expected("a stable cache key")).min(1, expected("a stable cache key"))
      .optional(),
    cache_retention: z.enum(["in_memory", "24h", "30m"], expected("in_memory, 24h or 30m"))
      .optional(),
    timeout_ms: timeoutMs().default(600_000),
    idle_timeout_ms: timeoutMs().default(120_000),
    extra_options: z.record(z.string(), z.json()).default({}),
    /** The largest request on this route, in the provider's tokens; none passes it. */
    context_tokens: z.int(expected("a whole number of tokens"))
      .min(MIN_CONTEXT_TOKENS, expected(`at least ${MIN_CONTEXT_TOKENS} tokens`))
      .max(10_000_000, expected("at most 10000000")).default(32_768),
    /** The fraction of `context_tokens` past which the next request compacts first. */
    compact_at: z.number(expected("a fraction")).min(0.2, expected("a fraction of 0.2-0.95"))
      .max(0.95, expected("a fraction of 0.2-0.95")).default(0.75),
    /** The fraction of `context_tokens` a summary stays under. */
    summary_share: z.number(expected("a fraction")).min(0.02, expected("a fraction of 0.02-0.3"))
      .max(0.3, expected("a fraction of 0.02-0.3")).default(0.1),
    ...switchFields(),
  });
}

/** Rules that tie fields together: the cache profile and the key source. */
function checkRoute(route: z.output<ReturnType<typeof routeFields>>, ctx: z.RefinementCtx): void {
  const profile = route.cache_profile;
  const retention = route.cache_retention;
  if (retention !== undefined) {
    const accepting = CACHE_PROFILES.filter((p) => RETENTION_BY_PROFILE[p].includes(retention));
    if (profile === undefined || !accepting.includes(profile)) {
      ctx.addIssue({
        code: "custom",
        path: ["cache_retention"],
        message: `"${retention}" needs cache_profile ${accepting.join(" or ")} (got ${
          profile ?? "no cache_profile"
        })`,
      });
    }
  }
  if (route.cache_affinity !== undefined && profile === undefined) {
    ctx.addIssue({
      code: "custom",
      path: ["cache_affinity"],
      message: `needs a cache_profile to be sent (got no cache_profile)`,
    });
  }
  if (profile === "openai_prompt_cache_key" && route.cache_affinity === undefined) {
    ctx.addIssue({
      code: "custom",
      path: ["cache_profile"],
      message: `openai_prompt_cache_key needs cache_affinity (got no cache_affinity)`,
    });
  }
  // The budget's own ranges are checked by its fields; a value outside them was reported there.
  const inRange = route.context_tokens >= MIN_CONTEXT_TOKENS && route.compact_at <= 0.95 &&
    route.compact_at >= 0.2 && route.summary_share >= 0.02 && route.summary_share <= 0.3;
  if (inRange && route.summary_share >= route.compact_at / 2) {
    ctx.addIssue({
      code: "custom",
      path: ["summary_share"],
      message: `must be below half of compact_at, or a summary alone would trigger compaction ` +
        `(got ${route.summary_share} with compact_at ${route.compact_at})`,
    });
  }
  if (inRange && route.context_tokens * route.summary_share < 256) {
    ctx.addIssue({
      code: "custom",
      path: ["summary_share"],
      message:
        `leaves a summary under 256 tokens (got ${route.summary_share} of ${route.context_tokens})`,
    });
  }
  if (route.api_key !== undefined && route.api_key_env !== undefined) {
    ctx.addIssue({
      code: "custom",
      path: ["api_key"],
      message: `give api_key or api_key_env, not both (got both)`,
    });
  }
}

function routeSchema(name: RouteName, url: string) {
  return routeFields(url).superRefine(checkRoute)
    .transform((route) => ({ name, ...route, role_order: route.role_order ?? roleOrder(route) }))
    .prefault({});
}

/** The `discord` node: where the bot listens and speaks; every Discord default lives here. */
const DiscordSchema = z.strictObject({
  token_env: z.string(expected("an environment variable name"))
    .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, expected("an environment variable name")),
  channels: z.array(
    z.string(expected("a channel id string")).regex(/^[0-9]{1,20}$/, expected("a channel id")),
  ).min(1, expected("at least one channel id")),
  /** Direct messages to the bot are admitted from any DM channel; `#false` refuses them. */
  dms: z.boolean(expected("#true or #false")).default(true),
  api_url: url("http").default("https://discord.com/api/v10"),
  gateway_url: url("ws").default("wss://gateway.discord.gg"),
  /** How long one send may take before its outcome is recorded `unknown`. */
  send_timeout_ms: timeoutMs().default(15_000),
  /**
   * How long after a send's first request a re-post with the same nonce is trusted to return
   * the original message rather than post a second one. Discord enforces a nonce for "a few
   * minutes"; past this, reconciliation only looks for the nonce in the channel's messages.
   */
  nonce_window_ms: timeoutMs().max(600_000, expected("at most 600000 ms")).default(120_000),
  /** Attachments up to this size are fetched into artifacts; 0 fetches none. */
  attachment_max_bytes: z.int(expected("whole bytes")).min(0, expected("0 or more bytes"))
    .default(8 * 1024 * 1024),
  /** Messages a backfill admits per channel at most, after a refused resume. */
  backfill_max_messages: z.int(expected("a count")).min(1, expected("at least 1"))
    .default(1000),
});

/** The whole configuration; every default lives here. */
export const ConfigSchema = z.strictObject({
  routes: z.strictObject({
    main: routeSchema("main", "http://localhost:8001/v1"),
    fast: routeSchema("fast", "http://localhost:8002/v1"),
    long: routeSchema("long", "http://localhost:8003/v1"),
  }).prefault({}),
  discord: DiscordSchema.optional(),
  budget: BudgetSchema.prefault({}),
  cleanup: CleanupSchema.prefault({}),
  sandbox: SandboxSchema.prefault({}),
  workspace: WorkspaceSchema.prefault({}),
  lanes: LanesSchema.prefault({}),
  backup: BackupSchema.prefault({}),
});

/** The field names an "unknown field" error offers, per node. */
const FIELD_NAMES: FieldNames = {
  route: Object.keys(routeFields("").shape),
  discord: Object.keys(DiscordSchema.shape),
};

/** The validated model configuration. */
export type Config = z.output<typeof ConfigSchema>;
/** The validated `discord` node; absent when Discord is off. */
export type DiscordConfig = NonNullable<Config["discord"]>;
/** One validated route. Its `api_key`, when the file gives one, is a {@linkcode Secret}. */
export type Route = Config["routes"][RouteName];

/** Where a loaded configuration came from. */
export type ConfigSource = { kind: "file"; path: string } | { kind: "defaults" };

/** The result of loading a configuration: warnings are for the operator, never fatal. */
export interface LoadedConfig {
  /** The validated routes. */
  config: Config;
  /** One line per ignored setting, e.g. a cache field removed from `extra_options`. */
  warnings: string[];
  /** The file read, or `defaults` when there was none. */
  source: ConfigSource;
}

/** Options for {@linkcode parseConfig}. */
export interface ParseConfigOptions {
  /** The file name used in errors and warnings. */
  file: string;
  /** When given, every `api_key_env` must name a set variable here. */
  env?: Record<string, string | undefined>;
}

/** Options for {@linkcode loadConfig}. */
export interface LoadConfigOptions {
  /** The environment `api_key_env` is checked against, e.g. `Deno.env.toObject()`. */
  env: Record<string, string | undefined>;
}

/**
 * Parses and validates KDL configuration text.
 *
 * A role the text does not declare takes the declared `main` route's settings; with no
 * routes at all every role gets its own default endpoint.
 *
 * @throws {KlbrError} `invalid_config` naming the file, the line and the field, e.g.
 * `cannot load config /x/klbr.kdl:7: llm "main" cache_retention: "30m" needs cache_profile
 * openai_prompt_cache_options (got openai_prompt_cache_key)`.
 * @example
 * ```ts
 * const { config, warnings } = parseConfig('llm { url "http://127.0.0.1:9000/v1" }', { file: "x.kdl" });
 * ```
 */
export function parseConfig(
  text: string,
  options: ParseConfigOptions,
): Omit<LoadedConfig, "source"> {
  const { file, env } = options;
  const kdl = readKdlRoutes(text, file);
  // An undeclared role copies what main declares; main's own defaults are per role.
  const raw: Partial<Record<RouteName, RawBlock>> = {};
  for (const role of ROUTE_NAMES) raw[role] = kdl.routes[role] ?? kdl.routes.main;
  const { discord, sandbox, workspace, lanes } = kdl;
  const result = ConfigSchema.safeParse({
    routes: fieldsOf(raw),
    ...fieldsOf({ discord, ...kdl.settings, sandbox, workspace, lanes }),
  });
  if (!result.success) {
    // The first issue in file order: routes by role, then discord, then the other nodes.
    const located = result.error.issues.map((issue) => locateIssue(issue, kdl, raw, FIELD_NAMES))
      .sort((a, b) => a.order - b.order || a.line - b.line);
    return failAt(file, located[0].line, located[0].text);
  }
  if (env !== undefined) checkEnvNames(result.data, { raw, discord, file, env });
  return { config: result.data, warnings: kdl.warnings };
}

/** The raw fields of each declared node, by name. */
function fieldsOf(nodes: Record<string, RawBlock | undefined>): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(nodes).flatMap(([name, raw]) => raw === undefined ? [] : [[name, raw.fields]]),
  );
}

/** Refuses an `api_key_env` or `token_env` that names a variable the environment lacks. */
function checkEnvNames(
  config: Config,
  at: {
    raw: Partial<Record<RouteName, RawBlock>>;
    discord: RawBlock | undefined;
    file: string;
    env: Record<string, string | undefined>;
  },
): void {
  const { raw, discord, file, env } = at;
  for (const role of ROUTE_NAMES) {
    const name = config.routes[role].api_key_env;
    if (name !== undefined && !env[name]) {
      const line = raw[role]?.lines.get("api_key_env") ?? 1;
      failAt(
        file,
        line,
        `llm "${role}" api_key_env: environment variable is not set (got ${name})`,
      );
    }
  }
  const tokenEnv = config.discord?.token_env;
  if (tokenEnv !== undefined && !env[tokenEnv]) {
    failAt(
      file,
      discord?.lines.get("token_env") ?? 1,
      `discord token_env: environment variable is not set (got ${tokenEnv})`,
    );
  }
}

/**
 * Reads and validates the configuration file; `undefined` means "no file": the defaults.
 *
 * @throws {KlbrError} `invalid_config` when the file cannot be read, is not KDL, breaks a
 * rule, or names an unset `api_key_env`.
 * @example
 * ```ts
 * const { config, warnings } = await loadConfig(`${state}/klbr.kdl`, { env: Deno.env.toObject() });
 * ```
 */
export async function loadConfig(
  path: string | undefined,
  options: LoadConfigOptions,
): Promise<LoadedConfig> {
  if (path === undefined) {
    return { config: ConfigSchema.parse({}), warnings: [], source: { kind: "defaults" } };
  }
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (error) {
    const reason = error instanceof Deno.errors.NotFound
      ? "file not found"
      : error instanceof Deno.errors.IsADirectory
      ? "it is a directory; give the path of the .kdl file"
      : "file unreadable";
    throw new KlbrError("invalid_config", `cannot load config ${path}: ${reason} (got ${path})`, {
      cause: error,
    });
  }
  const parsed = parseConfig(text, { file: path, env: options.env });
  return { ...parsed, source: { kind: "file", path } };
}
