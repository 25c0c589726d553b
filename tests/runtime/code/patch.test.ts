// Checked patches and the reads around them, on real files in a temp workspace: all or none
// across files, overlapping edits, the tree cache, the workspace's path rules, file modes,
// non-ASCII offsets, and the durable record of an applied patch.

import assert from "node:assert/strict";
import { dirname, join } from "node:path";
import { applyPatch, codeRpcs, CodeService, findInWorkspace } from "../../../runtime/code/mod.ts";
import { isKlbrError } from "../../../runtime/core/mod.ts";
import { bindRpcs, type RpcContext, RpcRegistry } from "../../../runtime/kernel/mod.ts";
import { readEventsOfKind } from "../../../store/tables/events.ts";
import { ensureSession } from "../../../store/tables/sessions.ts";
import { openStore } from "../../../store/store.ts";
import { FIXTURES } from "./_fixtures.ts";

async function withWorkspace(
  files: Record<string, string>,
  fn: (root: string, service: CodeService) => Promise<void>,
): Promise<void> {
  const root = await Deno.makeTempDir({ prefix: "klbr-code-" });
  try {
    for (const [path, text] of Object.entries(files)) {
      await Deno.mkdir(join(root, dirname(path)), { recursive: true });
      await Deno.writeTextFile(join(root, path), text);
    }
    await fn(root, new CodeService({ root }));
  } finally {
    await Deno.remove(root, { recursive: true });
  }
}

const PY = FIXTURES.python;
const TS = FIXTURES.typescript;
const both = { [PY.file]: PY.text, [TS.file]: TS.text };

async function snapshot(root: string): Promise<Record<string, string>> {
  return {
    [PY.file]: await Deno.readTextFile(join(root, PY.file)),
    [TS.file]: await Deno.readTextFile(join(root, TS.file)),
  };
}

Deno.test("a patch_many with one bad edit leaves every file byte-identical", async () => {
  await withWorkspace(both, async (root, service) => {
    const py = await service.symbol(PY.file, "circle_area", null);
    const ts = await service.symbol(TS.file, "Vec.length", null);
    // One edit breaks the syntax of its file: neither file changes.
    const syntax = await applyPatch(service, [
      { range: py.range, text: PY.good },
      { range: ts.range, text: TS.bad! },
    ]);
    assert.ok(!syntax.ok && syntax.reason === "syntax");
    assert.deepEqual(syntax.refusals.map((r) => r.path), [TS.file]);
    assert.deepEqual(await snapshot(root), both);
    // One range is stale: neither file changes.
    const tsShifted = TS.shift(TS.text);
    await Deno.writeTextFile(join(root, TS.file), tsShifted);
    const stale = await applyPatch(service, [
      { range: py.range, text: PY.good },
      { range: ts.range, text: TS.good },
    ]);
    assert.ok(!stale.ok && stale.reason === "stale");
    assert.deepEqual(stale.stale.map((s) => s.path), [TS.file]);
    assert.deepEqual(await snapshot(root), { [PY.file]: PY.text, [TS.file]: tsShifted });
    // Fresh ranges: both apply, and the new ranges come back in the order given.
    const ts2 = await service.symbol(TS.file, "Vec.length", null);
    const done = await applyPatch(service, [
      { range: ts2.range, text: TS.good },
      { range: py.range, text: PY.good },
    ]);
    assert.ok(done.ok);
    assert.deepEqual(done.ranges.map((r) => r.path), [TS.file, PY.file]);
    assert.equal((await service.read(done.ranges[0])).ok && TS.good, TS.good);
    const after = await snapshot(root);
    assert.ok(after[PY.file].includes("r ** 2") && after[TS.file].includes("Math.sqrt"));
    assert.deepEqual(done.files.map((f) => f.syntax_checked), [true, true]);
  });
});

Deno.test("several edits of one file shift each other's new ranges; overlapping edits are refused", async () => {
  const text = "def a():\n    return 1\n\n\ndef b():\n    return 2\n";
  await withWorkspace({ "m.py": text }, async (root, service) => {
    const a = await service.symbol("m.py", "a", null);
    const b = await service.symbol("m.py", "b", null);
    const overlap = applyPatch(service, [
      { range: a.range, text: "def a():\n    return 10" },
      { range: { ...a.range, start_byte: a.range.start_byte + 4 }, text: "x" },
    ]);
    await assert.rejects(
      overlap,
      (e) => isKlbrError(e, "invalid_input") && /two edits overlap/.test(e.message),
    );
    assert.equal(await Deno.readTextFile(join(root, "m.py")), text);
    const done = await applyPatch(service, [
      { range: b.range, text: "def b():\n    return 20" },
      { range: a.range, text: "def a():\n    x = 1\n    return 10 * x" },
    ]);
    assert.ok(done.ok);
    const now = await Deno.readTextFile(join(root, "m.py"));
    assert.equal(now, "def a():\n    x = 1\n    return 10 * x\n\n\ndef b():\n    return 20\n");
    const [newB, newA] = done.ranges;
    assert.deepEqual([newA.start_line, newA.end_line, newB.start_line, newB.end_line], [
      1,
      3,
      6,
      7,
    ]);
    const readB = await service.read(newB);
    assert.ok(readB.ok && readB.text === "def b():\n    return 20");
    // A range that claims lines its bytes do not hold is refused, not trusted.
    await assert.rejects(
      service.read({ ...newA, end_line: 5 }),
      (e) =>
        isKlbrError(e, "invalid_input") &&
        /its lines do not match its bytes \(expected 1-3\)/.test(e.message),
    );
  });
});

