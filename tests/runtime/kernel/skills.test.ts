import assert from "node:assert/strict";
import { join } from "node:path";
import { isKlbrError } from "../../../runtime/core/mod.ts";
import {
  loadSkills,
  MAX_SKILL_BYTES,
  skillRoots,
  skillsRevision,
} from "../../../runtime/kernel/mod.ts";

/** Two empty roots in a fresh temp dir, removed when the test's `await using` ends. */
async function roots() {
  const dir = await Deno.makeTempDir({ prefix: "klbr-skills-" });
  const builtinRoot = join(dir, "builtin");
  const managedRoot = join(dir, "managed");
  await Deno.mkdir(builtinRoot);
  await Deno.mkdir(managedRoot);
  return {
    dir,
    builtinRoot,
    managedRoot,
    [Symbol.asyncDispose]: () => Deno.remove(dir, { recursive: true }),
  };
}

async function writeSkill(root: string, id: string, body: string | Uint8Array) {
  await Deno.mkdir(join(root, id), { recursive: true });
  const path = join(root, id, "SKILL.md");
  if (typeof body === "string") await Deno.writeTextFile(path, body);
  else await Deno.writeFile(path, body);
}

function rootsOf(r: { builtinRoot: string; managedRoot: string }) {
  return { builtinRoot: r.builtinRoot, managedRoot: r.managedRoot };
}

function reasonOf(refused: { id: string; root: string; reason: string }[], id: string) {
  const found = refused.filter((r) => r.id === id);
  assert.equal(found.length, 1, `expected one refusal of ${id}, got ${JSON.stringify(refused)}`);
  return found[0].reason;
}

Deno.test("`loadSkills()` offers valid skills from both roots with their whole bodies", async () => {
  await using r = await roots();
  await writeSkill(r.builtinRoot, "workspace", "# workspace\n\nUse open_file.\n");
  await writeSkill(r.managedRoot, "notes_2", "\n\n# notes_2\r\nbody\r\n");
  await Deno.writeTextFile(join(r.builtinRoot, "README.md"), "not a skill");
  const { payload, offered } = await loadSkills(rootsOf(r));
  assert.deepEqual(payload.bodies, {
    notes_2: "\n\n# notes_2\r\nbody\r\n",
    workspace: "# workspace\n\nUse open_file.\n",
  });
  assert.deepEqual(payload.roots, [r.builtinRoot, r.managedRoot]);
  assert.deepEqual(payload.refused, []);
  assert.match(payload.revision, /^[0-9a-f]{64}$/);
  assert.deepEqual(offered.map((s) => [s.id, s.root]), [
    ["notes_2", r.managedRoot],
    ["workspace", r.builtinRoot],
  ]);
});

Deno.test("`loadSkills()` treats missing roots as empty", async () => {
  await using r = await roots();
  const { payload } = await loadSkills({
    builtinRoot: join(r.dir, "absent-a"),
    managedRoot: join(r.dir, "absent-b"),
  });
  assert.deepEqual(payload.bodies, {});
  assert.deepEqual(payload.refused, []);
  assert.equal(payload.revision, await skillsRevision({}));
});

Deno.test("`loadSkills()` refuses an id in both roots in both, naming both roots", async () => {
  // Neither copy may silently win: the namespace is one, so a clash offers nothing.
  await using r = await roots();
  await writeSkill(r.builtinRoot, "shared", "# shared\nbuiltin\n");
  await writeSkill(r.managedRoot, "shared", "# shared\nmanaged\n");
  const { payload } = await loadSkills(rootsOf(r));
  assert.deepEqual(payload.bodies, {});
  const reason =
    `the id is defined in both roots (${r.builtinRoot} and ${r.managedRoot}); neither is offered until one is removed`;
  assert.deepEqual(payload.refused, [
    { id: "shared", root: r.builtinRoot, reason },
    { id: "shared", root: r.managedRoot, reason },
  ]);
});

