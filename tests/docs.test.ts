// The docs state each guarantee and name the test that proves it, by its name and its file
// ("… in `tests/x.test.ts`"). These tests keep those citations true when tests and files are
// renamed, merged or deleted: a citation that names no test is a guarantee nobody checks.

import assert from "node:assert/strict";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const REPO = join(dirname(fileURLToPath(import.meta.url)), "..");

/** Paths in the docs that name no file of the repository on purpose, and why. */
const EXAMPLE_PATHS = new Map([
  ["tests/cases.py", "a helper module inside a behaviour draft (docs/behavior.md)"],
  ["runtime/..x.ts", "a file name `code.patch` must refuse (docs/security.md)"],
]);

/** `docs/performance.md` records mechanisms that were deleted, by the files they were in. */
const HISTORY = new Set(["performance.md"]);

async function docs(): Promise<{ name: string; text: string }[]> {
  const found = [];
  for await (const entry of Deno.readDir(join(REPO, "docs"))) {
    if (!entry.name.endsWith(".md")) continue;
    found.push({ name: entry.name, text: await Deno.readTextFile(join(REPO, "docs", entry.name)) });
  }
  found.push({ name: "README.md", text: await Deno.readTextFile(join(REPO, "README.md")) });
  return found;
}

/** Text with line breaks and runs of spaces made one space, and without backticks. */
function flat(text: string): string {
  return text.replace(/\s+/g, " ").replaceAll("`", "");
}

/**
 * The part of a cited test name that must appear word for word in its file: up to an ellipsis
 * (the docs shorten long names) or a set of alternatives such as `(openai|deepseek)`, which a
 * test written once per case spells as an interpolation.
 */
function citedPrefix(name: string): string {
  return name.split("…")[0].split(/\([^)]*\|/)[0].trim();
}

/** Each `"name" [, "name"…] in `file`` citation of the docs. */
const CITATION =
  /"([^"]{12,400}?)"((?:,? (?:and )?"[^"]{12,400}?")*) in `((?:tests|workbench|bench)\/[^`]+\.(?:ts|py))`/g;

Deno.test("every test the docs cite by name is in the file they cite it in", async () => {
  const missing: string[] = [];
  let cited = 0;
  for (const doc of await docs()) {
    for (const match of doc.text.replace(/\s*\n\s*/g, " ").matchAll(CITATION)) {
      const path = match[3];
      const names = [match[1], ...[...match[2].matchAll(/"([^"]+)"/g)].map((m) => m[1])];
      let source: string;
      try {
        source = flat(await Deno.readTextFile(join(REPO, path))).replaceAll('\\"', '"');
      } catch {
        missing.push(`${doc.name}: ${path} does not exist`);
        continue;
      }
      for (const name of names) {
        cited++;
        const prefix = flat(citedPrefix(name));
        if (!source.includes(prefix)) missing.push(`${doc.name}: "${name}" is not in ${path}`);
      }
    }
  }
  assert.ok(cited > 50, `only ${cited} citations found: is the pattern still right?`);
  assert.deepEqual(missing, [], "rename the citation to the test's present name and file");
});

/** Every test source of the repository, flattened as {@linkcode flat} does. */
async function allTestSources(): Promise<string> {
  const texts: string[] = [];
  const walk = async (dir: string): Promise<void> => {
    for await (const entry of Deno.readDir(join(REPO, dir))) {
      const path = `${dir}/${entry.name}`;
      if (entry.isDirectory && !entry.name.startsWith(".")) await walk(path);
      else if (/\.(ts|py)$/.test(entry.name)) texts.push(await Deno.readTextFile(join(REPO, path)));
    }
  };
  for (const dir of ["tests", "workbench/tests", "bench/tests"]) await walk(dir);
  return flat(texts.join("\n")).replaceAll('\\"', '"');
}

/** The quoted names after "Test:", "Tests:" or "Proven by", up to the first text between them. */
const NAMED_AFTER =
  /(?:Tests?|Proven by):? ((?:"[^"]{10,400}?"(?:,| and|;| \(`[^`]+`\)| in `[^`]+`|\s)*)+)/g;

Deno.test("every test the docs cite after Test:, Tests: or Proven by is a test of the repository", async () => {
  const sources = await allTestSources();
  const missing: string[] = [];
  let cited = 0;
  for (const doc of await docs()) {
    if (HISTORY.has(doc.name)) continue;
    for (const match of doc.text.replace(/\s*\n\s*/g, " ").matchAll(NAMED_AFTER)) {
      for (const [, name] of match[1].matchAll(/"([^"]{10,400}?)"/g)) {
        cited++;
        if (!sources.includes(flat(citedPrefix(name)))) missing.push(`${doc.name}: "${name}"`);
      }
    }
  }
  assert.ok(cited > 100, `only ${cited} citations found: is the pattern still right?`);
  assert.deepEqual(missing, [], "no test has these names: cite the test's present name");
});

/** The folders `.gitignore` names: what a build or a test run makes, absent from a fresh clone. */
async function ignoredFolders(): Promise<string[]> {
  const lines = (await Deno.readTextFile(join(REPO, ".gitignore"))).split("\n");
  return lines.filter((line) => line.endsWith("/")).map((line) => line.slice(0, -1));
}

Deno.test("every repository path the docs name exists, but for the examples, the history and what a build makes", async () => {
  const ignored = await ignoredFolders();
  const missing: string[] = [];
  for (const doc of await docs()) {
    if (HISTORY.has(doc.name)) continue;
    const paths = doc.text.matchAll(
      /`((?:tests|runtime|store|workbench|bench|ui|docs|behavior)\/[A-Za-z0-9_./-]+)`/g,
    );
    for (const [, path] of paths) {
      if (EXAMPLE_PATHS.has(path)) continue;
      if (ignored.some((folder) => path === folder || path.startsWith(`${folder}/`))) continue;
      try {
        await Deno.stat(join(REPO, path));
      } catch {
        missing.push(`${doc.name}: ${path}`);
      }
    }
  }
  assert.deepEqual(missing, [], "these paths name no file: point them at where the code is now");
});
