/**
 * CPU time spent by benchmarked processes: a rate per CPU-second does not depend on how many
 * other processes share the machine's cores, where a rate per wall-clock second does.
 *
 * @module
 */

import { KlbrError } from "../runtime/core/mod.ts";

/** Clock ticks a second in `/proc/<pid>/stat` (`USER_HZ`, 100 on Linux). */
const TICKS_PER_SECOND = 100;

/**
 * Returns the user + system CPU time `pid` has used so far, in ms (10 ms resolution), read
 * with `cat /proc/<pid>/stat` (Deno reads another process's `/proc` entries only with `-A`).
 *
 * @throws {KlbrError} `not_found` when no such process exists.
 * @example
 * ```ts
 * const before = await cpuMs(daemonPid);
 * ```
 */
export async function cpuMs(pid: number): Promise<number> {
  const out = await new Deno.Command("cat", {
    args: [`/proc/${pid}/stat`],
    stdout: "piped",
    stderr: "null",
  }).output();
  const text = new TextDecoder().decode(out.stdout);
  // Fields after the command name, which is in parentheses and may hold spaces.
  const fields = text.slice(text.lastIndexOf(")") + 2).split(" ");
  const ticks = Number(fields[11]) + Number(fields[12]);
  if (!out.success || !Number.isSafeInteger(ticks)) {
    throw new KlbrError("not_found", `cannot read CPU time: no process ${pid} (got ${pid})`);
  }
  return ticks * 1000 / TICKS_PER_SECOND;
}
