/**
 * Killing and inspecting a child's process group.
 *
 * Children that klbr owns (the workbench, a `workspace.run` program) are spawned with
 * `Deno.Command({ detached: true })`, which makes each one the leader of a new process group
 * (pgid = pid). Killing the group reaches every descendant that stayed in it, which
 * `child.kill()` does not. `Deno.kill(-pgid)` would need unscoped `--allow-run`, so the group
 * is killed by running `kill -KILL -- -<pgid>`, which works under `--allow-run=python3,kill`.
 *
 * @module
 */

import { KlbrError } from "./errors.ts";

const PROC = "/proc";
/** Upper bound on `/proc` entries scanned, so a scan always ends. */
const MAX_PROC_ENTRIES = 1_000_000;

function checkPgid(action: string, pgid: number): void {
  if (!Number.isSafeInteger(pgid) || pgid <= 1) {
    throw new KlbrError(
      "invalid_input",
      `cannot ${action}: a process group id must be an integer above 1 (got ${pgid})`,
    );
  }
}

/** Reads one `/proc/<pid>/stat` and returns its state letter and process group, if readable. */
function readStat(pid: string): { state: string; pgrp: number } | null {
  let text: string;
  try {
    text = Deno.readTextFileSync(`${PROC}/${pid}/stat`);
  } catch {
    return null; // the process ended between listing and reading
  }
  // The command name is in parentheses and may itself contain spaces and parentheses.
  const close = text.lastIndexOf(")");
  if (close < 0) return null;
  const fields = text.slice(close + 2).split(" ");
  const pgrp = Number(fields[2]);
  return Number.isInteger(pgrp) ? { state: fields[0], pgrp } : null;
}

/**
 * Lists the live processes whose process group is `pgid`, read from `/proc`.
 *
 * Zombies (state `Z`, `X`) are left out: they have ended and only wait to be reaped.
 *
 * @throws {KlbrError} `invalid_input` when `pgid` is not an integer above 1.
 * @example
 * ```ts
 * const pids = processGroupMembers(child.pid); // [] once the group is gone
 * ```
 */
export function processGroupMembers(pgid: number): number[] {
  checkPgid("list process group", pgid);
  const members: number[] = [];
  let seen = 0;
  for (const entry of Deno.readDirSync(PROC)) {
    if (++seen > MAX_PROC_ENTRIES) break;
    if (!/^\d+$/.test(entry.name)) continue;
    const stat = readStat(entry.name);
    if (stat === null || stat.pgrp !== pgid || stat.state === "Z" || stat.state === "X") {
      continue;
    }
    members.push(Number(entry.name));
  }
  return members.sort((a, b) => a - b);
}

/**
 * Returns whether any live (non-zombie) process is still in process group `pgid`.
 *
 * @throws {KlbrError} `invalid_input` when `pgid` is not an integer above 1.
 */
export function processGroupAlive(pgid: number): boolean {
  return processGroupMembers(pgid).length > 0;
}

/** This process's own process group, so it can never be killed by mistake. */
function ownProcessGroup(): number | null {
  return readStat(String(Deno.pid))?.pgrp ?? null;
}

/**
 * Sends SIGKILL to every process in group `pgid` by running `kill -KILL -- -<pgid>`.
 *
 * Idempotent: a group that no longer exists is not an error. On return the signal has been
 * delivered; the leader still has to be reaped by whoever spawned it.
 *
 * @throws {KlbrError} `invalid_input` when `pgid` is not an integer above 1 or is this
 * process's own group; `forbidden` when running `kill` is not permitted; `internal` when
 * `kill` fails for another reason.
 * @example
 * ```ts
 * const child = new Deno.Command("sh", { args: ["-c", "sleep 1000"], detached: true }).spawn();
 * await killProcessGroup(child.pid);
 * ```
 */
export async function killProcessGroup(pgid: number): Promise<void> {
  checkPgid("kill process group", pgid);
  if (pgid === ownProcessGroup()) {
    throw new KlbrError(
      "invalid_input",
      `cannot kill process group: it is this process's own group (got ${pgid})`,
    );
  }
  let output: Deno.CommandOutput;
  try {
    output = await new Deno.Command("kill", {
      args: ["-KILL", "--", `-${pgid}`],
      stdin: "null",
      stdout: "null",
      stderr: "piped",
    }).output();
  } catch (cause) {
    if (cause instanceof Deno.errors.NotCapable || cause instanceof Deno.errors.PermissionDenied) {
      throw new KlbrError(
        "forbidden",
        `cannot kill process group: running "kill" is not permitted; add it to --allow-run (got ${pgid})`,
        { cause },
      );
    }
    throw new KlbrError(
      "internal",
      `cannot kill process group: "kill" did not start (got ${pgid})`,
      {
        cause,
      },
    );
  }
  if (output.success) return;
  const stderr = new TextDecoder().decode(output.stderr).trim();
  // kill reports a vanished group as "No such process"; the group is gone, which is the goal.
  if (/no such process/i.test(stderr) || !processGroupAlive(pgid)) return;
  throw new KlbrError(
    "internal",
    `cannot kill process group: kill exited with ${output.code}: ${stderr} (got ${pgid})`,
  );
}
