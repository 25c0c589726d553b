/**
 * `deno task bench`: measures klbr's figures — admission, cell round trip, replay, start-up
 * and memory — each against a ceiling or peer measured in the same run, and prints one table
 * (`--json`: the same report as JSON). Goals are reported, never asserted.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { describeMachine } from "./machine.ts";
import { type Phase, PHASES, runBench } from "./run_bench.ts";
import { benchScale } from "./scale.ts";
import { scaleSvg } from "./svg.ts";
import { formatTable } from "./table.ts";

const USAGE = `usage: deno task bench [--quick] [--json] [--only PHASE,...] [--scale [--svg PATH]]

  --quick     smaller counts: the same figures in about a minute, noisier
  --json      print the report as JSON instead of the table
  --only P,.. run only these phases: ${PHASES.join(", ")} (replay runs blocked first;
              rows 6a-6c need every phase and are left out)
  --scale     only figure 11: start-up, idle size, request build, /health and replay at
              1k / 100k / 1M records, each as a ratio to 1k (several minutes)
  --svg PATH  with --scale, where the chart is written (default docs/performance-scale.svg)
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
  let parsed;
  try {
    parsed = parseArgs({
      args,
      options: {
        quick: { type: "boolean", default: false },
        json: { type: "boolean", default: false },
        scale: { type: "boolean", default: false },
        svg: { type: "string", default: "docs/performance-scale.svg" },
        only: { type: "string" },
        help: { type: "boolean", short: "h", default: false },
      },
    });
  } catch (error) {
    console.error(
      `bench: cannot parse arguments: ${error instanceof Error ? error.message : error}`,
    );
    console.error(USAGE);
    return 2;
  }
  const { values } = parsed;
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  if (values.scale) return await runScaleCli(values);
  const only = values.only?.split(",").map((name) => name.trim());
  const unknown = only?.filter((name) => !(PHASES as readonly string[]).includes(name)) ?? [];
  if (unknown.length > 0) {
    console.error(
      `bench: cannot parse arguments: --only takes ${PHASES.join(", ")} (got ${
        unknown.join(", ")
      })`,
    );
    console.error(USAGE);
    return 2;
  }
  const { report, failures } = await runBench({
    quick: values.quick,
    only: only as Phase[] | undefined,
    log: (line) => console.error(`bench: ${line}`),
  });
  console.log(values.json ? JSON.stringify(report, null, 2) : formatTable(report));
  for (const failure of failures) console.error(`bench: failed: ${failure}`);
  return failures.length === 0 ? 0 : 1;
}

/** `/proc/loadavg`, read through `cat` (Deno asks for every permission to read /proc). */
async function loadAverage(): Promise<string> {
  try {
    const out = await new Deno.Command("cat", { args: ["/proc/loadavg"], stderr: "null" }).output();
    return new TextDecoder().decode(out.stdout).trim();
  } catch {
    return "unknown";
  }
}

async function runScaleCli(values: { json: boolean; svg: string }): Promise<number> {
  const root = await Deno.makeTempDir({ prefix: "klbr-scale-" });
  try {
    const machine = await describeMachine();
    const load = await loadAverage();
    const { rows, points } = await benchScale({
      root,
      log: (line) => console.error(`bench: ${line}`),
    });
    const report = {
      generatedAt: new Date().toISOString(),
      machine,
      quick: false,
      counts: {},
      rows,
    };
    console.log(
      values.json ? JSON.stringify({ ...report, points, load }, null, 2) : formatTable(report),
    );
    const caption = `${report.generatedAt.slice(0, 16)} UTC, ${machine.cpus} CPUs, load ${
      load.split(" ").slice(0, 3).join(" ")
    }`;
    await Deno.writeTextFile(values.svg, scaleSvg(points, caption));
    console.error(`bench: load average at the start: ${load}, at the end: ${await loadAverage()}`);
    console.error(`bench: chart written to ${values.svg}`);
    return 0;
  } catch (error) {
    console.error(`bench: failed: ${error instanceof Error ? error.message : error}`);
    return 1;
  } finally {
    await Deno.remove(root, { recursive: true }).catch(() => {});
  }
}

if (import.meta.main) {
  // Exit explicitly: a helper's start-up deadline timer may outlive the daemons it started.
  Deno.exit(await main(Deno.args));
}
