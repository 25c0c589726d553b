/**
 * Figure 7a/7b — the code domain's outline of a 5,000-line Python file: cold (content not yet
 * cached: read, hash, parse, outline query) and cached (read, hash, the cached outline), each
 * against parsing the same text with bare `web-tree-sitter`.
 *
 * @module
 */

import { join } from "node:path";
import { Language, Parser } from "web-tree-sitter";
import { CodeService, grammarPath, initTreeSitter } from "../runtime/code/mod.ts";
import { belowPeer, type BenchRow, makeRow, withinPeer } from "./row.ts";
import { type LatencySummary, summarize } from "./stats.ts";

/** Options for {@linkcode benchCodeOutline}. */
export interface CodeOutlineOptions {
  /** A scratch directory: the workspace of the file. */
  scratch: string;
  /** Timed outlines of each kind, and timed bare parses. */
  count: number;
}

/** Lines of the generated file. */
const LINES = 5_000;

/**
 * Returns a Python module of about `lines` lines: classes with methods and module functions,
 * the shape of real application code.
 */
function pythonModule(lines: number): string {
  const out = ["import math", "", ""];
  for (let c = 0; out.length < lines - 12; c++) {
    out.push(`class Shape${c}:`, `    """Shape number ${c}."""`, "");
    for (let m = 0; m < 4 && out.length < lines - 8; m++) {
      out.push(
        `    def area_${m}(self, r: float) -> float:`,
        `        total = math.pi * r * r + ${m}`,
        `        return total / (${c} + 1)`,
        "",
      );
    }
    out.push("", `def helper_${c}(x):`, `    return [i * x for i in range(${c % 7 + 1})]`, "", "");
  }
  while (out.length < lines) out.push("");
  return out.slice(0, lines).join("\n") + "\n";
}

async function timeIt(
  count: number,
  fn: () => Promise<unknown> | unknown,
): Promise<LatencySummary> {
  const samples: number[] = [];
  for (let i = 0; i < count; i++) {
    const t0 = performance.now();
    await fn();
    samples.push(performance.now() - t0);
  }
  return summarize(samples);
}

/**
 * Measures figure 7a/7b. Grammars are loaded before timing (once per process, as in the
 * daemon); each cold outline runs on a fresh service, so nothing of the file is cached.
 *
 * @throws {KlbrError} when the grammar cannot be loaded or the file cannot be outlined.
 */
export async function benchCodeOutline(options: CodeOutlineOptions): Promise<BenchRow[]> {
  const text = pythonModule(LINES);
  await Deno.writeTextFile(join(options.scratch, "big.py"), text);
  // The peer: the same parse with web-tree-sitter alone, the text already in memory.
  await initTreeSitter();
  const parser = new Parser();
  parser.setLanguage(await Language.load(await Deno.readFile(grammarPath("python"))));
  const bare = await timeIt(options.count, () => parser.parse(text)!.delete());
  parser.delete();

  const warm = new CodeService({ root: options.scratch });
  const symbols = (await warm.outline("big.py")).symbols.length;
  const coldSamples: number[] = [];
  for (let i = 0; i < options.count; i++) {
    const fresh = new CodeService({ root: options.scratch });
    const t0 = performance.now();
    await fresh.outline("big.py");
    coldSamples.push(performance.now() - t0);
    fresh.dispose();
  }
  const cold = summarize(coldSamples);
  const cached = await timeIt(options.count, () => warm.outline("big.py"));
  warm.dispose();
  const peer = { label: `bare web-tree-sitter parse, p50 of ${bare.count}`, value: bare.p50 };
  const what = `${LINES.toLocaleString("en-US")}-line Python file, ${symbols} symbols`;
  return [
    makeRow({
      id: "7a",
      figure: `outline of a ${what}, cold, p50 of ${cold.count}`,
      unit: "ms",
      value: cold.p50,
      peer,
      goal: withinPeer(3, "within 3x of the bare parse"),
      note: "a fresh CodeService each time: read through the workspace path check, sha256, " +
        "parse, outline query, byte and line ranges; grammar already loaded (once per daemon)",
    }),
    makeRow({
      id: "7b",
      figure: `outline of a ${what}, cached, p50 of ${cached.count}`,
      unit: "ms",
      value: cached.p50,
      peer,
      goal: belowPeer("below the bare parse"),
      note: "the same service again: read, sha256, the outline kept with the tree by content hash",
    }),
  ];
}
