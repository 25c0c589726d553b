/**
 * What `init` tells a newcomer: where the configuration is, which model it points at, the
 * agent's workspace, and the next commands — pointing the `main` route at an OpenAI-compatible
 * server, `serve`, `klbr url`.
 *
 * @module
 */

import { resolve } from "node:path";
import { isKlbrError } from "../core/mod.ts";
import {
  EVERY_VARIABLE_SET,
  type InitReport,
  loadStateConfig,
  resolveConfigPath,
} from "./_state_dir.ts";

/** Options for {@linkcode describeInit}. */
export interface DescribeInitOptions {
  /** `--config`, when given. */
  configPath?: string;
  /** The environment: `KLBR_WORKSPACE`, `KLBR_STATE_DIR`, the key variables. */
  env: Record<string, string | undefined>;
  /** The directory `serve` would be started from (the workspace unless `KLBR_WORKSPACE`). */
  cwd: string;
}

/**
 * The lines `init` prints after it ran: what it made, the configured `main` route, the
 * workspace and the next steps, each command written for this state directory.
 *
 * @example
 * ```ts
 * for (const line of await describeInit(report, { env: Deno.env.toObject(), cwd: Deno.cwd() })) console.log(line);
 * ```
 */
export async function describeInit(
  report: InitReport,
  options: DescribeInitOptions,
): Promise<string[]> {
  const { stateDir } = report;
  const configPath = await resolveConfigPath(stateDir, options.configPath);
  const workspace = resolve(options.env.KLBR_WORKSPACE ?? options.cwd);
  // Commands name the state directory unless it is the one they find by themselves, and a
  // configuration given by --config, which no later command finds by itself.
  const defaultState = resolve(options.cwd, options.env.KLBR_STATE_DIR ?? ".klbr");
  const state = (stateDir === defaultState ? "" : ` --state ${shellWord(stateDir)}`) +
    (options.configPath === undefined || configPath === undefined
      ? ""
      : ` --config ${shellWord(configPath)}`);
  let model: string;
  try {
    // Read without the key check: an unset variable is doctor's to report, not init's.
    const { config } = await loadStateConfig(configPath, { env: EVERY_VARIABLE_SET });
    const { url, model: name, api_key_env } = config.routes.main;
    model = `${url}, model "${name}"${api_key_env ? `, key from $${api_key_env}` : ", no key"}`;
  } catch (error) {
    model = `cannot be read: ${isKlbrError(error) ? error.message : String(error)}`;
  }
  return [
    report.created ? `initialised ${stateDir}` : `${stateDir} is already initialised`,
    `  config     ${configPath ?? "(none: the defaults)"}`,
    `  model      ${model} (route main; fast and long copy it unless declared)`,
    `  workspace  ${workspace} (the agent reads and writes files here; KLBR_WORKSPACE=DIR sets another)`,
    "",
    "next:",
    `  1. point llm "main" in ${configPath ?? "the configuration"} at an OpenAI-compatible server:`,
    `     url is its base URL (e.g. "http://127.0.0.1:8080/v1" for llama.cpp's llama-server),`,
    `     model a name it serves, and api_key_env "NAME" if it needs a key in $NAME`,
    `  2. deno task serve${state}          start the daemon (--port N when 8765 is taken)`,
    `  3. deno task klbr url${state}       the UI's address with the operator token`,
    `  deno task doctor${state} checks all of this, the model included`,
  ];
}

/**
 * `word` as a POSIX shell reads it back: quoted when it holds anything but plain characters.
 *
 * @example
 * ```ts
 * shellWord("/srv/my state"); // "'/srv/my state'"
 * ```
 */
export function shellWord(word: string): string {
  return /^[\w./:@%+=-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`;
}
