/**
 * The state directory: where it is and how `init` lays it out.
 *
 * ```
 * runtime.sqlite    the one store (WAL)
 * releases/<sha256> immutable published behaviour trees
 * drafts/           writable behaviour drafts
 * artifacts/        spooled large outputs
 * skills/           managed skills
 * operator.token    the operator token (0600)
 * session.key       the key session cookies are signed with (0600; written by serve)
 * config.kdl        the model configuration
 * ```
 *
 * @module
 */

import { isAbsolute, join, resolve } from "node:path";
import { defaultConfigText, loadConfig, parseConfig } from "../config/mod.ts";
import { pathExists } from "../../store/tables/files.ts";
import { later } from "./_later.ts";
import { stateFileError } from "../core/mod.ts";

/** The subdirectories `init` creates. */
export const STATE_SUBDIRS = ["releases", "drafts", "artifacts", "skills"] as const;

/** The configuration file `init` writes into the state directory. */
export const CONFIG_FILE = "config.kdl";

/**
 * An environment where every variable is set, to read the configuration without its key
 * check: an unset key variable is one of the problems doctor reports, by name.
 */
export const EVERY_VARIABLE_SET = new Proxy({}, { get: () => "set" }) as Record<string, string>;

/**
 * Resolves the state directory: the `--state` flag, then `KLBR_STATE_DIR`, then `./.klbr`.
 *
 * @example
 * ```ts
 * resolveStateDir(undefined); // "/home/me/klbr/.klbr"
 * ```
 */
export function resolveStateDir(flag: string | undefined): string {
  const chosen = flag ?? Deno.env.get("KLBR_STATE_DIR") ?? ".klbr";
  return isAbsolute(chosen) ? chosen : resolve(Deno.cwd(), chosen);
}

/** What {@linkcode initStateDir} did. */
export interface InitReport {
  /** Whether the store file did not exist before. */
  created: boolean;
  /** The state directory. */
  stateDir: string;
}

/**
 * Creates the state directory, its store, token and default configuration; idempotent.
 *
 * On return every path above exists (the store only when `options.store` is not false);
 * nothing that existed was overwritten.
 *
 * @throws {KlbrError} `state_unusable` when the directory cannot be made (a file in its path,
 * no permission, a read-only or full disk); from `openStore`: `foreign_store`, `owner_locked`,
 * `sqlite_too_old`.
 */
export async function initStateDir(
  stateDir: string,
  options: {
    /** False: the caller opens the store next with `create: true` (the daemon), so it is not
     * opened, checked and closed here first. @default true */
    store?: boolean;
  } = {},
): Promise<InitReport> {
  await Deno.mkdir(stateDir, { recursive: true }).catch((cause) => {
    throw stateFileError("create the state directory", stateDir, {
      cause,
      fix: "choose another --state DIR",
    });
  });
  const created = !(await pathExists(join(stateDir, "runtime.sqlite")));
  if (options.store !== false) {
    const { openStore } = await later("../../store/store.ts");
    openStore(stateDir, { create: true, owner: true }).close();
  }
  for (const sub of STATE_SUBDIRS) await Deno.mkdir(join(stateDir, sub), { recursive: true });
  const { ensureOperatorToken } = await later("../lanes/mod.ts");
  await ensureOperatorToken(stateDir);
  const config = join(stateDir, CONFIG_FILE);
  if (!(await pathExists(config))) await Deno.writeTextFile(config, defaultConfigText());
  return { created, stateDir };
}

/** Resolves the configuration file: the flag, `KLBR_CONFIG`, then `<state>/config.kdl`. */
export async function resolveConfigPath(
  stateDir: string,
  flag: string | undefined,
): Promise<string | undefined> {
  const chosen = flag ?? Deno.env.get("KLBR_CONFIG");
  if (chosen !== undefined) return resolve(chosen);
  const inState = join(stateDir, CONFIG_FILE);
  return (await pathExists(inState)) ? inState : undefined;
}

/**
 * Loads the configuration {@linkcode resolveConfigPath} found; with none, the file `init` and
 * the first start write (`defaultConfigText`), so a first start reads what every later start
 * reads: one `main` route that `fast` and `long` copy.
 *
 * @throws {KlbrError} `invalid_config` as `loadConfig`.
 * @example
 * ```ts
 * const { config } = await loadStateConfig(await resolveConfigPath(state, undefined), { env });
 * ```
 */
export async function loadStateConfig(
  path: string | undefined,
  options: { env: Record<string, string | undefined> },
): ReturnType<typeof loadConfig> {
  if (path !== undefined) return await loadConfig(path, options);
  const parsed = parseConfig(defaultConfigText(), { file: CONFIG_FILE, env: options.env });
  return { ...parsed, source: { kind: "defaults" } };
}
