/**
 * Confinement of the daemon's children (the workbench, the hook workers, `workspace.run`
 * programs, job workbenches) by bubblewrap: the system read-only, the workspace read-write
 * except klbr's own code and the repository's git hooks and config, the active release and
 * skills read-only, the state directory absent, a private `/tmp`; new user (an unprivileged
 * uid inside), PID, IPC, UTS and (unless the configuration allows the network) network
 * namespaces; every capability dropped, `no_new_privs` and a seccomp filter
 * (`_seccomp.ts`); `--die-with-parent`.
 *
 * Deno's permissions bind the daemon, not its children; this is what binds the children.
 * Where bubblewrap is missing or cannot create namespaces the children run unconfined, and
 * the daemon says so everywhere ({@linkcode SandboxStatus}).
 *
 * @module
 */

import { dirname, isAbsolute, join, relative, resolve, sep } from "node:path";
import type { LimitsPlan } from "./_limits.ts";

/** The system directories bound read-only; a missing one (or a symlink's target) is skipped. */
export const SYSTEM_BINDS = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"];

/**
 * The files of `/etc` bound read-only, and nothing else of it: what the dynamic linker, name
 * lookups, TLS and `git` read. Keys, shadow passwords and the rest of `/etc` stay out.
 */
export const ETC_BINDS = [
  "/etc/ld.so.cache",
  "/etc/ld.so.conf",
  "/etc/ld.so.conf.d",
  "/etc/alternatives",
  "/etc/localtime",
  "/etc/passwd",
  "/etc/group",
  "/etc/nsswitch.conf",
  "/etc/hosts",
  "/etc/resolv.conf",
  "/etc/ssl",
  "/etc/ca-certificates",
  "/etc/gitconfig",
  "/etc/mime.types",
];

/** The uid and gid a confined process has inside its user namespace. */
export const SANDBOX_UID = 1000;

/** The file descriptor bubblewrap reads the seccomp filter from (opened by the wrapper). */
export const SECCOMP_FD = 3;

/** Whether and how children are confined, as `/health`, `doctor`, the log and the UI say it. */
export interface SandboxStatus {
  /** `bwrap` when children run inside bubblewrap, `none` when they run unconfined. */
  mode: "bwrap" | "none";
  /** Why children are unconfined; null when they are confined. */
  reason: string | null;
  /** Whether confined children may use the network. */
  network: boolean;
  /**
   * Whether confined children run in a user namespace as an unprivileged uid; false where
   * user namespaces are unavailable: they then keep uid 0 with every capability dropped.
   */
  userns: boolean;
  /** Why user namespaces are not used, when they are not; else null. */
  usernsReason: string | null;
}

/** What every confined child shares: where the tools are and what is never bound. */
export interface SandboxBase {
  /** The bubblewrap executable (`bwrap` on `PATH` unless `KLBR_BWRAP` names another). */
  bwrap: string;
  /** Whether children keep the host's network. */
  network: boolean;
  /** Directories bound read-only in every child besides the system (Python's home). */
  readOnly: string[];
  /** The state directory: never bound; hidden by an empty read-only directory if it lies
   * inside a bound one. */
  stateDir: string;
  /** A user namespace with uid {@linkcode SANDBOX_UID} inside; false keeps uid 0 (capless). */
  userns: boolean;
  /** The seccomp filter file (`_seccomp.ts`), opened as fd 3 for bwrap; null runs without. */
  seccomp: string | null;
  /**
   * Paths bound read-only over the read-write directories (klbr's own code, the git hooks and
   * config); each directory between a read-write one and such a path is bound onto itself,
   * so that it cannot be renamed away with the protected path inside.
   */
  protect: string[];
  /** The limits of each confined process tree; null: none. */
  limits: LimitsPlan | null;
}

/** What one confined child may see besides the base. */
export interface ConfinedSpawn {
  /** The program and its arguments, as they would run unconfined. */
  command: string;
  args: string[];
  /** Its working directory (inside a bound directory). */
  cwd: string;
  /** Bound read-write, in order (the workspace). */
  readWrite: string[];
  /** Bound read-only after them (the release, the skills, the workbench package). */
  readOnly: string[];
}

/**
 * `path` is `dir` or lies inside it (both absolute and normalised). A name that only starts
 * with two dots (`..x`) is inside; `..` and `../…` are not.
 */
export function isWithin(dir: string, path: string): boolean {
  const rel = relative(dir, path);
  return rel !== ".." && !rel.startsWith(`..${sep}`) && !isAbsolute(rel);
}

/** The directories strictly between `dir` and `path` (which lies inside it), outermost first. */
function between(dir: string, path: string): string[] {
  const out: string[] = [];
  for (let at = dirname(path); at !== dir && isWithin(dir, at); at = dirname(at)) out.unshift(at);
  return out;
}

/** A read-write directory: the name it is bound at, and where its files really are. */
interface Writable {
  at: string;
  real: string;
}