Deno.test("`loadSkills()` refuses a skill directory without SKILL.md", async () => {
  await using r = await roots();
  await Deno.mkdir(join(r.builtinRoot, "empty"));
  const { payload } = await loadSkills(rootsOf(r));
  assert.equal(reasonOf(payload.refused, "empty"), "SKILL.md is missing");
  assert.deepEqual(payload.bodies, {});
});

Deno.test("`loadSkills()` refuses a title that is not exactly `# <id>`", async () => {
  await using r = await roots();
  await writeSkill(r.builtinRoot, "alpha", "# beta\n");
  await writeSkill(r.builtinRoot, "gamma", "intro line\n# gamma\n");
  await writeSkill(r.builtinRoot, "delta", "# delta \n");
  await writeSkill(r.builtinRoot, "eps", "");
  const { payload } = await loadSkills(rootsOf(r));
  assert.equal(
    reasonOf(payload.refused, "alpha"),
    'the first non-empty line must be exactly "# alpha" (got "# beta")',
  );
  assert.equal(
    reasonOf(payload.refused, "gamma"),
    'the first non-empty line must be exactly "# gamma" (got "intro line")',
  );
  assert.equal(
    reasonOf(payload.refused, "delta"),
    'the first non-empty line must be exactly "# delta" (got "# delta ")',
  );
  assert.equal(
    reasonOf(payload.refused, "eps"),
    'the first non-empty line must be exactly "# eps" (got "")',
  );
  assert.deepEqual(payload.bodies, {});
});

Deno.test("`loadSkills()` refuses ids that are not usable as `skills.<id>`", async () => {
  await using r = await roots();
  for (const id of ["Upper", "1st", "with-dash", "class", "revision"]) {
    await writeSkill(r.builtinRoot, id, `# ${id}\n`);
  }
  const { payload } = await loadSkills(rootsOf(r));
  assert.equal(
    reasonOf(payload.refused, "with-dash"),
    'the id must match ^[a-z][a-z0-9_]*$ and be at most 64 characters, so skills.<id> is a Python name (got "with-dash")',
  );
  assert.match(reasonOf(payload.refused, "Upper"), /^the id must match/);
  assert.match(reasonOf(payload.refused, "1st"), /^the id must match/);
  assert.equal(reasonOf(payload.refused, "class"), 'the id is a Python keyword (got "class")');
  assert.equal(
    reasonOf(payload.refused, "revision"),
    'the id is reserved by klbr.skills (got "revision")',
  );
  assert.deepEqual(payload.bodies, {});
});

Deno.test("`loadSkills()` refuses a symlinked skill directory and a symlinked SKILL.md", async () => {
  // A link could point anywhere; the host reads only what is really under a root.
  await using r = await roots();
  await writeSkill(r.dir, "elsewhere", "# elsewhere\n");
  await Deno.symlink(join(r.dir, "elsewhere"), join(r.builtinRoot, "elsewhere"));
  await Deno.mkdir(join(r.builtinRoot, "linked"));
  await Deno.writeTextFile(join(r.dir, "target.md"), "# linked\n");
  await Deno.symlink(join(r.dir, "target.md"), join(r.builtinRoot, "linked", "SKILL.md"));
  const { payload } = await loadSkills(rootsOf(r));
  assert.equal(reasonOf(payload.refused, "elsewhere"), "the skill directory is a symlink");
  assert.equal(reasonOf(payload.refused, "linked"), "SKILL.md is a symlink");
  assert.deepEqual(payload.bodies, {});
});

Deno.test("`loadSkills()` refuses a body over 256 KiB and accepts one of exactly 256 KiB", async () => {
  await using r = await roots();
  const title = "# big\n";
  await writeSkill(r.builtinRoot, "big", title + "x".repeat(MAX_SKILL_BYTES + 1 - title.length));
  const fits = "# fits\n";
  await writeSkill(r.managedRoot, "fits", fits + "y".repeat(MAX_SKILL_BYTES - fits.length));
  const { payload } = await loadSkills(rootsOf(r));
  assert.equal(
    reasonOf(payload.refused, "big"),
    `SKILL.md is larger than ${MAX_SKILL_BYTES} bytes (got ${MAX_SKILL_BYTES + 1})`,
  );
  assert.deepEqual(Object.keys(payload.bodies), ["fits"]);
});

