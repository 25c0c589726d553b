/**
 * The body of `deno task example`: a no-network demonstration of the workbench, not an
 * agent and not an interactive client. It spawns a workbench in a temporary workspace and
 * runs cells that show the persistent heap, the workspace calls, a `run`, a cancelled cell
 * and a reset, printing each step and its result.
 *
 * @module
 */

import { join } from "node:path";
import { type CellResult, KernelSupervisor, resolvePython } from "../kernel/mod.ts";
import { newId } from "../core/mod.ts";

/** Options of {@linkcode runExample}. */
export interface ExampleOptions {
  /** The checkout holding `workbench/` and the builtin `skills/`. */
  repoRoot: string;
  /** The Python interpreter (a name on `PATH` or a path). @default "python3" */
  python?: string;
  /** Where managed skills are read from (`<stateDir>/skills`). @default a temporary dir */
  stateDir?: string;
  /** Receives each printed line. @default console.log */
  print?: (line: string) => void;
}

/** What {@linkcode runExample} did, for callers that check it. */
export interface ExampleReport {
  /** The steps run, in order, with their outcomes. */
  steps: { step: string; outcome: string }[];
  /** The generation numbers recorded (the first spawn, then the reset). */
  generations: number[];
}

/** One demonstration cell: a step name, what it shows, and its code. */
const CELLS: { step: string; says: string; code: string }[] = [
  { step: "heap", says: "a value set in one cell…", code: "counter = 41\ncounter" },
  { step: "heap", says: "…is still there in the next", code: "counter += 1\ncounter" },
  {
    step: "open_file",
    says: "write a file, then replace exactly one occurrence in it",
    code: 'note = await open_file("notes/hello.md", create=True)\n' +
      'await note.write("hello, world\\n")\nawait note.replace("world", "workbench")\n' +
      "await note.read()",
  },
  { step: "ls", says: "list the workspace", code: 'await ls(".", recursive=True)' },
  { step: "search", says: "search it", code: 'print(await search("workbench"))' },
  {
    step: "run",
    says: "run a program through the host (argv, never a shell)",
    code: 'r = await run(["sh", "-c", "echo run says hi; exit 3"], timeout=30)\n' +
      "(r.exit_code, r.stdout.decode())",
  },
  { step: "skills", says: "the skills this generation offers", code: "dir(skills)" },
];

function describe(result: CellResult): string {
  const parts = [`outcome=${result.outcome}`];
  if (result.value !== null) parts.push(`value=${result.value}`);
  if (result.stdout) parts.push(`stdout=${JSON.stringify(result.stdout.trimEnd())}`);
  if (result.error) parts.push(`error=${result.error.type}: ${result.error.message}`);
  // Continuation lines of a multi-line value stay under the step.
  return parts.join("  ").replaceAll("\n", "\n    ");
}

/**
 * Runs the demonstration and prints each step; cleans up its temporary directories.
 *
 * @throws {KlbrError} `not_found`/`invalid_config` when Python cannot be used;
 * `worker_failed` when the workbench cannot start.
 * @example
 * ```ts
 * await runExample({ repoRoot: Deno.cwd() });
 * ```
 */
export async function runExample(options: ExampleOptions): Promise<ExampleReport> {
  const print = options.print ?? ((line: string) => console.log(line));
  const report: ExampleReport = { steps: [], generations: [] };
  const workspace = await Deno.makeTempDir({ prefix: "klbr-example-ws-" });
  const stateDir = options.stateDir ?? await Deno.makeTempDir({ prefix: "klbr-example-state-" });
  const { executable, version } = await resolvePython(options.python ?? "python3");
  print(`klbr example: a workbench in ${workspace} (Python ${version}); no network, no model`);
  const kernel = new KernelSupervisor({
    python: executable,
    session: "example",
    workspace,
    repoRoot: options.repoRoot,
    skillRoots: {
      builtinRoot: join(options.repoRoot, "skills"),
      managedRoot: join(stateDir, "skills"),
    },
    recordGeneration: (g) => {
      report.generations.push(g.generation);
      print(
        `[generation] ${g.generation} started (reason: ${g.reason}; skills ${
          g.skillsRevision.slice(0, 12)
        }; heap restored: ${g.heapRestored})`,
      );
    },
    workbench: { cancelGraceMs: 2_000 },
  });
  const step = async (name: string, says: string, code: string, signal?: AbortController) => {
    print(`\n[${name}] ${says}`);
    for (const line of code.split("\n")) print(`  >>> ${line}`);
    const result = await kernel.execute(newId("cell"), code, {
      signal: signal?.signal,
      // The cancel step aborts once the cell has shown it is running.
      onStream: signal ? () => signal.abort() : undefined,
    });
    print(`  ${describe(result)}`);
    report.steps.push({ step: name, outcome: result.outcome });
    return result;
  };
  try {
    await kernel.ready();
    for (const cell of CELLS) await step(cell.step, cell.says, cell.code);
    await step(
      "cancel",
      "a cell awaiting for 1000 s is cancelled once it prints",
      'import asyncio\nprint("sleeping", flush=True)\nawait asyncio.sleep(1000)',
      new AbortController(),
    );
    await step("heap", "the heap survived the cancelled cell", "counter");
    print("\n[reset] replace the kernel: a new generation, the heap is not restored");
    await kernel.reset("example reset");
    report.steps.push({ step: "reset", outcome: "ok" });
    await step("heap", "after the reset the name is gone", "counter");
  } finally {
    await kernel.shutdown();
    await Deno.remove(workspace, { recursive: true }).catch(() => {});
    if (options.stateDir === undefined) {
      await Deno.remove(stateDir, { recursive: true }).catch(() => {});
    }
  }
  print("\nklbr example: done");
  return report;
}
