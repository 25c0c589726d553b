// `skills.write` and `skills.delete`: the host writes managed skills for a cell, checked as the
// loader checks every skill, atomically, in one namespace with the builtin root.

import assert from "node:assert/strict";
import { join } from "node:path";
import { isKlbrError } from "../../../runtime/core/mod.ts";
import {
  bindRpcs,
  loadSkills,
  MAX_SKILL_BYTES,
  type RpcContext,
  RpcRegistry,
  type SkillChange,
  skillRpcDeps,
  skillRpcs,
} from "../../../runtime/kernel/mod.ts";

type Call = (method: string, params: Record<string, unknown>) => Promise<unknown>;

async function withRoots(
  fn: (
    call: Call,
    roots: { builtinRoot: string; managedRoot: string },
    changes: SkillChange[],
  ) => Promise<void>,
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "klbr-skill-writes-" });
  const roots = { builtinRoot: join(dir, "builtin"), managedRoot: join(dir, "state", "skills") };
  await Deno.mkdir(join(roots.builtinRoot, "code"), { recursive: true });
  await Deno.writeTextFile(join(roots.builtinRoot, "code", "SKILL.md"), "# code\n\nBuiltin.\n");
  const changes: SkillChange[] = [];
  const registry = new RpcRegistry(bindRpcs(
    skillRpcs,
    skillRpcDeps({
      roots,
      changed: (change) => void changes.push(change),
      offeredFrom: "the next turn",
    }),
  ));
  const ctx: RpcContext = {
    signal: new AbortController().signal,
    method: "",
    parent: "",
    cell: null,
  };
  try {
    await fn((method, params) => registry.call(method, params, ctx), roots, changes);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

async function refused(promise: Promise<unknown>, code: string, message: string): Promise<void> {
  await assert.rejects(promise, (error) => {
    assert.ok(isKlbrError(error), String(error));
    assert.equal(error.code, code);
    assert.equal(error.message, message);
    return true;
  });
}

Deno.test("`skills.write` writes a managed skill atomically; the loader offers it", async () => {
  await withRoots(async (call, roots, changes) => {
    const body = "# notes\n\nWhere the notes live.\n";
    const result = await call("skills.write", { id: "notes", body }) as Record<string, unknown>;
    const loaded = await loadSkills(roots);
    assert.deepEqual(result, {
      id: "notes",
      path: join(roots.managedRoot, "notes", "SKILL.md"),
      bytes: body.length,
      revision: loaded.payload.revision,
      offered_from: "the next turn",
    });
    assert.deepEqual(Object.keys(loaded.payload.bodies), ["code", "notes"]);
    assert.equal(loaded.payload.bodies.notes, body);
    // Only SKILL.md is left: no temp file beside it.
    const entries = [];
    for await (const e of Deno.readDir(join(roots.managedRoot, "notes"))) entries.push(e.name);
    assert.deepEqual(entries, ["SKILL.md"]);
    // A rewrite replaces the body; each change is told with the next set's revision.
    await call("skills.write", { id: "notes", body: "# notes\n\nMoved.\n" });
    const again = await loadSkills(roots);
    assert.equal(again.payload.bodies.notes, "# notes\n\nMoved.\n");
    assert.deepEqual(changes, [
      { action: "write", id: "notes", revision: loaded.payload.revision },
      { action: "write", id: "notes", revision: again.payload.revision },
    ]);
  });
});

Deno.test("`skills.write` refuses a bad id, a wrong title, an oversize or ill-formed body and a builtin id, writing nothing", async () => {
  await withRoots(async (call, roots, changes) => {
    const write = (id: string, body: string) => call("skills.write", { id, body });
    await refused(
      write("notes", "notes\n"),
      "skill_invalid",
      'cannot write skill "notes": the first non-empty line must be exactly "# notes" (got "notes")',
    );
    await refused(
      write("write", "# write\n"),
      "skill_invalid",
      'cannot write skill "write": the id is reserved by klbr.skills (got "write")',
    );
    await refused(
      write("import", "# import\n"),
      "skill_invalid",
      'cannot write skill "import": the id is a Python keyword (got "import")',
    );
    await refused(
      write("../x", "# ../x\n"),
      "skill_invalid",
      'cannot write skill "../x": the id must match ^[a-z][a-z0-9_]*$ and be at most 64 ' +
        'characters, so skills.<id> is a Python name (got "../x")',
    );
    const big = `# big\n${"x".repeat(MAX_SKILL_BYTES)}`;
    await refused(
      write("big", big),
      "skill_invalid",
      `cannot write skill "big": the body is larger than ${MAX_SKILL_BYTES} bytes (got ${big.length})`,
    );
    await refused(
      write("odd", "# odd\n\ud800\n"),
      "skill_invalid",
      'cannot write skill "odd": the body holds a lone surrogate, which UTF-8 cannot hold',
    );
    await refused(
      write("code", "# code\n\nMine.\n"),
      "skill_invalid",
      `cannot write skill "code": the builtin root holds this id (${
        join(roots.builtinRoot, "code")
      }); builtin and managed skills are one namespace, so a managed skill cannot replace or ` +
        "remove it: choose another id",
    );
    await refused(
      call("skills.write", { id: "notes" }),
      "invalid_input",
      'cannot write skill: body: Invalid input: expected string, received undefined (got {"id":"notes"})',
    );
    assert.deepEqual(changes, []);
    assert.equal(await Deno.stat(roots.managedRoot).catch(() => null), null, "nothing written");
  });
});

Deno.test("`skills.delete` removes a managed skill, refuses a builtin one and names an unknown one", async () => {
  await withRoots(async (call, roots, changes) => {
    await call("skills.write", { id: "notes", body: "# notes\n" });
    const deleted = await call("skills.delete", { id: "notes" }) as Record<string, unknown>;
    const loaded = await loadSkills(roots);
    assert.deepEqual(deleted, {
      id: "notes",
      revision: loaded.payload.revision,
      offered_from: "the next turn",
    });
    assert.deepEqual(Object.keys(loaded.payload.bodies), ["code"]);
    const left = [];
    for await (const e of Deno.readDir(roots.managedRoot)) left.push(e.name);
    assert.deepEqual(left, [], "the hidden rename is removed too");
    assert.deepEqual(changes.at(-1), {
      action: "delete",
      id: "notes",
      revision: loaded.payload.revision,
    });
    await refused(
      call("skills.delete", { id: "code" }),
      "skill_invalid",
      `cannot delete skill "code": the builtin root holds this id (${
        join(roots.builtinRoot, "code")
      }); builtin and managed skills are one namespace, so a managed skill cannot replace or ` +
        "remove it: choose another id",
    );
    await refused(
      call("skills.delete", { id: "gone" }),
      "not_found",
      `cannot delete skill "gone": no managed skill has this id (got ${
        join(roots.managedRoot, "gone")
      })`,
    );
  });
});

Deno.test("`skills.delete` removes a managed copy of a builtin id, which ends the clash", async () => {
  await withRoots(async (call, roots) => {
    // Put there by hand (an old checkout's skill): refused in both roots until one goes.
    await Deno.mkdir(join(roots.managedRoot, "code"), { recursive: true });
    await Deno.writeTextFile(join(roots.managedRoot, "code", "SKILL.md"), "# code\n\nMine.\n");
    assert.deepEqual(Object.keys((await loadSkills(roots)).payload.bodies), []);
    await call("skills.delete", { id: "code" });
    const loaded = await loadSkills(roots);
    assert.equal(loaded.payload.bodies.code, "# code\n\nBuiltin.\n");
  });
});

Deno.test("`skills.write` refuses a managed directory that is a symlink, and leaves it", async () => {
  await withRoots(async (call, roots) => {
    const elsewhere = join(roots.builtinRoot, "..", "elsewhere");
    await Deno.mkdir(elsewhere);
    await Deno.mkdir(roots.managedRoot, { recursive: true });
    await Deno.symlink(elsewhere, join(roots.managedRoot, "notes"));
    await refused(
      call("skills.write", { id: "notes", body: "# notes\n" }),
      "skill_invalid",
      `cannot write skill "notes": ${join(roots.managedRoot, "notes")} is not a plain directory`,
    );
    const inside = [];
    for await (const e of Deno.readDir(elsewhere)) inside.push(e.name);
    assert.deepEqual(inside, []);
  });
});
