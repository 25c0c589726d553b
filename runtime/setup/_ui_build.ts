/**
 * Builds the browser UI: `deno bundle` turns `ui/src/main.tsx` into `ui/dist/app.js`, and the
 * files of `ui/static/` are copied beside it. Nothing is fetched at run time; the page works
 * offline.
 *
 * Run as a script (`deno task ui:build`) it rebuilds unconditionally.
 *
 * @module
 */

import { join } from "node:path";
import { KlbrError } from "../core/mod.ts";

/** Options for {@linkcode ensureUiBuilt}. */
export interface EnsureUiBuiltOptions {
  /** The checkout's root: the directory holding `deno.json` and `ui/`. */
  repoRoot: string;
  /** Rebuild even when the output is newer than every source. @default {false} */
  force?: boolean;
  /** The Deno executable that bundles. @default {Deno.execPath()} */
  deno?: string;
  /** Longest time the bundler may take. @default {120_000} */
  timeoutMs?: number;
}

/** The files a complete build holds; `build.json` is written last. */
export const UI_OUTPUTS = ["app.js", "index.html", "style.css", "build.json"] as const;

/** Newest modification time (ms) of any file under `dir`, recursively; 0 when there is none. */
async function newestMtime(dir: string): Promise<number> {
  let newest = 0;
  let entries: AsyncIterable<Deno.DirEntry>;
  try {
    entries = Deno.readDir(dir);
    for await (const entry of entries) {
      const path = join(dir, entry.name);
      if (entry.isDirectory) newest = Math.max(newest, await newestMtime(path));
      else if (entry.isFile) {
        newest = Math.max(newest, (await Deno.stat(path)).mtime?.getTime() ?? 0);
      }
    }
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
  return newest;
}

/**
 * Returns whether `ui/dist` lacks an output or is older than a source: a file under
 * `ui/src`, `ui/static` or `runtime/core` (the schemas the page bundles), `deno.json` or
 * `deno.lock`.
 */
export async function uiIsStale(repoRoot: string): Promise<boolean> {
  // The oldest output; 0 when one is missing.
  const dist = join(repoRoot, "ui", "dist");
  const built = Math.min(
    ...await Promise.all(UI_OUTPUTS.map((name) => fileMtime(join(dist, name)))),
  );
  if (built === 0) return true;
  const sources = Math.max(
    await newestMtime(join(repoRoot, "ui", "src")),
    await newestMtime(join(repoRoot, "ui", "static")),
    await newestMtime(join(repoRoot, "runtime", "core")),
    await fileMtime(join(repoRoot, "deno.json")),
    await fileMtime(join(repoRoot, "deno.lock")),
  );
  return sources > built;
}

/** Modification time (ms) of the file at `path`; 0 when it does not exist. */
async function fileMtime(path: string): Promise<number> {
  try {
    return (await Deno.stat(path)).mtime?.getTime() ?? 0;
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return 0;
    throw error;
  }
}

/**
 * Builds the UI when it is missing or stale and returns the absolute `ui/dist` directory.
 *
 * Each output is written to a temp file inside `ui/dist/` and renamed into place, and
 * `build.json` last, so a page never loads a half-written file and a build that failed
 * half-way is redone on the next call.
 *
 * @throws {KlbrError} `not_found` when `ui/src/main.tsx` does not exist; `internal` when the
 *   bundler fails or runs longer than `timeoutMs` (its stderr is in the message).
 * @example
 * ```ts
 * const uiDir = await ensureUiBuilt({ repoRoot: Deno.cwd() });
 * const app = createApp({ lanes, health, uiDir, log });
 * ```
 */
export async function ensureUiBuilt(options: EnsureUiBuiltOptions): Promise<string> {
  const { repoRoot, force = false, deno = Deno.execPath(), timeoutMs = 120_000 } = options;
  const ui = join(repoRoot, "ui");
  const dist = join(ui, "dist");
  const entry = join(ui, "src", "main.tsx");
  try {
    await Deno.stat(entry);
  } catch (cause) {
    throw new KlbrError("not_found", `cannot build ui: no entry module (got ${entry})`, { cause });
  }
  if (!force && !(await uiIsStale(repoRoot))) return dist;

  await Deno.mkdir(dist, { recursive: true });
  const temp = await Deno.makeTempDir({ dir: dist, prefix: ".build-" });
  try {
    await bundle({ deno, repoRoot, entry, out: join(temp, "app.js"), timeoutMs });
    await writeOutputs(ui, temp, dist);
  } finally {
    await Deno.remove(temp, { recursive: true }).catch(() => {});
  }
  return dist;
}

/** Runs `deno bundle` on the entry module into `out`; a failure carries the bundler's stderr. */
async function bundle(
  at: { deno: string; repoRoot: string; entry: string; out: string; timeoutMs: number },
): Promise<void> {
  const deadline = AbortSignal.timeout(at.timeoutMs);
  const output = await new Deno.Command(at.deno, {
    args: [
      "bundle",
      "--quiet",
      "--platform",
      "browser",
      // Minified: half the bytes, and no library's comments (some quote `import(` in JSDoc).
      "--minify",
      "--config",
      join(at.repoRoot, "deno.json"),
      "-o",
      at.out,
      at.entry,
    ],
    cwd: at.repoRoot,
    env: { NO_COLOR: "1" },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
    signal: deadline,
  }).output().catch((cause) => {
    throw deadline.aborted ? tookTooLong(at.timeoutMs, cause) : cause;
  });
  // The signal kills the bundler, and the command then ends with that kill's exit code rather
  // than rejecting: the deadline says whether the limit is what ended it.
  if (!output.success && deadline.aborted) throw tookTooLong(at.timeoutMs);
  if (!output.success) {
    const stderr = new TextDecoder().decode(output.stderr);
    throw new KlbrError(
      "internal",
      `cannot build ui: deno bundle exited with ${output.code} (got ${
        JSON.stringify(stderr.trim().slice(-2000))
      })`,
    );
  }
}

function tookTooLong(timeoutMs: number, cause?: unknown): KlbrError {
  return new KlbrError(
    "internal",
    `cannot build ui: deno bundle ran longer than the limit (got ${timeoutMs} ms)`,
    { cause },
  );
}

/** Adds the static files and `build.json` beside the bundle, then renames each into `dist`. */
async function writeOutputs(ui: string, temp: string, dist: string): Promise<void> {
  for (const name of ["index.html", "style.css"]) {
    await Deno.copyFile(join(ui, "static", name), join(temp, name));
  }
  await Deno.writeTextFile(
    join(temp, "build.json"),
    JSON.stringify({ built_at: new Date().toISOString(), entry: "ui/src/main.tsx" }) + "\n",
  );
  for (const name of UI_OUTPUTS) await Deno.rename(join(temp, name), join(dist, name));
}

if (import.meta.main) {
  const repoRoot = join(import.meta.dirname ?? ".", "..", "..");
  const dist = await ensureUiBuilt({ repoRoot, force: true });
  console.log(`ui built: ${dist}`);
}
