/**
 * The CLI as a user runs it: `main.ts <args>` as a real process with the permission flags of
 * a deno.json task.
 *
 * @module
 */

import { join } from "node:path";
import { REPO_ROOT } from "./daemon.ts";

/** What a CLI run printed and how it ended. */
export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `main.ts <args>` with the permission flags of the named deno.json task. */
export async function cli(
  task: string,
  args: string[],
  env: Record<string, string> = {},
): Promise<CliRun> {
  const config = JSON.parse(await Deno.readTextFile(join(REPO_ROOT, "deno.json")));
  const flags = (config.tasks[task] as string).split(/\s+/).filter((p) => p.startsWith("--allow-"));
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", ...flags, join(REPO_ROOT, "main.ts"), ...args],
    cwd: REPO_ROOT,
    env: { NO_COLOR: "1", KLBR_SKILLS_DIR: join(REPO_ROOT, "skills"), ...env },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const decode = (b: Uint8Array) => new TextDecoder().decode(b);
  return { code: out.code, stdout: decode(out.stdout), stderr: decode(out.stderr) };
}

/** A state directory `init` laid out, its `main` route pointed at a port nothing listens on. */
export interface StateWithoutModel {
  state: string;
  config: string;
  /** The route's URL: a closed local port, standing in for "no model server running yet". */
  nowhere: string;
}

/**
 * Runs `init --state <parent>/state` as a user would, then points its `main` route at a closed
 * local port (the default `localhost:8001` might be taken on a shared machine).
 *
 * @example
 * ```ts
 * const { state, config, nowhere } = await initWithoutModel(await tempDir());
 * ```
 */
export async function initWithoutModel(parent: string): Promise<StateWithoutModel> {
  const state = join(parent, "state");
  const init = await cli("init", ["init", "--state", state]);
  if (init.code !== 0) throw new Error(`init failed (exit ${init.code}): ${init.stderr}`);
  const config = join(state, "config.kdl");
  const closed = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const nowhere = `http://127.0.0.1:${closed.addr.port}/v1`;
  closed.close();
  const text = await Deno.readTextFile(config);
  const route = 'url "http://localhost:8001/v1"';
  if (!text.includes(route)) throw new Error(`init's config names no ${route}:\n${text}`);
  await Deno.writeTextFile(config, text.replace(route, `url "${nowhere}"`));
  return { state, config, nowhere };
}
