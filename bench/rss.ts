/**
 * Resident set sizes of benchmarked processes, read with `ps` (Deno cannot read another
 * process's `/proc` entries without `-A`).
 *
 * @module
 */

import { basename } from "node:path";
import { KlbrError } from "../runtime/core/mod.ts";

/**
 * Returns the resident set size of `pid` in bytes (`ps -o rss=`, which reports KiB).
 *
 * @throws {KlbrError} `not_found` when no such process exists.
 * @example
 * ```ts
 * const bytes = await residentBytes(daemon.pid);
 * ```
 */
export async function residentBytes(pid: number): Promise<number> {
  const out = await new Deno.Command("ps", {
    args: ["-o", "rss=", "-p", String(pid)],
    stdout: "piped",
    stderr: "null",
  }).output();
  const kib = Number.parseInt(new TextDecoder().decode(out.stdout).trim(), 10);
  if (!out.success || !Number.isSafeInteger(kib)) {
    throw new KlbrError("not_found", `cannot read resident size: no process ${pid} (got ${pid})`);
  }
  return kib * 1024;
}

/**
 * Returns the Deno process that does the work under `pid`: `pid` itself, or, when `pid` is a
 * launcher that started Deno again (as `serve` may, to run the daemon under narrower
 * permissions), the deepest Deno process below it. Python workbenches are never chosen.
 *
 * @throws {KlbrError} `not_found` when `pid` is not running.
 * @example
 * ```ts
 * const daemonPid = await workingDenoPid(serveChild.pid);
 * ```
 */
export async function workingDenoPid(pid: number): Promise<number> {
  const out = await new Deno.Command("ps", {
    args: ["-e", "-o", "pid=,ppid=,comm="],
    stdout: "piped",
    stderr: "null",
  }).output();
  const deno = basename(Deno.execPath()).slice(0, 15);
  const children = new Map<number, { pid: number; comm: string }[]>();
  let found = false;
  for (const line of new TextDecoder().decode(out.stdout).split("\n")) {
    const match = line.trim().match(/^(\d+)\s+(\d+)\s+(.*)$/);
    if (match === null) continue;
    const [child, parent, comm] = [Number(match[1]), Number(match[2]), match[3].trim()];
    if (child === pid) found = true;
    const list = children.get(parent) ?? [];
    list.push({ pid: child, comm });
    children.set(parent, list);
  }
  if (!found) {
    throw new KlbrError(
      "not_found",
      `cannot find the daemon process: no process ${pid} (got ${pid})`,
    );
  }
  // Bounded: a process tree has no cycles, and the depth is capped anyway.
  let current = pid;
  for (let depth = 0; depth < 16; depth++) {
    const next = (children.get(current) ?? []).find((c) => c.comm === deno);
    if (next === undefined) return current;
    current = next.pid;
  }
  return current;
}
