/**
 * `klbr doctor`'s entry: its checks (`_doctor_checks.ts`, with the store, the lanes, the model
 * and Discord) load when doctor runs, not with this folder's face, which `serve` loads too.
 *
 * @module
 */

import type { DoctorOptions } from "./_doctor_checks.ts";
import { later } from "./_later.ts";

export type { DoctorOptions } from "./_doctor_checks.ts";

/**
 * Runs every check and prints the report; resolves with 0 when nothing is a problem (warnings
 * allowed), else 1.
 *
 * @example
 * ```ts
 * Deno.exit(await runDoctor({ stateDir: ".klbr" }));
 * ```
 */
export async function runDoctor(options: DoctorOptions): Promise<number> {
  const { runDoctor: run } = await later("./_doctor_checks.ts");
  return await run(options);
}