Deno.test("a tree is parsed once per content: an unchanged file is a cache hit, a patched one is parsed once", async () => {
  await withWorkspace({ [PY.file]: PY.text }, async (root, service) => {
    await service.outline(PY.file);
    assert.deepEqual(service.stats, { parses: 1, hits: 0 });
    await service.outline(PY.file);
    await service.symbol(PY.file, "Shape", null);
    assert.deepEqual(service.stats, { parses: 1, hits: 2 });
    // The same content at another path is the same tree.
    await Deno.copyFile(join(root, PY.file), join(root, "copy.py"));
    await service.outline("copy.py");
    assert.deepEqual(service.stats, { parses: 1, hits: 3 });
    const s = await service.symbol(PY.file, "circle_area", null);
    const done = await applyPatch(service, [{ range: s.range, text: PY.good }]);
    assert.ok(done.ok);
    const parses = service.stats.parses;
    assert.equal(parses, 2, "the check parsed the new content once");
    await service.outline(PY.file);
    assert.equal(service.stats.parses, parses, "and the outline after the patch reused it");
  });
});

Deno.test("a copy's outline, symbol and found symbols name the copy, so patching one changes the copy only", async () => {
  await withWorkspace({ [PY.file]: PY.text, "copy.py": PY.text }, async (root, service) => {
    // The original is outlined first, so its tree and outline are the cached ones.
    await service.outline(PY.file);
    const outline = await service.outline("copy.py");
    assert.equal(outline.path, "copy.py");
    assert.deepEqual([...new Set(outline.symbols.map((s) => s.range.path))], ["copy.py"]);
    const found = await findInWorkspace(service, {
      pattern: "circle_area",
      path: "copy.py",
      max_results: 10,
      capture: null,
    });
    assert.deepEqual(found.matches.map((m) => [m.path, m.range.path]), [["copy.py", "copy.py"]]);
    const s = await service.symbol("copy.py", "circle_area", null);
    assert.equal(s.range.path, "copy.py");
    const done = await applyPatch(service, [{ range: s.range, text: PY.good }]);
    assert.ok(done.ok);
    assert.equal(await Deno.readTextFile(join(root, PY.file)), PY.text);
    assert.ok((await Deno.readTextFile(join(root, "copy.py"))).includes("r ** 2"));
    // The original still names itself after the copy was outlined.
    assert.equal((await service.outline(PY.file)).symbols[0].range.path, PY.file);
  });
});

Deno.test("paths outside the workspace, through a symlink, non-UTF-8 and grammar-less files are refused", async () => {
  await withWorkspace({ "ok.py": "x = 1\n", "notes.txt": "plain\n" }, async (root, service) => {
    const outside = await Deno.makeTempDir();
    try {
      await Deno.writeTextFile(join(outside, "secret.py"), "token = 1\n");
      await Deno.symlink(join(outside, "secret.py"), join(root, "link.py"));
      await Deno.writeFile(join(root, "bin.py"), new Uint8Array([0x78, 0x3d, 0xff, 0x0a]));
      const cases: [() => Promise<unknown>, string, RegExp][] = [
        [
          () => service.outline("../x.py"),
          "path_escape",
          /^cannot outline \.\.\/x\.py: path leaves the workspace/,
        ],
        [() => service.outline(join(outside, "secret.py")), "path_escape", /leaves the workspace/],
        [() => service.outline("link.py"), "path_escape", /leaves the workspace through a symlink/],
        [() => service.outline("missing.py"), "not_found", /path does not exist/],
        [() => service.outline("."), "path_invalid", /path is not a regular file/],
        [
          () => service.outline("bin.py"),
          "invalid_input",
          /^cannot read bin\.py: it is not UTF-8 text$/,
        ],
        [() => service.outline("notes.txt"), "invalid_input", /no grammar for this kind of file/],
        [() => service.symbol("ok.py", "nope", null), "not_found", /no such symbol/],
      ];
      for (const [call, code, message] of cases) {
        await assert.rejects(call, (e) => isKlbrError(e, code as never) && message.test(e.message));
      }
      // A file without a grammar can still be read and patched by lines, unchecked.
      const line = await service.lines("notes.txt", 1, null);
      assert.equal(line.text, "plain\n");
      const done = await applyPatch(service, [{ range: line.range, text: "fancy\n" }]);
      assert.ok(done.ok && done.files[0].syntax_checked === false);
      assert.equal(await Deno.readTextFile(join(root, "notes.txt")), "fancy\n");
    } finally {
      await Deno.remove(outside, { recursive: true });
    }
  });
});

