/**
 * `deno task bench`: measures klbr's figures — admission, cell round trip, replay, start-up
 * and memory — each against a ceiling or peer measured in the same run, and prints one table
 * (`--json`: the same report as JSON). Goals are reported, never asserted.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { runBench } from "./run_bench.ts";
import { formatTable } from "./table.ts";

const USAGE = `usage: deno task bench [--quick] [--json]

  --quick     smaller counts: the same figures in about a minute, noisier
  --json      print the report as JSON instead of the table
  -h, --help  show this help

Progress goes to stderr; the table or the JSON to stdout. The exit code is 1 when a phase
failed (its rows say why), 2 for bad arguments, else 0: a missed goal is not a failure.`;

/**
 * Runs the bench CLI with `args` and returns the exit code.
 *
 * @example
 * ```ts
 * Deno.exit(await main(["--quick"]));
 * ```
 */
export async function main(args: string[]): Promise<number> {
  let values: { quick: boolean; json: boolean; help: boolean };
  try {
    ({ values } = parseArgs({
      args,
      options: {
        quick: { type: "boolean", default: false },
        json: { type: "boolean", default: false },
        help: { type: "boolean", short: "h", default: false },
      },
    }));
  } catch (error) {
    console.error(
      `bench: cannot parse arguments: ${error instanceof Error ? error.message : error}`,
    );
    console.error(USAGE);
    return 2;
  }
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  const { report, failures } = await runBench({
    quick: values.quick,
    log: (line) => console.error(`bench: ${line}`),
  });
  console.log(values.json ? JSON.stringify(report, null, 2) : formatTable(report));
  for (const failure of failures) console.error(`bench: failed: ${failure}`);
  return failures.length === 0 ? 0 : 1;
}

if (import.meta.main) {
  // Exit explicitly: a helper's start-up deadline timer may outlive the daemons it started.
  Deno.exit(await main(Deno.args));
}
