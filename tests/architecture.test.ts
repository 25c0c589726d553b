/**
 * The layout's rules, checked on the source itself: each folder of `runtime/` is reached only
 * through its face (`mod.ts`), `runtime/core/` imports no domain, `store/` and `ui/` import
 * nothing of `runtime/` but `core/`, only `store/` runs SQL, nothing outside `store/` wakes the
 * event bus (commits announce themselves), and the workbench's host side is layered `kernel/` →
 * `workspace/` → `sandbox/`. A file's length is a warning (`deno task lines`), not a
 * rule.
 *
 * @module
 */

import assert from "node:assert/strict";
import { dirname, join, normalize } from "node:path";
import { fileURLToPath } from "node:url";

const REPO = join(dirname(fileURLToPath(import.meta.url)), "..");

async function sourceFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  for await (const entry of Deno.readDir(join(REPO, dir))) {
    const path = join(dir, entry.name);
    if (entry.isDirectory) out.push(...await sourceFiles(path));
    else if (/\.tsx?$/.test(entry.name)) out.push(path);
  }
  return out;
}

/** Every relative module a file imports (static, re-exported or dynamic), repo-relative. */
async function importsOf(file: string): Promise<string[]> {
  const text = await Deno.readTextFile(join(REPO, file));
  const specs = [...text.matchAll(/(?:from|import)\s*\(?\s*"(\.{1,2}\/[^"]+)"/g)].map((m) => m[1]);
  return specs.map((spec) => normalize(join(dirname(file), spec)));
}

/** `runtime/<folder>/...` → the folder's name, else undefined. */
function folderOf(path: string): string | undefined {
  return /^runtime\/([a-z_]+)\//.exec(path)?.[1];
}

const roots = ["runtime", "store", "ui/src", "tests", "bench"];

Deno.test("every folder of runtime/ is imported from outside only through its mod.ts", async () => {
  const broken: string[] = [];
  for (const root of roots) {
    for (const file of await sourceFiles(root)) {
      for (const target of await importsOf(file)) {
        const folder = folderOf(target);
        if (folder === undefined || folderOf(file) === folder) continue;
        if (target !== `runtime/${folder}/mod.ts`) broken.push(`${file} → ${target}`);
      }
    }
  }
  assert.deepEqual(broken, [], "imports past a folder's face");
});

Deno.test("runtime/ has no file outside a domain folder, and each folder has a mod.ts", async () => {
  const loose: string[] = [];
  for await (const entry of Deno.readDir(join(REPO, "runtime"))) {
    if (entry.isFile) loose.push(entry.name);
    if (entry.isDirectory) {
      const face = await Deno.stat(join(REPO, "runtime", entry.name, "mod.ts")).catch(() => null);
      if (face === null) loose.push(`${entry.name}/ (no mod.ts)`);
    }
  }
  assert.deepEqual(loose, []);
});

Deno.test("runtime/core imports no domain; store/ and ui/ import only runtime/core", async () => {
  const broken: string[] = [];
  const check = async (root: string, allowed: (folder: string) => boolean) => {
    for (const file of await sourceFiles(root)) {
      for (const target of await importsOf(file)) {
        const folder = folderOf(target);
        if (folder !== undefined && !allowed(folder)) broken.push(`${file} → ${target}`);
        if (root === "runtime/core" && !target.startsWith("runtime/core/")) {
          broken.push(`${file} → ${target}`);
        }
      }
    }
  };
  await check("runtime/core", (folder) => folder === "core");
  await check("store", (folder) => folder === "core");
  await check("ui/src", (folder) => folder === "core");
  assert.deepEqual(broken, []);
});

Deno.test("only store/ runs SQL: nothing else prepares a statement", async () => {
  const found: string[] = [];
  for (const root of ["runtime", "ui/src", "main.ts"]) {
    const files = root.endsWith(".ts") ? [root] : await sourceFiles(root);
    for (const file of files) {
      const text = await Deno.readTextFile(join(REPO, file));
      if (/\.statement\(|DatabaseSync/.test(text)) found.push(file);
    }
  }
  assert.deepEqual(found, []);
});

Deno.test("nothing outside store/ wakes the bus after a commit: commits announce themselves", async () => {
  // The bus wakes a session only from the store's commit listeners (`EventBus.follow`): a
  // hand-written wake, a hand-made wake signal or a record noted outside the table's writer is
  // what a missed wake came from.
  const byHand = /\bbus\.wake\(|kind: "wake"|\.recordWritten\(/;
  const found: string[] = [];
  for (const root of ["runtime", "main.ts"]) {
    const files = root.endsWith(".ts") ? [root] : await sourceFiles(root);
    for (const file of files) {
      if (file === join("runtime", "core", "_event_bus.ts")) continue;
      const text = await Deno.readTextFile(join(REPO, file));
      if (byHand.test(text)) found.push(file);
    }
  }
  assert.deepEqual(found, []);
});

Deno.test("the folders of runtime/ import each other without a cycle", async () => {
  const edges = new Map<string, Set<string>>();
  for (const file of await sourceFiles("runtime")) {
    const from = folderOf(file)!;
    for (const target of await importsOf(file)) {
      const to = folderOf(target);
      if (to === undefined || to === from) continue;
      if (!edges.has(from)) edges.set(from, new Set());
      edges.get(from)!.add(to);
    }
  }
  const cycles: string[] = [];
  const visit = (node: string, path: string[]) => {
    if (path.includes(node)) {
      cycles.push([...path.slice(path.indexOf(node)), node].join(" → "));
      return;
    }
    for (const next of edges.get(node) ?? []) visit(next, [...path, node]);
  };
  for (const node of edges.keys()) visit(node, []);
  assert.deepEqual(cycles, []);
});

Deno.test("the workbench's host side is layered kernel → workspace → sandbox, never back up", async () => {
  // kernel/: the worker process and its protocol; workspace/: paths and `workspace.run`;
  // sandbox/: confinement, process groups and spawning.
  const below: Record<string, string[]> = {
    kernel: [],
    workspace: ["kernel"],
    sandbox: ["kernel", "workspace"],
  };
  const broken: string[] = [];
  for (const [folder, forbidden] of Object.entries(below)) {
    for (const file of await sourceFiles(`runtime/${folder}`)) {
      for (const target of await importsOf(file)) {
        if (forbidden.includes(folderOf(target) ?? "")) broken.push(`${file} → ${target}`);
      }
    }
  }
  assert.deepEqual(broken, []);
  // The concepts live where their folder says: none of them is back in kernel/.
  const moved = [
    "_process_group.ts",
    "_spawn_child.ts",
    "_workspace_run.ts",
    "_workspace_paths.ts",
  ];
  const inKernel = (await sourceFiles("runtime/kernel")).map((f) => f.split("/").pop()!);
  assert.deepEqual(inKernel.filter((name) => moved.includes(name)), []);
});

/** The npm package name of a lock key or specifier: `npm:@a/b@^1` or `@a/b@1.0.0_x@2` → `@a/b`. */
function packageName(key: string): string {
  return /^(?:npm:)?(@?[^@]+)/.exec(key)![1];
}

Deno.test("deno.lock, what serve installs, holds no test-only package; tests/deno.lock agrees with it", async () => {
  const config = JSON.parse(await Deno.readTextFile(join(REPO, "deno.json")));
  const lock = JSON.parse(await Deno.readTextFile(join(REPO, "deno.lock")));
  const testLock = JSON.parse(await Deno.readTextFile(join(REPO, "tests", "deno.lock")));
  // Deno installs every package of the lock's snapshot at the first start, used or not.
  const testOnly = new Set<string>();
  for (const [scope, entries] of Object.entries(config.scopes as Record<string, object>)) {
    assert.match(
      scope,
      /^\.\/(bench\/|tests\/|bench\/tests\/)$/,
      "scopes are for the tests and the bench only",
    );
    for (const name of Object.keys(entries)) testOnly.add(name);
  }
  const leaked = Object.keys(lock.npm).map(packageName).filter((name) => testOnly.has(name));
  assert.deepEqual(
    leaked,
    [],
    "deno.lock lists test-only packages: a test was run or checked without " +
      "--lock=tests/deno.lock; restore deno.lock (git checkout deno.lock) and use " +
      "deno task test, deno task check or --lock=tests/deno.lock",
  );
  assert.deepEqual(Object.keys(config.imports).filter((name) => testOnly.has(name)), []);
  // The tests run exactly the versions serve installs.
  for (const [key, entry] of Object.entries(lock.npm)) {
    assert.deepEqual(testLock.npm[key], entry, `tests/deno.lock has ${key} as deno.lock has it`);
  }
  for (const [specifier, version] of Object.entries(lock.specifiers)) {
    assert.equal(testLock.specifiers[specifier], version, `tests/deno.lock resolves ${specifier}`);
  }
});