Deno.test("a patch keeps the file's mode and counts bytes, not characters", async () => {
  const text = "# é 😀\ndef greet():\n    return 'héllo'\n";
  await withWorkspace({ "run.py": text }, async (root, service) => {
    await Deno.chmod(join(root, "run.py"), 0o750);
    const s = await service.symbol("run.py", "greet", null);
    assert.equal(s.range.start_byte, new TextEncoder().encode("# é 😀\n").length);
    assert.equal(s.range.start_line, 2);
    const done = await applyPatch(service, [{
      range: s.range,
      text: "def greet():\n    return '😀'",
    }]);
    assert.ok(done.ok);
    assert.equal(
      await Deno.readTextFile(join(root, "run.py")),
      "# é 😀\ndef greet():\n    return '😀'\n",
    );
    assert.equal((await Deno.stat(join(root, "run.py"))).mode! & 0o777, 0o750);
    const back = await service.read(done.ranges[0]);
    assert.ok(back.ok && back.text === "def greet():\n    return '😀'");
  });
});

Deno.test("a patch never makes a setuid, setgid or sticky file: the host writes as the owner, a cell sets the bits", async () => {
  const text = "def greet():\n    return 1\n";
  await withWorkspace({ "run.py": text }, async (root, service) => {
    // A cell may chmod its own file u+s; the host (root, unconfined) must not make a new
    // setuid file of the owner with the cell's text.
    await Deno.chmod(join(root, "run.py"), 0o7755);
    const s = await service.symbol("run.py", "greet", null);
    const done = await applyPatch(service, [{
      range: s.range,
      text: "def greet():\n    return 2",
    }]);
    assert.ok(done.ok);
    assert.equal((await Deno.stat(join(root, "run.py"))).mode! & 0o7777, 0o755);
  });
});

Deno.test("`code.patch` records an applied patch with its cell; a refused one writes no record", async () => {
  const state = await Deno.makeTempDir();
  const store = openStore(state);
  try {
    ensureSession(store, "default");
    await withWorkspace({ [PY.file]: PY.text }, async (root, service) => {
      // The record announces itself: the commit that holds it names its session.
      let woken = 0;
      store.onCommit((commit) => {
        if (commit.records.has("default")) woken++;
      });
      const rpc = new RpcRegistry(bindRpcs(codeRpcs, {
        store,
        session: "default",
        workspace: root,
        service,
      }));
      const ctx: RpcContext = {
        signal: new AbortController().signal,
        method: "code.patch",
        parent: "rq_1",
        cell: "cell_1",
      };
      const s = await rpc.call("code.symbol", { path: PY.file, name: "circle_area" }, ctx) as {
        range: Record<string, unknown>;
      };
      const refused = await rpc.call(
        "code.patch",
        { edits: [{ range: s.range, text: PY.bad }] },
        ctx,
      );
      assert.equal((refused as { ok: boolean }).ok, false);
      assert.equal(readEventsOfKind(store, "default", "code.patch").length, 0);
      const done = await rpc.call(
        "code.patch",
        { edits: [{ range: s.range, text: PY.good }] },
        ctx,
      ) as {
        patch_id: string;
        seq: number;
      };
      const [record] = readEventsOfKind(store, "default", "code.patch");
      assert.equal(record.seq, done.seq);
      const body = record.body as { patch_id: string; cell_id: string; files: { path: string }[] };
      assert.equal(body.patch_id, done.patch_id);
      assert.match(done.patch_id, /^pa_/);
      assert.equal(body.cell_id, "cell_1");
      assert.deepEqual(body.files.map((f) => f.path), [PY.file]);
      assert.equal(woken, 1);
      await assert.rejects(
        rpc.call("code.patch", { edits: [] }, ctx),
        (e) => isKlbrError(e, "invalid_input") && /^cannot call code\.patch: edits/.test(e.message),
      );
    });
  } finally {
    store.close();
    await Deno.remove(state, { recursive: true });
  }
});
