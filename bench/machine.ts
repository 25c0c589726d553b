/**
 * What machine a benchmark ran on: versions, CPUs, memory and operating system.
 *
 * @module
 */

import { resolvePython } from "../runtime/kernel/mod.ts";
import { linkedSqliteVersion } from "../store/version_guard.ts";

/** The machine and software a report's figures came from. */
export interface MachineInfo {
  deno: string;
  v8: string;
  typescript: string;
  /** The SQLite `node:sqlite` links. */
  sqlite: string;
  /** The workbench interpreter, e.g. `Python 3.11.7 (/usr/bin/python3)`. */
  python: string;
  /** Logical CPUs (`nproc`). */
  cpus: number;
  /** `lscpu`'s model name, or `unknown`. */
  cpuModel: string;
  /** Total memory in bytes. */
  memoryBytes: number;
  /** e.g. `linux x86_64 6.1.0`. */
  os: string;
}

/**
 * Describes this machine. Never throws: a part that cannot be read is reported as `unknown`.
 *
 * @example
 * ```ts
 * const machine = await describeMachine();
 * console.log(machine.cpuModel);
 * ```
 */
export async function describeMachine(): Promise<MachineInfo> {
  let python = "unknown";
  try {
    const info = await resolvePython("python3");
    python = `Python ${info.version} (${info.executable})`;
  } catch (error) {
    python = `unknown (${error instanceof Error ? error.message : error})`;
  }
  return {
    deno: Deno.version.deno,
    v8: Deno.version.v8,
    typescript: Deno.version.typescript,
    sqlite: linkedSqliteVersion(),
    python,
    cpus: navigator.hardwareConcurrency,
    cpuModel: await cpuModel(),
    memoryBytes: Deno.systemMemoryInfo().total,
    os: `${Deno.build.os} ${Deno.build.arch} ${Deno.osRelease()}`,
  };
}

async function cpuModel(): Promise<string> {
  try {
    const out = await new Deno.Command("lscpu", { stdout: "piped", stderr: "null" }).output();
    const line = new TextDecoder().decode(out.stdout).split("\n")
      .find((l) => l.startsWith("Model name:"));
    return line?.slice("Model name:".length).trim() || "unknown";
  } catch {
    return "unknown";
  }
}
