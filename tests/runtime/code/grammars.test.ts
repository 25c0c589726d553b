// The grammars committed in runtime/code/grammars/: each file matches its SHA256SUMS line and
// has a licence file, each loads and parses a snippet of its language without a syntax error,
// and no grammar is left over unlisted.

import assert from "node:assert/strict";
import { basename, dirname, join } from "node:path";
import { grammar, grammarPath, LANGUAGE_IDS, type LanguageId } from "../../../runtime/code/mod.ts";

const DIR = dirname(grammarPath("python"));

/** One line of each language: enough to see a real parse, not a best-effort error tree. */
const SNIPPETS: Record<LanguageId, string> = {
  python: "def area(r: float) -> float:\n    return 3.14 * r * r\n",
  typescript: "export function area(r: number): number {\n  return Math.PI * r * r;\n}\n",
  tsx: "export const Badge = (p: { n: number }) => <b>{p.n}</b>;\n",
  javascript: "export function area(r) {\n  return Math.PI * r * r;\n}\n",
  rust: "pub fn area(r: f64) -> f64 {\n    std::f64::consts::PI * r * r\n}\n",
  go: "package shapes\n\nfunc Area(r float64) float64 { return 3.14 * r * r }\n",
  json: '{ "area": [1, 2.5, true, null] }\n',
  markdown: "# Shapes\n\nSome text.\n\n## Circles\n",
};

async function sha256(bytes: Uint8Array): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>);
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** SHA256SUMS as file name → digest. */
async function sums(): Promise<Map<string, string>> {
  const text = await Deno.readTextFile(join(DIR, "SHA256SUMS"));
  return new Map(
    text.trim().split("\n").map((line) => {
      const [digest, name] = line.split(/\s+\*?/);
      return [name, digest];
    }),
  );
}

Deno.test("every committed grammar matches its line in SHA256SUMS and names its licence", async () => {
  const expected = await sums();
  const readme = await Deno.readTextFile(join(DIR, "README.md"));
  for (const id of LANGUAGE_IDS) {
    const wasm = basename(grammarPath(id));
    const digest = await sha256(await Deno.readFile(grammarPath(id)));
    assert.equal(digest, expected.get(wasm), `${wasm} matches SHA256SUMS`);
    const row = readme.split("\n").find((line) => line.startsWith(`| \`${wasm}\``));
    assert.ok(row, `README.md lists ${wasm}`);
    const licence = /`(LICENSE\.[\w-]+)`/.exec(row)?.[1];
    assert.ok(licence, `README.md names the licence of ${wasm}`);
    assert.ok((await Deno.stat(join(DIR, licence))).isFile, `${licence} is committed`);
  }
});

Deno.test("runtime/code/grammars/ holds exactly the grammars the languages name", async () => {
  const named = new Set(LANGUAGE_IDS.map((id) => basename(grammarPath(id))));
  const present = new Set<string>();
  for await (const entry of Deno.readDir(DIR)) {
    if (entry.name.endsWith(".wasm")) present.add(entry.name);
  }
  assert.deepEqual([...present].sort(), [...named].sort());
  assert.deepEqual([...(await sums()).keys()].sort(), [...named].sort());
});

for (const id of LANGUAGE_IDS) {
  Deno.test(`the ${id} grammar loads and parses a snippet without a syntax error`, async () => {
    const { parser } = await grammar(id);
    const tree = parser.parse(SNIPPETS[id]);
    assert.ok(tree, `${basename(grammarPath(id))} gave a tree`);
    try {
      assert.equal(tree.rootNode.hasError, false, tree.rootNode.toString());
      assert.ok(tree.rootNode.childCount > 0);
    } finally {
      tree.delete();
    }
  });
}