/** `dir`'s real path (links resolved), or `dir` itself where it cannot be read. */
function realOf(dir: string): string {
  try {
    return Deno.realPathSync(dir);
  } catch {
    return dir;
  }
}

/**
 * Where `path` (a real path, as the state directory and the protected paths are given) is seen
 * in the sandbox: a read-write directory named through a link is bound at that name, so what
 * lies in it is seen under the name, not under its real path.
 */
function seenAt(dir: Writable, path: string): string | undefined {
  if (isWithin(dir.at, path)) return path;
  return isWithin(dir.real, path) ? join(dir.at, relative(dir.real, path)) : undefined;
}

/**
 * The binds that keep `protect` read-only inside the read-write directories: each directory
 * between them bound onto itself (a mount point cannot be renamed), then the path read-only.
 */
function protectArgs(writable: Writable[], protect: string[]): string[] {
  const args: string[] = [];
  const pinned = new Set<string>();
  for (const real of protect.map((p) => resolve(p))) {
    const root = writable.find((dir) => {
      const seen = seenAt(dir, real);
      return seen !== undefined && seen !== dir.at;
    });
    if (root === undefined) continue;
    const path = seenAt(root, real)!;
    for (const dir of between(root.at, path)) {
      if (!pinned.has(dir)) args.push("--bind-try", dir, dir);
      pinned.add(dir);
    }
    args.push("--ro-bind-try", path, path);
  }
  return args;
}

/**
 * The `bwrap` argument list that runs `spawn.command` confined.
 *
 * Later binds cover earlier ones, so the order is: system and Python read-only, a read-only
 * `/proc`, a private `/tmp`, the read-write directories, the protected paths inside them
 * read-only, the state directory hidden (an empty read-only directory) where it lies inside them,
 * then the read-only directories, which may lie inside the state directory (the release, the
 * managed skills). A read-write directory named through a link is bound at that name, and the state
 * directory and the protected paths (real paths) are covered where they are seen under it.
 *
 * @example
 * ```ts
 * const args = bwrapArgs(base, { command: python, args: ["-m", "klbr"], cwd: ws,
 *   readWrite: [ws], readOnly: [releasePath] });
 * ```
 */
export function bwrapArgs(base: SandboxBase, spawn: ConfinedSpawn): string[] {
  const args: string[] = [];
  for (const dir of SYSTEM_BINDS) args.push("--ro-bind-try", dir, dir);
  for (const file of ETC_BINDS) args.push("--ro-bind-try", file, file);
  for (const dir of base.readOnly) if (!isWithin("/usr", dir)) args.push("--ro-bind", dir, dir);
  // /proc read-only: as root, uid 1000 inside is uid 0 outside, which the kernel lets write
  // /proc/sys (core_pattern runs a program as root outside); bubblewrap leaves it writable.
  args.push("--proc", "/proc", "--remount-ro", "/proc", "--dev", "/dev", "--tmpfs", "/tmp");
  const state = resolve(base.stateDir);
  const writable = spawn.readWrite.map((dir): Writable => ({
    at: resolve(dir),
    real: realOf(resolve(dir)),
  }));
  for (const { at } of writable) args.push("--bind", at, at);
  args.push(...protectArgs(writable, base.protect));
  // The state directory under every name a read-write directory shows it at.
  const hidden = [
    ...new Set(writable.flatMap((dir) => seenAt(dir, state) ?? seenAt(dir, realOf(state)) ?? [])),
  ];
  for (const cover of hidden) args.push("--tmpfs", cover);
  for (const dir of spawn.readOnly.map((d) => resolve(d))) {
    const inState = [state, ...hidden].some((cover) => isWithin(cover, dir));
    if (writable.some((w) => isWithin(w.at, dir)) && !inState) continue;
    // A skills root may not exist yet; then there is nothing to see.
    args.push("--ro-bind-try", dir, dir);
  }
  for (const cover of hidden) args.push("--remount-ro", cover);
  if (base.userns) {
    args.push("--unshare-user", "--uid", String(SANDBOX_UID), "--gid", String(SANDBOX_UID));
  }
  args.push("--cap-drop", "ALL");
  if (base.seccomp !== null) args.push("--seccomp", String(SECCOMP_FD));
  args.push("--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try");
  if (!base.network) args.push("--unshare-net");
  args.push("--die-with-parent", "--new-session", "--chdir", spawn.cwd);
  args.push("--", spawn.command, ...spawn.args);
  return args;
}

/**
 * What a confined workbench or hook worker sees read-only besides the system: every published
 * release (a turn's hooks stay pinned to its frame's release after an activation; releases
 * are immutable behaviour code, no secret), the generation's own release, and the skill roots.
 */
export function workerReadOnly(
  stateDir: string | undefined,
  behavior: { path: string } | null,
  skills: { builtinRoot: string; managedRoot: string },
): string[] {
  return [
    ...(stateDir === undefined ? [] : [join(stateDir, "releases")]),
    ...(behavior === null ? [] : [behavior.path]),
    skills.builtinRoot,
    skills.managedRoot,
  ];
}
