/**
 * The small shell scripts the sandbox runs through `/bin/sh`: Deno refuses every read and
 * write under `/proc` and `/sys` without `--allow-all`, so cgroups are created, joined, read
 * and removed by a shell the daemon starts (`/bin/sh` is in its `--allow-run`), never by Deno.
 *
 * @module
 */

import { spawnFailure } from "./_spawn_child.ts";

/** The shell every script runs in (named in the daemon's `--allow-run`). */
export const SHELL = "/bin/sh";

/**
 * The wrapper every confined process starts through: it makes the tree's cgroups, writes
 * their limits and joins them, sets its rlimits, then `exec`s bubblewrap with the seccomp
 * filter open as fd 3 — all before bubblewrap forks, so no process of the tree ever runs
 * outside its limits. Arguments: the filter file, the number of directories to create, the
 * directories, then operations (`-w FILE VALUE` writes, `-j FILE` joins, `-u FLAG VALUE` sets
 * an rlimit, `-n VALUE` sets the process limit) up to `--`, then the command. Exit 125 means
 * the wrapper itself failed. The process limit is `ulimit -u` in bash, busybox and zsh, and
 * `-p` in dash, where bash's `-p` is the pipe size, which it refuses to set: each is tried.
 */
export const WRAPPER = `f=$1; n=$2; shift 2
if [ "$n" -gt 0 ]; then
  a=; i=1; while [ "$i" -le "$n" ]; do a="$a \\"\\\${$i}\\""; i=$((i+1)); done
  eval "mkdir -p -- $a" || exit 125
  shift "$n"
fi
while [ "$1" != -- ]; do
  case $1 in
    -w) printf '%s\\n' "$3" > "$2" || exit 125; shift 3;;
    -j) printf '%s\\n' "$$" > "$2" || exit 125; shift 2;;
    -u) ulimit "$2" "$3" || exit 125; shift 3;;
    -n) { ulimit -u "$2" 2>/dev/null || ulimit -p "$2"; } || exit 125; shift 2;;
    *) echo "klbr sandbox: unknown wrapper operation $1" >&2; exit 125;;
  esac
done
shift
exec "$@" 3<"$f"`;

/**
 * `rm_cg DIR`: kills every process of a cgroup directory and removes it, retrying while it is
 * busy (a dying process); still busy after 2 s, it prints `busy DIR` and gives up.
 */
export const RM_CG = `rm_cg() {
  [ -d "$1" ] || return 0
  i=0
  while :; do
    if [ -f "$1/cgroup.kill" ]; then echo 1 > "$1/cgroup.kill" 2>/dev/null
    else while read -r p; do kill -9 "$p" 2>/dev/null; done < "$1/cgroup.procs"; fi
    rmdir "$1" 2>/dev/null && return 0
    i=$((i+1)); [ "$i" -ge 40 ] && { echo "busy $1"; return 0; }
    sleep 0.05
  done
}
rm_children() {
  for c in "$1"/*/; do [ -d "$c" ] && rm_cg "\${c%/}"; done
  return 0
}`;

/**
 * Removes each cgroup directory given (`rm_cg`); `-r DIR` removes only its subdirectories.
 */
export const REMOVE_CGROUPS = `${RM_CG}
while [ "$#" -gt 0 ]; do
  if [ "$1" = -r ]; then rm_children "$2"; shift 2; else rm_cg "$1"; shift; fi
done`;

/** What a script printed and how it ended. */
export interface ShellResult {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs `script` with `/bin/sh -c` and `args` as its positional parameters, in a cleared
 * environment.
 *
 * @throws {KlbrError} `forbidden` when the daemon may not run `/bin/sh`; `internal` when it
 * does not start.
 * @example
 * ```ts
 * const { stdout } = await runShell('cat "$1"', ["/proc/self/cgroup"]);
 * ```
 */
export async function runShell(script: string, args: string[] = []): Promise<ShellResult> {
  let output: Deno.CommandOutput;
  try {
    output = await new Deno.Command(SHELL, {
      args: ["-c", script, "klbr", ...args],
      clearEnv: true,
      env: { PATH: "/usr/sbin:/usr/bin:/sbin:/bin", LANG: "C" },
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
  } catch (cause) {
    const got = `(got ${String(cause).slice(0, 200)})`;
    throw spawnFailure(cause, {
      forbidden: `run ${SHELL}: the daemon may not run it; add it to --allow-run ${got}`,
      other: `run ${SHELL}: it did not start ${got}`,
    });
  }
  const decode = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
  return { code: output.code, stdout: decode(output.stdout), stderr: decode(output.stderr) };
}
