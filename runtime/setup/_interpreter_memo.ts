/**
 * The interpreter the last daemon was handed, remembered beside the store
 * (`<state>/interpreter.json`), so that the next `serve` can probe bubblewrap with it while the
 * interpreter lookup (a pyenv shim runs several shell scripts) is still under way. It is a guess
 * and never more: the launcher still runs the lookup every time, and uses the early probe only
 * when the lookup names the very executable and home the probe ran; otherwise it probes again.
 *
 * @module
 */

import { isAbsolute, join } from "node:path";
import { z } from "zod";

/** The file's name inside the state directory. */
export const INTERPRETER_FILE = "interpreter.json";

const Remembered = z.object({
  executable: z.string().min(1).refine(isAbsolute, "an absolute path"),
  home: z.string().min(1).refine(isAbsolute, "an absolute path"),
}).strict();

/** An interpreter as the hand-over names it. */
export type RememberedInterpreter = z.infer<typeof Remembered>;

/**
 * The interpreter remembered in `stateDir`; undefined when there is none, or the file is not
 * one this module wrote (a guess that cannot be read is no guess).
 *
 * @example
 * ```ts
 * const guess = rememberedInterpreter(".klbr"); // { executable: "/usr/bin/python3", home: "/usr" }
 * ```
 */
export function rememberedInterpreter(stateDir: string): RememberedInterpreter | undefined {
  try {
    const parsed = Remembered.safeParse(
      JSON.parse(Deno.readTextFileSync(join(stateDir, INTERPRETER_FILE))),
    );
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Remembers `python` in `stateDir` when it is not what is remembered already. A failure to
 * write costs the next start its early probe, nothing else, so it is not thrown.
 */
export async function rememberInterpreter(
  stateDir: string,
  python: RememberedInterpreter,
): Promise<void> {
  const known = rememberedInterpreter(stateDir);
  if (known?.executable === python.executable && known.home === python.home) return;
  const { executable, home } = python;
  try {
    await Deno.writeTextFile(
      join(stateDir, INTERPRETER_FILE),
      `${JSON.stringify({ executable, home })}\n`,
    );
  } catch {
    // The next launcher probes after the lookup, as without a guess.
  }
}
