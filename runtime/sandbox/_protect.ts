/**
 * What of the workspace a cell may read but never change: klbr's own code when the workspace
 * holds its checkout (the default layout: `serve` starts in the checkout, which is the
 * workspace) unless `workspace { self_edit #true }`, and — whatever the setting — the git
 * hooks and config of the repository at the workspace root (and of the checkout), which run as
 * the owner at their next `git` command.
 *
 * @module
 */

import { join } from "node:path";
import { KlbrError } from "../core/mod.ts";
import { isWithin } from "./_sandbox.ts";

/** klbr's own code, relative to its checkout: what the launcher and the daemon run. */
export const SELF_PATHS = [
  "main.ts",
  "runtime",
  "store",
  "workbench",
  "ui",
  "deno.json",
  "deno.lock",
  "node_modules",
];

/** What {@linkcode protectedPaths} found. */
export interface ProtectedPaths {
  /** Absolute real paths bound read-only in every confined process, refused to `code.patch`. */
  paths: string[];
  /** Whether the workspace holds klbr's checkout. */
  selfInWorkspace: boolean;
}

async function kind(path: string): Promise<"file" | "dir" | null> {
  try {
    const info = await Deno.lstat(path);
    return info.isDirectory ? "dir" : info.isFile ? "file" : null;
  } catch {
    return null;
  }
}

/**
 * The git paths of a repository at `root`: `.git/hooks` (made when missing, as `git init`
 * makes it, so that it can be bound) and `.git/config`; for a `.git` file (a worktree or a
 * submodule), that file, which names the git directory.
 */
async function gitPaths(root: string): Promise<string[]> {
  const git = join(root, ".git");
  const found = await kind(git);
  if (found === "file") return [git];
  if (found !== "dir") return [];
  const hooks = join(git, "hooks");
  if (await kind(hooks) === null) await Deno.mkdir(hooks).catch(() => {});
  const out = (await kind(hooks)) === "dir" ? [hooks] : [];
  if (await kind(join(git, "config")) === "file") out.push(join(git, "config"));
  return out;
}

/**
 * The workspace's real path.
 *
 * @throws {KlbrError} `invalid_config` when it is missing or not a directory, naming the fix.
 */
async function workspaceDir(workspace: string): Promise<string> {
  const real = await Deno.realPath(workspace).catch(() => null);
  if (real !== null && await kind(real) === "dir") return real;
  throw new KlbrError(
    "invalid_config",
    `cannot confine the workbench: the workspace is not a directory; create it, or set KLBR_WORKSPACE to the directory the agent works in (got ${workspace})`,
  );
}

/**
 * The paths of `workspace` a cell may not change: klbr's code (of `repoRoot`, when it lies in
 * the workspace and `selfEdit` is off) and the git hooks and config of the repositories at the
 * workspace root and at `repoRoot`, those that exist.
 *
 * @throws {KlbrError} `invalid_config` when the workspace is missing or not a directory.
 * @example
 * ```ts
 * const { paths } = await protectedPaths(workspace, { repoRoot: REPO_ROOT, selfEdit: false });
 * ```
 */
export async function protectedPaths(
  workspace: string,
  options: { repoRoot: string; selfEdit: boolean },
): Promise<ProtectedPaths> {
  const ws = await workspaceDir(workspace);
  const repo = await Deno.realPath(options.repoRoot).catch(() => options.repoRoot);
  const selfInWorkspace = isWithin(ws, repo);
  const paths: string[] = [];
  if (selfInWorkspace && !options.selfEdit) {
    for (const name of SELF_PATHS) {
      if (await kind(join(repo, name)) !== null) paths.push(join(repo, name));
    }
  }
  for (const root of new Set([ws, ...(selfInWorkspace ? [repo] : [])])) {
    paths.push(...await gitPaths(root));
  }
  return { paths, selfInWorkspace };
}

/**
 * Refuses a host-side write (`code.patch`) to a protected path, as the sandbox refuses the
 * cell's own.
 *
 * @throws {KlbrError} `forbidden` naming the path and why it is read-only.
 * @example
 * ```ts
 * refuseProtected(["/ws/main.ts"], "/ws/main.ts", "main.ts"); // throws forbidden
 * ```
 */
export function refuseProtected(protect: string[], real: string, shown: string): void {
  const hit = protect.find((path) => isWithin(path, real));
  if (hit === undefined) return;
  const git = /\/\.git(\/|$)/.test(hit);
  throw new KlbrError(
    "forbidden",
    `cannot write ${shown}: ${
      git
        ? "the repository's git hooks and config are read-only to the agent"
        : "klbr's own code is read-only to the agent; workspace { self_edit #true } allows it"
    } (got ${real})`,
  );
}
