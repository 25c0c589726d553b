// Each language on real files in a temp workspace: the outline names the expected symbols,
// a stale range is refused after an unrelated edit shifts the file, a patch that breaks the
// syntax is refused with the file byte-identical, and a good patch applies with its new range.

import assert from "node:assert/strict";
import { dirname, join } from "node:path";
import { applyPatch, CodeService, grammarLoads } from "../../../runtime/code/mod.ts";
import { FIXTURES } from "./_fixtures.ts";

async function workspaceWith(file: string, text: string): Promise<string> {
  const root = await Deno.makeTempDir({ prefix: "klbr-code-" });
  await Deno.mkdir(join(root, dirname(file)), { recursive: true });
  await Deno.writeTextFile(join(root, file), text);
  return root;
}

async function sha256(text: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

for (const [language, fx] of Object.entries(FIXTURES)) {
  Deno.test(`${language}: the outline names the expected symbols with their ranges`, async () => {
    const root = await workspaceWith(fx.file, fx.text);
    try {
      const service = new CodeService({ root });
      const outline = await service.outline(fx.file);
      assert.equal(outline.language, language);
      assert.equal(outline.hash, await sha256(fx.text));
      assert.equal(outline.syntax_errors, 0);
      assert.deepEqual(outline.symbols.map((s) => `${s.kind} ${s.qualified_name}`), fx.symbols);
      // Each range reads back as the definition its signature starts.
      for (const symbol of outline.symbols) {
        const read = await service.read(symbol.range);
        assert.ok(read.ok);
        assert.ok(read.text.includes(symbol.signature), `${symbol.qualified_name} reads back`);
        assert.equal(read.range.path, fx.file);
      }
    } finally {
      await Deno.remove(root, { recursive: true });
    }
  });

  Deno.test(`${language}: a stale range is refused after an unrelated edit shifts the file`, async () => {
    const root = await workspaceWith(fx.file, fx.text);
    try {
      const service = new CodeService({ root });
      const symbol = await service.symbol(fx.file, fx.target.name, fx.target.kind ?? null);
      const shifted = fx.shift(fx.text);
      await Deno.writeTextFile(join(root, fx.file), shifted);
      const current = await sha256(shifted);
      const stale = [{ path: fx.file, range_hash: symbol.range.hash, current_hash: current }];
      assert.deepEqual(await service.read(symbol.range), { ok: false, reason: "stale", stale });
      assert.deepEqual(await applyPatch(service, [{ range: symbol.range, text: fx.good }]), {
        ok: false,
        reason: "stale",
        stale,
      });
      assert.equal(await Deno.readTextFile(join(root, fx.file)), shifted, "never applied");
      // A fresh range of the same symbol, taken after the edit, patches the right text.
      const fresh = await service.symbol(fx.file, fx.target.name, fx.target.kind ?? null);
      assert.ok(fresh.range.start_byte > symbol.range.start_byte);
      const done = await applyPatch(service, [{ range: fresh.range, text: fx.good }]);
      assert.ok(done.ok);
      const expected = shifted.slice(0, byteToIndex(shifted, fresh.range.start_byte)) + fx.good +
        shifted.slice(byteToIndex(shifted, fresh.range.end_byte));
      assert.equal(await Deno.readTextFile(join(root, fx.file)), expected);
      const again = await service.read(done.ranges[0]);
      assert.ok(again.ok);
      assert.equal(again.text, fx.good);
      assert.equal(done.ranges[0].hash, await sha256(expected));
    } finally {
      await Deno.remove(root, { recursive: true });
    }
  });

  if (fx.bad !== null) {
    Deno.test(`${language}: a patch that breaks the syntax is refused; the file is byte-identical`, async () => {
      const root = await workspaceWith(fx.file, fx.text);
      try {
        const service = new CodeService({ root });
        const before = await Deno.readFile(join(root, fx.file));
        const symbol = await service.symbol(fx.file, fx.target.name, fx.target.kind ?? null);
        const outcome = await applyPatch(service, [{ range: symbol.range, text: fx.bad! }]);
        assert.equal(outcome.ok, false);
        assert.ok(!outcome.ok && outcome.reason === "syntax");
        const [refusal] = outcome.refusals;
        assert.equal(refusal.path, fx.file);
        assert.equal(refusal.errors_before, 0);
        assert.ok(refusal.errors_after >= 1);
        assert.ok(refusal.problems[0].line >= symbol.range.start_line);
        assert.deepEqual(await Deno.readFile(join(root, fx.file)), before);
        const leftovers = [...Deno.readDirSync(join(root, dirname(fx.file)))].map((e) => e.name);
        assert.deepEqual(leftovers, [fx.file.split("/").pop()], "no temp file is left behind");
      } finally {
        await Deno.remove(root, { recursive: true });
      }
    });
  }
}

Deno.test("every grammar is loaded once per process, however many services parse with it", async () => {
  const roots: string[] = [];
  const round = async () => {
    for (const fx of Object.values(FIXTURES)) {
      const root = await workspaceWith(fx.file, fx.text);
      roots.push(root);
      await new CodeService({ root }).outline(fx.file);
    }
  };
  try {
    await round();
    const loaded = grammarLoads();
    assert.ok(loaded <= Object.keys(FIXTURES).length, `one load per grammar (got ${loaded})`);
    await round();
    assert.equal(grammarLoads(), loaded, "fresh services load no grammar again");
  } finally {
    for (const root of roots) await Deno.remove(root, { recursive: true });
  }
});

function byteToIndex(text: string, byte: number): number {
  return new TextDecoder().decode(new TextEncoder().encode(text).subarray(0, byte)).length;
}
