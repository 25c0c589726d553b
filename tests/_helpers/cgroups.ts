/**
 * The cgroup directories of test daemons that ended without a clean exit. A daemon keeps its
 * trees under `klbr-<hash of the state directory>` in each hierarchy; it removes them when it
 * drains, and the next start on the same state directory removes a killed one's. A test that
 * kills its daemon and then lets its state directory go starts none, so when the test process
 * ends (when `tempDir` removes the state directories) each such directory of a daemon that has
 * exited is removed here: children first, by `rmdir` alone, so a cgroup that still holds a
 * process or a child is left as it is, and only this process's daemons' names are touched.
 *
 * @module
 */

import { resolve } from "node:path";
import { cgroupName } from "../../runtime/sandbox/mod.ts";

/** How many daemons started here on each cgroup name are still running. */
const running = new Map<string, number>();

/** Lists, children first, the cgroup directories named `$n` and everything below them. */
const FIND = 'find /sys/fs/cgroup -depth -type d \\( -name "$n" -o -path "*/$n/*" \\)';

globalThis.addEventListener("unload", () => removeExitedCgroups());

/**
 * Counts a daemon started on `stateDir` as running until `exited` settles; from then on its
 * empty cgroup directories are removed when the test process ends (unless another daemon on
 * the same state directory still runs).
 *
 * @example
 * ```ts
 * await watchCgroups(stateDir, child.status);
 * ```
 */
export async function watchCgroups(stateDir: string, exited: Promise<unknown>): Promise<void> {
  const name = await nameOf(stateDir);
  running.set(name, (running.get(name) ?? 0) + 1);
  const done = () => void running.set(name, running.get(name)! - 1);
  exited.then(done, done);
}

/**
 * Removes what is empty of the cgroup directories of every watched daemon that has exited,
 * children first, by `rmdir` only (through a shell: Deno reads nothing under `/sys` without
 * `--allow-all`). Never throws; a host without cgroups has nothing to remove.
 */
function removeExitedCgroups(): void {
  const names = [...running].filter(([, live]) => live === 0).map(([name]) => name);
  if (names.length === 0) return;
  const script = `for n; do ${FIND} -exec rmdir {} \\; 2>/dev/null; done; exit 0`;
  try {
    new Deno.Command("sh", { args: ["-c", script, "sh", ...names], stdout: "null", stderr: "null" })
      .outputSync();
  } catch { /* no shell: nothing more can be done at exit */ }
}

/**
 * The cgroup directories, in every hierarchy, of a daemon started on `stateDir` (its parents
 * and their trees), sorted; read by a shell, as Deno reads nothing under `/sys` without
 * `--allow-all`.
 *
 * @example
 * ```ts
 * assert.deepEqual(await cgroupDirsOf(stateDir), []);
 * ```
 */
export async function cgroupDirsOf(stateDir: string): Promise<string[]> {
  const name = await nameOf(stateDir);
  const out = await new Deno.Command("sh", {
    args: ["-c", `n=$1; ${FIND}`, "sh", name],
    stderr: "null",
  }).output();
  return new TextDecoder().decode(out.stdout).split("\n").filter(Boolean).sort();
}

/** The daemon names its cgroups for its state directory's real path (or the path as given). */
async function nameOf(stateDir: string): Promise<string> {
  return cgroupName(await Deno.realPath(stateDir).catch(() => resolve(stateDir)));
}
