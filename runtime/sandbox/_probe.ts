/**
 * Finding out whether, and how, children can be confined here: the launcher's probe runs the
 * interpreter inside bubblewrap with a user namespace (else, as root, without one), every
 * capability dropped and the seccomp filter; the daemon's cell probe reads what a confined
 * process really has (`/proc/self/status`: uid, capabilities, `no_new_privs`, seccomp) through
 * the very wrapper its children start with, cgroup included.
 *
 * @module
 */

import { KlbrError } from "../core/mod.ts";
import { confinedCommand } from "./_confine.ts";
import { bwrapArgs, type SandboxBase, type SandboxStatus } from "./_sandbox.ts";
import { seccompBytes } from "./_seccomp.ts";
import { SHELL, WRAPPER } from "./_shell.ts";

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

/** One run of the probe: how it ended and what it said. */
interface Attempt {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the interpreter confined once, the filter fed on stdin (the launcher writes no file). */
async function attempt(options: ProbeOptions, userns: boolean): Promise<Attempt> {
  const base: SandboxBase = {
    bwrap: options.bwrap,
    network: options.network,
    readOnly: options.readOnly,
    stateDir: "/",
    userns,
    seccomp: "/dev/stdin",
    protect: [],
    limits: null,
  };
  const args = bwrapArgs(base, {
    command: options.python,
    args: ["-I", "-c", "import os; print(os.getpid())"],
    cwd: "/tmp",
    readWrite: [],
    readOnly: [],
  });
  const child = new Deno.Command(SHELL, {
    args: ["-c", WRAPPER, "klbr-probe", "/dev/stdin", "0", "--", options.bwrap, ...args],
    clearEnv: true,
    env: { PATH: "/usr/bin:/bin" },
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const writer = child.stdin.getWriter();
  await writer.write(seccompBytes()).catch(() => {});
  await writer.close().catch(() => {});
  const output = await child.output();
  const decode = (bytes: Uint8Array) => new TextDecoder().decode(bytes).trim();
  return { code: output.code, stdout: decode(output.stdout), stderr: decode(output.stderr) };
}

/** Why an attempt failed, in one sentence naming the fix where there is one. */
function failure(options: ProbeOptions, run: Attempt): string {
  const first = run.stderr.split("\n")[0] ?? "";
  if (run.code === 127 && /not found/.test(first)) {
    return `bubblewrap is not installed (no ${options.bwrap}; Debian package bubblewrap)`;
  }
  if (/execvp .*: No such file or directory/.test(first)) {
    return `the interpreter ${options.python} cannot be started inside the sandbox (${first}); ` +
      `set KLBR_PYTHON to an interpreter under /usr or to its real path`;
  }
  return `${options.bwrap} cannot confine the workbench here (exit ${run.code}: ${
    first.slice(0, 300) || "no message"
  })`;
}

/**
 * Runs the interpreter once inside bubblewrap with the daemon's own arguments — a user
 * namespace first, and where that fails, uid 0 with every capability dropped — and reports
 * whether children can be confined here, and if not, why (missing, no namespaces, …).
 *
 * @example
 * ```ts
 * const status = await probeSandbox({ bwrap: "bwrap", python, readOnly: [], network: false });
 * if (status.mode === "none") console.warn(status.reason);
 * ```
 */
export async function probeSandbox(options: ProbeOptions): Promise<SandboxStatus> {
  const none = (reason: string): SandboxStatus => ({
    mode: "none",
    reason,
    network: true,
    userns: false,
    usernsReason: null,
  });
  let run: Attempt;
  let withoutUserns: Attempt | null = null;
  try {
    run = await attempt(options, true);
    // Only a refused user namespace is worth a second try (as root, without one).
    if (run.code !== 0 && /namespace|uid map|setgroups/i.test(run.stderr)) {
      withoutUserns = await attempt(options, false);
    }
  } catch (cause) {
    if (cause instanceof Deno.errors.NotCapable || cause instanceof Deno.errors.PermissionDenied) {
      return none(`the daemon may not run ${SHELL} (${String(cause).slice(0, 200)})`);
    }
    return none(`${SHELL} did not start (${String(cause).slice(0, 200)})`);
  }
  const used = withoutUserns?.code === 0 ? withoutUserns : run;
  if (used.code !== 0) return none(failure(options, run));
  // In a new PID namespace the first process is pid 1 or 2, never the host's pid.
  if (!/^[12]$/.test(used.stdout)) {
    return none(`${options.bwrap} ran the probe outside a new PID namespace (pid ${used.stdout})`);
  }
  return {
    mode: "bwrap",
    reason: null,
    network: options.network,
    userns: used === run,
    usernsReason: used === run
      ? null
      : `user namespaces are unavailable (${
        run.stderr.split("\n")[0]?.slice(0, 200) || `exit ${run.code}`
      }); cells keep uid 0 with every capability dropped`,
  };
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

/** What a confined process has, as `/proc/self/status` says inside the sandbox. */
export interface CellView {
  /** Its uid inside. */
  uid: number;
  /** Its effective, permitted and bounding capability sets (hex, as the kernel prints them). */
  capEff: string;
  capPrm: string;
  capBnd: string;
  /** Whether `no_new_privs` is set. */
  noNewPrivs: boolean;
  /** Whether a seccomp filter applies (mode 2). */
  seccomp: boolean;
}

/**
 * Runs `cat /proc/self/status` confined exactly as a cell is (wrapper, cgroup, bubblewrap,
 * seccomp) and returns what it has; its tree's cgroup is removed again.
 *
 * @throws {KlbrError} `sandbox_unavailable` when the confined process does not run, naming
 * what it said (a cgroup that cannot be joined, say).
 * @example
 * ```ts
 * const view = await probeCell(base); // view.capEff === "0000000000000000"
 * ```
 */
export async function probeCell(base: SandboxBase): Promise<CellView> {
  const { program, args, jail } = confinedCommand(base, {
    command: "cat",
    args: ["/proc/self/status"],
    cwd: "/",
    readWrite: [],
    readOnly: [],
  });
  try {
    const output = await new Deno.Command(program, {
      args,
      clearEnv: true,
      env: { PATH: "/usr/bin:/bin" },
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
    const text = new TextDecoder().decode(output.stdout);
    const field = (name: string) => new RegExp(`^${name}:\\s*(\\S+)`, "m").exec(text)?.[1];
    const capEff = field("CapEff");
    if (!output.success || capEff === undefined) {
      const said = new TextDecoder().decode(output.stderr).trim().split("\n")[0] ?? "";
      throw new KlbrError(
        "sandbox_unavailable",
        `cannot confine a cell: the confined probe failed (got exit ${output.code}: ${
          said.slice(0, 300) || "no message"
        })`,
      );
    }
    return {
      uid: Number(field("Uid")),
      capEff,
      capPrm: field("CapPrm") ?? "",
      capBnd: field("CapBnd") ?? "",
      noNewPrivs: field("NoNewPrivs") === "1",
      seccomp: field("Seccomp") === "2",
    };
  } finally {
    await jail?.release();
  }
}
