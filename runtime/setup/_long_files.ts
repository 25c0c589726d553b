/**
 * The before-commit size warning: prints each file of `runtime/` and `store/` over 400 lines.
 * A long file is a hint to split it by concept, never a failure: the script always exits 0
 * (`deno task lines`; `.ci/run` prints it).
 *
 * @module
 */

import { join, relative } from "node:path";
import { REPO_ROOT } from "./_repo_root.ts";

/** The line count past which a file is named. */
export const LONG_FILE_LINES = 400;

/** One file over the limit. */
export interface LongFile {
  /** Its path, relative to the checkout. */
  path: string;
  lines: number;
}

/** Every `.ts`/`.tsx` file under `dir`, recursively. */
async function sourceFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  for await (const entry of Deno.readDir(dir)) {
    const path = join(dir, entry.name);
    if (entry.isDirectory) out.push(...await sourceFiles(path));
    else if (/\.tsx?$/.test(entry.name)) out.push(path);
  }
  return out;
}

/**
 * The files of `runtime/` and `store/` over {@linkcode LONG_FILE_LINES} lines, longest first.
 *
 * @example
 * ```ts
 * for (const { path, lines } of await longFiles("/src/klbr")) console.log(path, lines);
 * ```
 */
export async function longFiles(repoRoot: string): Promise<LongFile[]> {
  const long: LongFile[] = [];
  for (const root of ["runtime", "store"]) {
    for (const file of await sourceFiles(join(repoRoot, root))) {
      const lines = (await Deno.readTextFile(file)).split("\n").length;
      if (lines > LONG_FILE_LINES) long.push({ path: relative(repoRoot, file), lines });
    }
  }
  return long.sort((a, b) => b.lines - a.lines);
}

if (import.meta.main) {
  const long = await longFiles(REPO_ROOT);
  for (const { path, lines } of long) {
    console.log(
      `warning: ${path} has ${lines} lines (over ${LONG_FILE_LINES}): split it by concept`,
    );
  }
  if (long.length === 0) {
    console.log(`lines: no file of runtime/ or store/ over ${LONG_FILE_LINES}`);
  }
}
