/**
 * How a patch puts its bytes on disk: a temp file beside the file, renamed over it. Where the
 * daemon confines its cells, a short-lived process confined as a cell's `workspace.run` is (the
 * workspace read-write, the git hooks and config and klbr's own code read-only, nothing else
 * seen) creates, writes and renames the temp file, by names relative to the file's directory:
 * the host writes as the owner (root as a service) after checking the file's real path, and a
 * cell that swaps a directory on that path for a link meanwhile can then only carry the write
 * where it could write itself. Where cells are unconfined there is no boundary to keep, and
 * the host writes by path.
 *
 * @module
 */

import { closeSync, constants, fchmodSync, fsyncSync, openSync, writeSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { confinedCommand, type SandboxBase, spawnChild } from "../sandbox/mod.ts";

/** How long one confined write, rename or removal may take before it is killed. */
const CONFINED_TIMEOUT_MS = 60_000;

/** Puts a patch's files on disk; each step throws when it did not happen. */
export interface FileWriter {
  /** Writes `bytes` to a new temp file beside `real`, with its permission bits, fsynced;
   * returns the temp file's path. */
  temp(real: string, bytes: Uint8Array): Promise<string>;
  /** Renames the temp file `temp` (beside `real`) over `real`. */
  rename(temp: string, real: string): Promise<void>;
  /** Removes the temp file `temp`, if it is there. */
  remove(temp: string): Promise<void>;
}

/** The writer of a workspace at `root`: confined by `sandbox` when there is one. */
export function fileWriter(root: string, sandbox: SandboxBase | null): FileWriter {
  return sandbox === null ? HOST_WRITER : confinedWriter(root, sandbox);
}

/** A temp file's path beside `real`: hidden, named after it, never one already made. */
function tempBeside(real: string): string {
  return join(dirname(real), `.${basename(real)}.klbr-${crypto.randomUUID()}.tmp`);
}

/**
 * The permission bits of `real`: a setuid, setgid or sticky bit a cell set on its file is not
 * given to a file the host (the owner, root as a service) makes.
 */
function permissionBits(real: string): number {
  return (Deno.statSync(real).mode ?? 0o644) & 0o777;
}

/** `open(2)` flags of a temp file: write only, made new, never through a link at its name. */
const CREATE_NEW = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;

/** The host's own writes, by path: for a daemon whose cells are not confined. */
const HOST_WRITER: FileWriter = {
  // Made new, never through a link a cell left at its name; its mode is set on the descriptor,
  // not by name, which a cell could swap for a link meanwhile (the open's mode meets the umask).
  temp(real, bytes) {
    const temp = tempBeside(real);
    const mode = permissionBits(real);
    const fd = openSync(temp, CREATE_NEW, mode);
    try {
      fchmodSync(fd, mode);
      for (let at = 0; at < bytes.length;) at += writeSync(fd, bytes, at);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    return Promise.resolve(temp);
  },
  rename: (temp, real) => Deno.rename(temp, real),
  remove: (temp) => Deno.remove(temp).catch(() => {}),
};

// Each script runs in the file's directory with one-name arguments. `set -C` refuses a name
// already there (a link a cell left), and a failed write leaves no temp file; `mv -T` never
// moves into a directory put at the name.
const WRITE_TEMP =
  'set -C; umask 077; { cat > "$1" && chmod "$2" "$1" && sync "$1"; } || { rm -f -- "$1"; exit 1; }';
const RENAME = 'mv -fT -- "$1" "$2"';
const REMOVE = 'rm -f -- "$1"';

/** Writes through a process confined as a cell's `workspace.run` is, in the file's directory. */
function confinedWriter(root: string, sandbox: SandboxBase): FileWriter {
  const run = (dir: string, script: string, args: string[], stdin?: Uint8Array) =>
    runConfined(sandbox, { root: Deno.realPathSync(root), dir, script, args, stdin });
  return {
    async temp(real, bytes) {
      const temp = tempBeside(real);
      const mode = permissionBits(real).toString(8);
      await run(dirname(real), WRITE_TEMP, [basename(temp), mode], bytes);
      return temp;
    },
    rename: (temp, real) => run(dirname(real), RENAME, [basename(temp), basename(real)]),
    remove: (temp) => run(dirname(temp), REMOVE, [basename(temp)]).catch(() => {}),
  };
}

/** Runs `/bin/sh -c script` confined, the workspace `root` read-write, in `dir`, fed `stdin`. */
async function runConfined(
  sandbox: SandboxBase,
  o: { root: string; dir: string; script: string; args: string[]; stdin?: Uint8Array },
): Promise<void> {
  const { program, args, jail } = confinedCommand(sandbox, {
    command: "/bin/sh",
    args: ["-c", o.script, "klbr-patch", ...o.args],
    cwd: o.dir,
    readWrite: [o.root],
    readOnly: [],
  });
  try {
    const child = spawnChild(program, {
      args,
      cwd: o.root,
      clearEnv: true,
      env: { PATH: "/usr/bin:/bin", LANG: "C.UTF-8" },
      stdin: "piped",
      stdout: "null",
      stderr: "piped",
      signal: AbortSignal.timeout(CONFINED_TIMEOUT_MS),
    }, {
      forbidden: "patch: the host may not start its confined writer (/bin/sh)",
      other: "patch: the confined writer did not start",
    });
    const stderr = new Response(child.stderr).text();
    const writer = child.stdin.getWriter();
    // A writer that failed early (its directory gone) closes its input: its status says why.
    await writer.write(o.stdin ?? new Uint8Array()).then(() => writer.close()).catch(() => {});
    const [status, said] = await Promise.all([child.status, stderr]);
    if (!status.success) {
      throw new Error(`the confined writer exited with ${status.code}: ${said.trim()}`);
    }
  } finally {
    await jail?.release();
  }
}
