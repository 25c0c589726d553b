/**
 * What `workspace.run` does: a program started from argv (never a shell) in the workspace, in
 * its own process group, with capped output, a timeout and cancellation cleanup. The host RPC
 * that serves it is `runtime/kernel/_workspace_rpc.ts`.
 *
 * The host owns the program's process group, so ending the run (timeout, a cancelled cell, a
 * replaced kernel) kills every descendant still in the group, and a replaced kernel can never
 * strand a build.
 *
 * @module
 */

import { Buffer } from "node:buffer";
import { z } from "zod";
import { describeIssues, KlbrError, RunParams, settlesWithin } from "../core/mod.ts";
import { resolveInWorkspace } from "./_paths.ts";
import {
  confinedCommand,
  type Jail,
  killProcessGroup,
  LIMIT_POLL_MS,
  type SandboxBase,
  spawnChild,
  watchLimits,
} from "../sandbox/mod.ts";

/** The fallback `PATH` when the host's own cannot be read. */
const FALLBACK_PATH = "/usr/local/bin:/usr/bin:/bin";
/** How long the output readers may keep going once the group is dead, before they are cut. */
const DRAIN_GRACE_MS = 2_000;

/** Options for {@linkcode runInWorkspace}; defaults live here. */
export const RunOptions = z.object({
  /** The workspace root; `cwd` is resolved inside it. */
  root: z.string().min(1),
  /** Aborting it (cell cancelled, kernel replaced) kills the program's process group. */
  signal: z.custom<AbortSignal>((v) => v instanceof AbortSignal).optional(),
  /** Bytes kept of each of stdout and stderr; the rest is drained and discarded. */
  outputCapBytes: z.number().int().nonnegative().default(1024 * 1024),
  /** The only variables the program sees besides `HOME` (= the root). */
  env: z.object({
    PATH: z.string().optional(),
    LANG: z.string().default("C.UTF-8"),
  }).strict().default({ LANG: "C.UTF-8" }),
  /** The programs `argv[0]` may name (`KLBR_RUN_PROGRAMS`); absent means any. */
  programs: z.array(z.string().min(1)).optional(),
  /** Directories a `cwd` may never be in (the state directory). */
  deny: z.array(z.string().min(1)).default([]),
  /** Runs the program inside bubblewrap with the root read-write. @default unconfined */
  sandbox: z.custom<SandboxBase>((v) => typeof v === "object" && v !== null).optional(),
});
/** Options for {@linkcode runInWorkspace}. */
export type RunOptions = z.input<typeof RunOptions>;

/** The result of a `workspace.run`, as the worker receives it. */
export interface RunResult {
  /** The exit code, or `null` when the program was ended by a signal (timeout, cancel). */
  exit_code: number | null;
  /** Captured stdout, base64, at most `outputCapBytes` bytes before encoding. */
  stdout_b64: string;
  /** Captured stderr, base64, at most `outputCapBytes` bytes before encoding. */
  stderr_b64: string;
  /** Whether stdout had more bytes than the cap (the rest were discarded). */
  stdout_truncated: boolean;
  /** Whether stderr had more bytes than the cap (the rest were discarded). */
  stderr_truncated: boolean;
  /** Whether the timeout ended the program. */
  timed_out: boolean;
  /** Wall time from spawn to the group's end, in milliseconds. */
  duration_ms: number;
}

/** Reads a stream to its end, keeping the first `cap` bytes and discarding the rest. */
async function readCapped(
  reader: ReadableStreamDefaultReader<Uint8Array>,
  cap: number,
): Promise<{ bytes: Uint8Array; truncated: boolean }> {
  const kept: Uint8Array[] = [];
  let length = 0;
  let truncated = false;
  try {
    // Ends when every holder of the pipe has closed it or the reader is cancelled.
    while (true) {
      const { done, value } = await reader.read();
      if (done) break;
      const room = cap - length;
      if (value.length > room) truncated = true;
      if (room > 0) {
        const part = value.subarray(0, Math.min(room, value.length));
        kept.push(part.slice());
        length += part.length;
      }
    }
  } catch {
    // A cancelled reader ends the capture; what was kept stands.
  }
  return { bytes: Buffer.concat(kept, length), truncated };
}

/** What bwrap itself reported when it could not start the program inside the sandbox. */
function execFailureInSandbox(stderr: Uint8Array): "missing" | "not_executable" | null {
  const text = new TextDecoder().decode(stderr.subarray(0, 512));
  const found = /^bwrap: execvp [^\n]*: (No such file or directory|Permission denied)\n?$/.exec(
    text,
  );
  if (found === null) return null;
  return found[1] === "Permission denied" ? "not_executable" : "missing";
}

