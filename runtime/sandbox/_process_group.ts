/**
 * Killing and inspecting a child's process group.
 *
 * Children that klbr owns (the workbench, a `workspace.run` program) are spawned with
 * `Deno.Command({ detached: true })`, which makes each one the leader of a new process group
 * (pgid = pid). Killing the group reaches every descendant that stayed in it, which
 * `child.kill()` does not. `Deno.kill(-pgid)` would need unscoped `--allow-run`, so the group
 * is killed by running `kill -KILL -- -<pgid>`, which works under `--allow-run=python3,kill`.
 *
 * Membership is read with `ps` rather than from `/proc`: Deno refuses every read under
 * `/proc` without `--allow-all`. `ps` and `kill` ship together (procps); only the
 * diagnostics ({@linkcode processGroupMembers}) need `ps` in `--allow-run`.
 *
 * @module
 */

import { KlbrError } from "../core/mod.ts";
import { spawnFailure } from "./_spawn_child.ts";

function checkPgid(action: string, pgid: number): void {
  if (!Number.isSafeInteger(pgid) || pgid <= 1) {
    throw new KlbrError(
      "invalid_input",
      `cannot ${action}: a process group id must be an integer above 1 (got ${pgid})`,
    );
  }
}

/**
 * Lists `pid pgid stat` of every process with `ps`: Deno refuses reads under `/proc` without
 * `--allow-all`, and a child process is outside its sandbox. `ps` ships with `kill` (procps).
 */
async function listProcesses(
  action: string,
): Promise<{ pid: number; pgrp: number; state: string }[]> {
  let output: Deno.CommandOutput;
  try {
    output = await new Deno.Command("ps", {
      args: ["-e", "-o", "pid=,pgid=,stat="],
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
  } catch (cause) {
    throw spawnFailure(cause, {
      forbidden: `${action}: "ps" is not permitted; add it to --allow-run (got ${String(cause)})`,
      other: `${action}: "ps" did not start (got ${String(cause)})`,
    });
  }
  if (!output.success) {
    throw new KlbrError(
      "internal",
      `cannot ${action}: ps exited with ${output.code} (got ${
        JSON.stringify(new TextDecoder().decode(output.stderr).trim().slice(0, 200))
      })`,
    );
  }
  const rows = [];
  for (const line of new TextDecoder().decode(output.stdout).split("\n")) {
    const [pid, pgrp, state] = line.trim().split(/\s+/);
    if (pid && pgrp && state) rows.push({ pid: Number(pid), pgrp: Number(pgrp), state });
  }
  return rows;
}

/**
 * Lists the live processes whose process group is `pgid` (as `ps` reports them).
 *
 * Zombies (state `Z`, `X`) are left out: they have ended and only wait to be reaped.
 *
 * @throws {KlbrError} `invalid_input` when `pgid` is not an integer above 1; `forbidden`
 * when running `ps` is not permitted.
 * @example
 * ```ts
 * const pids = await processGroupMembers(child.pid); // [] once the group is gone
 * ```
 */
export async function processGroupMembers(pgid: number): Promise<number[]> {
  checkPgid("list process group", pgid);
  return (await listProcesses("list process group"))
    .filter((p) => p.pgrp === pgid && !p.state.startsWith("Z") && !p.state.startsWith("X"))
    .map((p) => p.pid)
    .sort((a, b) => a - b);
}

let ownGroup: Promise<number | null> | null = null;

/**
 * This process's own group (looked up once), so a bug can never kill the host itself.
 * Without `ps` permission the lookup gives null and only the `pgid > 1` rule guards.
 */
function ownProcessGroup(): Promise<number | null> {
  ownGroup ??= listProcesses("find own process group").then(
    (rows) => rows.find((p) => p.pid === Deno.pid)?.pgrp ?? null,
    () => null,
  );
  return ownGroup;
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
  if (pgid === await ownProcessGroup()) {
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
    throw spawnFailure(cause, {
      forbidden:
        `kill process group: running "kill" is not permitted; add it to --allow-run (got ${pgid})`,
      other: `kill process group: "kill" did not start (got ${pgid})`,
    });
  }
  if (output.success) return;
  const stderr = new TextDecoder().decode(output.stderr).trim();
  // kill reports a vanished group as "No such process"; the group is gone, which is the goal.
  if (/no such process/i.test(stderr)) return;
  throw new KlbrError(
    "internal",
    `cannot kill process group: kill exited with ${output.code}: ${stderr} (got ${pgid})`,
  );
}
