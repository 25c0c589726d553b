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