/** The text after `cannot ` for a program that is a directory or not executable. */
function notExecutableText(program: string): string {
  return `run: the program is a directory or lacks the execute permission (got ${
    JSON.stringify(program)
  }); chmod +x a script, or name its interpreter first (["sh", "build.sh"])`;
}

function toBase64(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("base64");
}

/**
 * `path` without its empty, `.` and other relative entries: a lookup through one (bwrap's
 * `execvp` inside the sandbox) searches the working directory, the workspace, where a cell may
 * leave a file named like a listed program.
 */
function absoluteEntries(path: string): string {
  return path.split(":").filter((dir) => dir.startsWith("/")).join(":");
}

function hostPath(): string {
  try {
    return Deno.env.get("PATH") ?? FALLBACK_PATH;
  } catch {
    return FALLBACK_PATH; // no --allow-env for PATH
  }
}

/**
 * Runs a program from argv in the workspace and returns its capped output.
 *
 * The program runs with a cleared environment (`PATH`, `HOME` = the root, `LANG` only), stdin
 * on `/dev/null`, in its own process group. On return that group is dead: a timeout, an
 * aborted `signal`, or the leader's own exit with descendants left behind all end in SIGKILL
 * to the group. `exit_code` is `null` when the program was killed by a signal. An aborted
 * run resolves like a finished one, with `exit_code: null` and `timed_out: false`.
 *
 * @throws {KlbrError} `invalid_input` when `params` or `options` fail their schema;
 * `path_escape`, `not_found` or `path_invalid` for a bad `cwd`; `not_found` naming `argv[0]`
 * when the program does not exist; `path_invalid` naming it when it is a directory or not
 * executable; `forbidden` when the host may not run it; `limit_reached` when the confined
 * program's tree reached its process or memory limit (its group is killed).
 * @example
 * ```ts
 * const r = await runInWorkspace({ argv: ["git", "status"], timeout_s: 30 }, { root: ws });
 * console.log(r.exit_code, atob(r.stdout_b64));
 * ```
 */
export async function runInWorkspace(
  params: z.input<typeof RunParams>,
  options: RunOptions,
): Promise<RunResult> {
  const { argv, timeout_s: timeoutS, cwd, options: o } = checkRun(params, options);
  const { realRoot, real: dir } = await resolveInWorkspace(o.root, cwd, {
    action: "run",
    label: "cwd",
    expect: "directory",
    deny: o.deny,
  });
  if (o.signal?.aborted) return emptyResult();

  const started = performance.now();
  const { child, jail } = spawnRun(argv, { dir, realRoot, env: o.env, sandbox: o.sandbox });
  const outReader = child.stdout.getReader();
  const errReader = child.stderr.getReader();
  const out = readCapped(outReader, o.outputCapBytes);
  const err = readCapped(errReader, o.outputCapBytes);
  const limit = new AbortController();
  let hit: string | null = null;
  const watch = watchLimits(jail, (phrase) => {
    hit = phrase;
    limit.abort();
  });
  const signal = o.signal === undefined ? limit.signal : AbortSignal.any([o.signal, limit.signal]);
  const { status, timedOut } = await groupEnd(child, timeoutS, signal).finally(() => watch.stop());
  const [stdout, stderr] = await drain([outReader, errReader], Promise.all([out, err]));
  hit ??= jail !== null && performance.now() - started >= LIMIT_POLL_MS
    ? await jail.breach()
    : null;
  await jail?.release();
  if (hit !== null) {
    throw new KlbrError(
      "limit_reached",
      `cannot run: the program ${hit}, and its processes were killed (got ${
        JSON.stringify(argv[0])
      })`,
    );
  }
  const execFailure = o.sandbox !== undefined && status.code === 1
    ? execFailureInSandbox(stderr.bytes)
    : null;
  if (execFailure === "missing") {
    throw new KlbrError(
      "not_found",
      `cannot run: program not found on PATH or at that path (got ${JSON.stringify(argv[0])})`,
    );
  }
  if (execFailure === "not_executable") {
    throw new KlbrError("path_invalid", `cannot ${notExecutableText(argv[0])}`);
  }
  return {
    exit_code: status.signal === null ? status.code : null,
    stdout_b64: toBase64(stdout.bytes),
    stderr_b64: toBase64(stderr.bytes),
    stdout_truncated: stdout.truncated,
    stderr_truncated: stderr.truncated,
    timed_out: timedOut,
    duration_ms: Math.round(performance.now() - started),
  };
}