Deno.test("`loadSkills()` refuses a body that is not UTF-8", async () => {
  await using r = await roots();
  const bytes = new Uint8Array([...new TextEncoder().encode("# latin\n"), 0xe9, 0x0a]);
  await writeSkill(r.builtinRoot, "latin", bytes);
  const { payload } = await loadSkills(rootsOf(r));
  assert.equal(reasonOf(payload.refused, "latin"), "SKILL.md is not valid UTF-8");
});

Deno.test("`loadSkills()` offers a SKILL.md saved with a byte-order mark, its body without the mark", async () => {
  await using r = await roots();
  const bytes = new Uint8Array([0xef, 0xbb, 0xbf, ...new TextEncoder().encode("# marked\nbody\n")]);
  await writeSkill(r.managedRoot, "marked", bytes);
  const { payload } = await loadSkills(rootsOf(r));
  assert.deepEqual(payload.refused, []);
  assert.equal(payload.bodies.marked, "# marked\nbody\n");
});

Deno.test("`loadSkills()` refuses a root that is a file and roots that are one directory", async () => {
  await using r = await roots();
  const file = join(r.dir, "file-root");
  await Deno.writeTextFile(file, "");
  const { payload } = await loadSkills({ builtinRoot: file, managedRoot: r.managedRoot });
  assert.deepEqual(payload.refused, [{
    id: "*",
    root: file,
    reason: "the root is not a directory",
  }]);
  await assert.rejects(
    loadSkills({ builtinRoot: r.builtinRoot, managedRoot: r.builtinRoot + "/" }),
    (e) =>
      isKlbrError(e, "invalid_input") &&
      e.message ===
        `cannot load skills: the builtin and managed roots are the same directory (got ${r.builtinRoot})`,
  );
  await assert.rejects(
    loadSkills({ builtinRoot: "", managedRoot: r.managedRoot }),
    (e) =>
      isKlbrError(e, "invalid_input") && e.message.startsWith("cannot load skills: builtinRoot"),
  );
});

Deno.test("`loadSkills()` revision changes with a body and not with the root it came from", async () => {
  await using r = await roots();
  await writeSkill(r.builtinRoot, "tips", "# tips\none\n");
  const first = (await loadSkills(rootsOf(r))).payload.revision;
  assert.equal((await loadSkills(rootsOf(r))).payload.revision, first);
  await writeSkill(r.builtinRoot, "tips", "# tips\ntwo\n");
  const second = (await loadSkills(rootsOf(r))).payload.revision;
  assert.notEqual(second, first);
  await Deno.remove(join(r.builtinRoot, "tips"), { recursive: true });
  await writeSkill(r.managedRoot, "tips", "# tips\ntwo\n");
  assert.equal((await loadSkills(rootsOf(r))).payload.revision, second);
});

Deno.test("`skillsRevision()` length-prefixes ids and bodies so pairs cannot run together", async () => {
  assert.notEqual(await skillsRevision({ a: "bc" }), await skillsRevision({ ab: "c" }));
  assert.equal(
    await skillsRevision({ b: "2", a: "1" }),
    await skillsRevision({ a: "1", b: "2" }),
  );
  // sha256 of nothing: the empty set has a fixed, known identity.
  assert.equal(
    await skillsRevision({}),
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
  );
});

Deno.test("`skillRoots()` uses KLBR_SKILLS_DIR when set and the checkout's `skills/` otherwise", () => {
  assert.deepEqual(skillRoots({ repoRoot: "/repo", stateDir: "/state" }), {
    builtinRoot: "/repo/skills",
    managedRoot: "/state/skills",
  });
  assert.deepEqual(skillRoots({ repoRoot: "/repo", stateDir: "/state", skillsDir: "/opt/sk" }), {
    builtinRoot: "/opt/sk",
    managedRoot: "/state/skills",
  });
  assert.equal(
    skillRoots({ repoRoot: "/repo", stateDir: "/state", skillsDir: "" }).builtinRoot,
    "/repo/skills",
  );
});
