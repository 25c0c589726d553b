// `findInWorkspace()` on a real tree: tree-sitter queries and symbol globs over a file, a
// directory or a path glob, capped with truncation reported, links and skipped folders left out.

import assert from "node:assert/strict";
import { dirname, join } from "node:path";
import { CodeService, findInWorkspace } from "../../../runtime/code/mod.ts";
import { isKlbrError } from "../../../runtime/core/mod.ts";

const FILES: Record<string, string> = {
  "a/one.py": "def f():\n    open('x')\n\n\ndef test_one():\n    pass\n",
  "a/b/two.py": "def g():\n    open('y')\n    open('z')\n",
  "web/app.ts": "export function open(path: string) {}\nfunction test_web() {}\n",
  "node_modules/dep/index.py": "def open():\n    pass\n",
  ".git/hooks/x.py": "def hidden():\n    pass\n",
  "notes.txt": "open the file\n",
};

async function withTree(fn: (root: string, service: CodeService) => Promise<void>) {
  const root = await Deno.makeTempDir({ prefix: "klbr-find-" });
  const outside = await Deno.makeTempDir({ prefix: "klbr-find-out-" });
  try {
    for (const [path, text] of Object.entries(FILES)) {
      await Deno.mkdir(join(root, dirname(path)), { recursive: true });
      await Deno.writeTextFile(join(root, path), text);
    }
    await Deno.writeTextFile(join(outside, "far.py"), "def far():\n    open('out')\n");
    await Deno.symlink(outside, join(root, "a/escape"));
    await fn(root, new CodeService({ root }));
  } finally {
    await Deno.remove(root, { recursive: true });
    await Deno.remove(outside, { recursive: true });
  }
}

const OPEN_CALLS = '(call function: (identifier) @fn (#eq? @fn "open")) @call';
const find = (
  service: CodeService,
  pattern: string,
  path = ".",
  max = 100,
  capture: string | null = null,
) => findInWorkspace(service, { pattern, path, max_results: max, capture });

Deno.test("`findInWorkspace()` runs a query over a tree, skipping links, .git and node_modules", async () => {
  await withTree(async (_root, service) => {
    const result = await find(service, OPEN_CALLS, ".", 100, "call");
    assert.equal(result.mode, "query");
    assert.deepEqual(
      result.matches.map((m) => `${m.path}:${m.range.start_line} ${m.text}`),
      ["a/b/two.py:2 open('y')", "a/b/two.py:3 open('z')", "a/one.py:2 open('x')"],
    );
    assert.equal(result.truncated, false);
    assert.equal(result.files_searched, 3);
    assert.deepEqual(result.matches[0].captures, { call: "open('y')", fn: "open" });
    // The TypeScript grammar has no `call` node: it says so instead of failing the find.
    assert.match(result.refused_languages.typescript, /Bad node name 'call'/);
  });
});

Deno.test("`findInWorkspace()` stops at max_results and says truncated", async () => {
  await withTree(async (_root, service) => {
    const cut = await find(service, OPEN_CALLS, ".", 2);
    assert.equal(cut.matches.length, 2);
    assert.equal(cut.truncated, true);
    const exact = await find(service, OPEN_CALLS, ".", 3);
    assert.equal(exact.matches.length, 3);
    assert.equal(exact.truncated, false, "exactly the cap is complete");
  });
});

Deno.test("`findInWorkspace()` matches symbol names by glob over a path glob", async () => {
  await withTree(async (_root, service) => {
    const tests = await find(service, "test_*", "**/*");
    assert.equal(tests.mode, "symbol");
    assert.deepEqual(
      tests.matches.map((m) => `${m.path} ${m.symbol?.kind} ${m.symbol?.qualified_name}`),
      ["a/one.py function test_one", "web/app.ts function test_web"],
    );
    const onlyPy = await find(service, "*", "a/**/*.py");
    assert.deepEqual(onlyPy.matches.map((m) => m.symbol?.qualified_name), ["g", "f", "test_one"]);
    const oneFile = await find(service, "g", "a/b/two.py");
    assert.equal(oneFile.matches.length, 1);
  });
});

Deno.test("`findInWorkspace()` refuses a query no grammar compiles, an unknown capture, a file no grammar reads and an escaping path", async () => {
  await withTree(async (_root, service) => {
    const cases: [() => Promise<unknown>, string, RegExp][] = [
      [
        () => find(service, "(nonsense_node) @x"),
        "invalid_input",
        /^cannot find: the \w+ grammar refuses the query: Bad node name 'nonsense_node'/,
      ],
      [
        () => find(service, "(call) @c", "a", 10, "nope"),
        "invalid_input",
        /^cannot find: the query has no capture @nope \(got @c\)$/,
      ],
      [
        () => find(service, "(call) @c", "notes.txt"),
        "invalid_input",
        /^cannot find in notes\.txt: no grammar for this kind of file \(got "notes\.txt"\)$/,
      ],
      [() => find(service, "f", "../"), "path_escape", /path leaves the workspace/],
      [() => find(service, "f", "a/escape"), "path_escape", /through a symlink/],
    ];
    for (const [call, code, message] of cases) {
      await assert.rejects(call, (e) => isKlbrError(e, code as never) && message.test(e.message));
    }
  });
});
