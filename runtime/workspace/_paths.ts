/**
 * The host's one check that a path a cell names stays inside the workspace: `..`, absolute
 * paths elsewhere and symlinks that lead out are refused. `workspace.run` checks its `cwd`
 * with it and the code domain checks every file it reads or patches with it, so hardening it
 * hardens both.
 *
 * @module
 */

import { isAbsolute, relative, resolve, sep } from "node:path";
import { KlbrError } from "../core/mod.ts";

/** What {@linkcode resolveInWorkspace} checks, and the words its refusals use. */
export interface WorkspacePathOptions {
  /** The verb of the refusal, e.g. `run` → "cannot run: …". */
  action: string;
  /** What the path is called in the refusal, e.g. `cwd` or `path`. */
  label: string;
  /** Also require a directory or a regular file there; any kind otherwise. */
  expect?: "directory" | "file";
  /**
   * Directories never part of the workspace even inside the root (the state directory, in the
   * default layout): a path in one is refused. @default {[]}
   */
  deny?: string[];
}

/** A path checked inside the workspace. */
export interface WorkspacePath {
  /** The workspace root with every symlink followed. */
  realRoot: string;
  /** The path with every symlink followed; inside `realRoot`. */
  real: string;
  /** `real` relative to `realRoot`, `/`-separated; `.` for the root itself. */
  relative: string;
}

/** Whether `path` is `root` or below it (both absolute and normalised). */
export function withinRoot(root: string, path: string): boolean {
  const rel = relative(root, path);
  return rel === "" || (!rel.startsWith(`..${sep}`) && rel !== ".." && !isAbsolute(rel));
}

/**
 * Resolves `path` (relative to the root, or absolute inside it; `null` is the root) inside
 * the workspace `root`, following symlinks, and checks that it stays there.
 *
 * @throws {KlbrError} `path_escape` for a path that leaves the root by `..`, an absolute path
 * or a symlink, or that lies in a `deny` directory; `not_found` when the root or the path does not exist; `path_invalid` when it
 * is not the kind `expect` asks for.
 * @example
 * ```ts
 * const { real } = await resolveInWorkspace(ws, "src", { action: "run", label: "cwd", expect: "directory" });
 * ```
 */
export async function resolveInWorkspace(
  root: string,
  path: string | null,
  options: WorkspacePathOptions,
): Promise<WorkspacePath> {
  const { action, label } = options;
  let realRoot: string;
  try {
    realRoot = await Deno.realPath(root);
  } catch (cause) {
    throw new KlbrError(
      "not_found",
      `cannot ${action}: the workspace root does not exist (got ${root})`,
      { cause },
    );
  }
  const wanted = path ?? ".";
  const candidate = resolve(realRoot, wanted);
  if (!withinRoot(realRoot, candidate)) {
    throw new KlbrError(
      "path_escape",
      `cannot ${action}: ${label} leaves the workspace (got ${JSON.stringify(wanted)})`,
    );
  }
  let real: string;
  try {
    real = await Deno.realPath(candidate);
  } catch (cause) {
    throw new KlbrError(
      "not_found",
      `cannot ${action}: ${label} does not exist (got ${JSON.stringify(wanted)})`,
      { cause },
    );
  }
  if (!withinRoot(realRoot, real)) {
    throw new KlbrError(
      "path_escape",
      `cannot ${action}: ${label} leaves the workspace through a symlink (got ${
        JSON.stringify(wanted)
      })`,
    );
  }
  if ((options.deny ?? []).some((dir) => withinRoot(resolve(dir), real))) {
    throw new KlbrError(
      "path_escape",
      `cannot ${action}: ${label} is inside the state directory, which is never part of the workspace (got ${
        JSON.stringify(wanted)
      })`,
    );
  }
  if (options.expect !== undefined) {
    const info = await Deno.stat(real);
    const ok = options.expect === "directory" ? info.isDirectory : info.isFile;
    if (!ok) {
      const kind = options.expect === "directory" ? "a directory" : "a regular file";
      throw new KlbrError(
        "path_invalid",
        `cannot ${action}: ${label} is not ${kind} (got ${JSON.stringify(wanted)})`,
      );
    }
  }
  const rel = relative(realRoot, real).split(sep).join("/");
  return { realRoot, real, relative: rel === "" ? "." : rel };
}
