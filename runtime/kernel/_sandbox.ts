/**
 * Confinement of the daemon's children (the workbench, the hook workers, `workspace.run`
 * programs) by bubblewrap: the system read-only, the workspace read-write, the active release
 * and skills read-only, the state directory absent, a private `/tmp`, new PID, IPC, UTS and
 * (unless the configuration allows the network) network namespaces, `--die-with-parent`.
 *
 * Deno's permissions bind the daemon, not its children; this is what binds the children.
 * Where bubblewrap is missing or cannot create namespaces the children run unconfined, and
 * the daemon says so everywhere ({@linkcode SandboxStatus}).
 *
 * @module
 */

import { isAbsolute, join, relative, resolve } from "node:path";
import { KlbrError } from "../core/mod.ts";

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

/** Whether and how children are confined, as `/health`, `doctor`, the log and the UI say it. */
export interface SandboxStatus {
  /** `bwrap` when children run inside bubblewrap, `none` when they run unconfined. */
  mode: "bwrap" | "none";
  /** Why children are unconfined; null when they are confined. */
  reason: string | null;
  /** Whether confined children may use the network. */
  network: boolean;
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

/** `path` is `dir` or lies inside it (both absolute and normalised). */
export function isWithin(dir: string, path: string): boolean {
  const rel = relative(dir, path);
  return rel === "" || (!rel.startsWith("..") && !isAbsolute(rel));
}

/**
 * The `bwrap` argument list that runs `spawn.command` confined.
 *
 * Later binds cover earlier ones, so the order is: system and Python read-only, a private
 * `/tmp`, the read-write directories, the state directory hidden (an empty read-only
 * directory) where it lies inside them, then the read-only directories, which may lie inside
 * the state directory (the release, the managed skills).
 *
 * @example
 * ```ts
 * const args = bwrapArgs(base, { command: python, args: ["-m", "klbr"], cwd: ws,
 *   readWrite: [ws], readOnly: [releasePath] });
 * new Deno.Command(base.bwrap, { args, ... });
 * ```
 */
export function bwrapArgs(base: SandboxBase, spawn: ConfinedSpawn): string[] {
  const args: string[] = [];
  for (const dir of SYSTEM_BINDS) args.push("--ro-bind-try", dir, dir);
  for (const file of ETC_BINDS) args.push("--ro-bind-try", file, file);
  for (const dir of base.readOnly) if (!isWithin("/usr", dir)) args.push("--ro-bind", dir, dir);
  args.push("--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp");
  const state = resolve(base.stateDir);
  const writable = spawn.readWrite.map((dir) => resolve(dir));
  for (const dir of writable) args.push("--bind", dir, dir);
  const hidden = writable.some((dir) => isWithin(dir, state));
  if (hidden) args.push("--tmpfs", state);
  for (const dir of spawn.readOnly.map((d) => resolve(d))) {
    if (writable.some((w) => isWithin(w, dir)) && !isWithin(state, dir)) continue;
    // A skills root may not exist yet; then there is nothing to see.
    args.push("--ro-bind-try", dir, dir);
  }
  if (hidden) args.push("--remount-ro", state);
  args.push("--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try");
  if (!base.network) args.push("--unshare-net");
  args.push("--die-with-parent", "--new-session", "--chdir", spawn.cwd);
  args.push("--", spawn.command, ...spawn.args);
  return args;
}

/** What {@linkcode probeSandbox} needs. */
export interface ProbeOptions {
  /** The bubblewrap executable. */
  bwrap: string;
  /** The Python interpreter the workbench runs (its real executable). */
  python: string;
  /** Directories the interpreter needs (its home). */
  readOnly: string[];
  /** Whether confined children keep the network. */
  network: boolean;
}

/**
 * Runs the interpreter once inside bubblewrap with the daemon's own arguments and reports
 * whether children can be confined here, and if not, why (missing, no namespaces, …).
 *
 * @example
 * ```ts
 * const status = await probeSandbox({ bwrap: "bwrap", python, readOnly: [], network: false });
 * if (status.mode === "none") console.warn(status.reason);
 * ```
 */
export async function probeSandbox(options: ProbeOptions): Promise<SandboxStatus> {
  const none = (reason: string): SandboxStatus => ({ mode: "none", reason, network: true });
  const args = bwrapArgs(
    { bwrap: options.bwrap, network: options.network, readOnly: options.readOnly, stateDir: "/" },
    {
      command: options.python,
      args: ["-I", "-c", "import os; print(os.getpid())"],
      cwd: "/tmp",
      readWrite: [],
      readOnly: [],
    },
  );
  let output: Deno.CommandOutput;
  try {
    output = await new Deno.Command(options.bwrap, {
      args,
      clearEnv: true,
      env: { PATH: "/usr/bin:/bin" },
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
  } catch (cause) {
    if (cause instanceof Deno.errors.NotFound) {
      return none(`bubblewrap is not installed (no ${options.bwrap}; Debian package bubblewrap)`);
    }
    if (cause instanceof Deno.errors.NotCapable || cause instanceof Deno.errors.PermissionDenied) {
      return none(`the daemon may not run ${options.bwrap} (${String(cause).slice(0, 200)})`);
    }
    return none(`${options.bwrap} did not start (${String(cause).slice(0, 200)})`);
  }
  const stderr = new TextDecoder().decode(output.stderr).trim().split("\n")[0] ?? "";
  const pid = new TextDecoder().decode(output.stdout).trim();
  if (!output.success) {
    return none(
      `${options.bwrap} cannot confine the workbench here (exit ${output.code}: ${
        stderr.slice(0, 300) || "no message"
      })`,
    );
  }
  // In a new PID namespace the first process is pid 1 or 2, never the host's pid.
  if (!/^[12]$/.test(pid)) {
    return none(`${options.bwrap} ran the probe outside a new PID namespace (pid ${pid})`);
  }
  return { mode: "bwrap", reason: null, network: options.network };
}

/**
 * Refuses to go on unconfined when the configuration says `sandbox "required"`.
 *
 * @throws {KlbrError} `sandbox_unavailable` naming why bubblewrap cannot confine children.
 */
export function requireSandbox(status: SandboxStatus, mode: "auto" | "required"): void {
  if (mode === "required" && status.mode !== "bwrap") {
    throw new KlbrError(
      "sandbox_unavailable",
      `cannot serve: the configuration says sandbox "required" but the workbench cannot be confined (got ${status.reason})`,
    );
  }
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