/** Validates the params and options of a run, and that the host may start `argv[0]`. */
function checkRun(params: z.input<typeof RunParams>, options: RunOptions) {
  const p = RunParams.safeParse(params);
  if (!p.success) {
    throw new KlbrError(
      "invalid_input",
      `cannot run: ${describeIssues(p.error)} (got ${JSON.stringify(params)})`,
    );
  }
  const o = RunOptions.safeParse(options);
  if (!o.success) {
    throw new KlbrError("invalid_input", `cannot run: options ${describeIssues(o.error)}`);
  }
  const { programs } = o.data;
  if (programs !== undefined && !programs.includes(p.data.argv[0])) {
    throw new KlbrError(
      "forbidden",
      `cannot run: the host may not start this program (got ${
        JSON.stringify(p.data.argv[0])
      }); KLBR_RUN_PROGRAMS allows ${programs.join(", ")}`,
    );
  }
  return { ...p.data, options: o.data };
}

/** The result of a run that never started: its signal was aborted first. */
function emptyResult(): RunResult {
  return {
    exit_code: null,
    stdout_b64: "",
    stderr_b64: "",
    stdout_truncated: false,
    stderr_truncated: false,
    timed_out: false,
    duration_ms: 0,
  };
}

/** Starts the program as the leader of its own process group, confined when `sandbox` is set. */
function spawnRun(
  argv: string[],
  at: {
    dir: string;
    realRoot: string;
    env: z.output<typeof RunOptions>["env"];
    sandbox: SandboxBase | undefined;
  },
): { child: Deno.ChildProcess; jail: Jail | null } {
  const { dir, realRoot, env, sandbox } = at;
  // Confined, the program is looked up on PATH inside the sandbox, by bwrap.
  const { program, args, jail } = sandbox === undefined
    ? { program: argv[0], args: argv.slice(1), jail: null }
    : confinedCommand(sandbox, {
      command: argv[0],
      args: argv.slice(1),
      cwd: dir,
      readWrite: [realRoot],
      readOnly: [],
    });
  const child = spawnChild(program, {
    args,
    cwd: dir,
    clearEnv: true,
    // No bytecode cache: CPython trusts a .pyc whose source has the same size and mtime second,
    // so a test run right after a same-size `code.patch` could run the old code.
    env: {
      PATH: absoluteEntries(env.PATH ?? hostPath()),
      HOME: realRoot,
      LANG: env.LANG,
      PYTHONDONTWRITEBYTECODE: "1",
    },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
    detached: true,
  }, {
    notFound: `run: program not found on PATH or at that path (got ${JSON.stringify(argv[0])})`,
    notExecutable: notExecutableText(argv[0]),
    forbidden: `run: the host may not start this program (got ${JSON.stringify(argv[0])})`,
    other: `run: spawn failed (got ${JSON.stringify(argv[0])})`,
  });
  return { child, jail };
}

/**
 * Waits for the leader to exit, killing the group at the timeout or on `signal`; on return
 * the whole group is dead.
 */
async function groupEnd(
  child: Deno.ChildProcess,
  timeoutS: number,
  signal: AbortSignal | undefined,
): Promise<{ status: Deno.CommandStatus; timedOut: boolean }> {
  const pgid = child.pid;
  let timedOut = false;
  const killGroup = () => killProcessGroup(pgid).catch(() => {});
  const timer = setTimeout(() => {
    timedOut = true;
    killGroup();
  }, timeoutS * 1000);
  const onAbort = () => void killGroup();
  signal?.addEventListener("abort", onAbort, { once: true });
  let status: Deno.CommandStatus;
  try {
    status = await child.status;
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener("abort", onAbort);
  }
  // The leader is gone; anything left in its group (a background job) dies with the run.
  await killGroup();
  return { status, timedOut };
}

/**
 * Waits for both captures to end; a descendant that left the group may still hold a pipe
 * open, so after the grace the readers are cut off and what they kept stands.
 */
async function drain<T>(
  readers: ReadableStreamDefaultReader<Uint8Array>[],
  drained: Promise<T>,
): Promise<T> {
  if (!(await settlesWithin(drained, DRAIN_GRACE_MS))) {
    for (const reader of readers) reader.cancel().catch(() => {});
  }
  return await drained;
}
