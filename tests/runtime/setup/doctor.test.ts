// `doctor`'s workbench checks against real Python: the package is imported with the
// interpreter the daemon will use, and each hook of the active release is imported as a hook
// worker loads it. A broken package or hook is a problem line with its error.

import assert from "node:assert/strict";
import { join } from "node:path";
import { initStateDir, REPO_ROOT, runDoctor } from "../../../runtime/setup/mod.ts";
import { activateRelease } from "../../../store/tables/releases.ts";
import { ensureSession, requireSession } from "../../../store/tables/sessions.ts";
import { publishRelease } from "../../../store/maintenance/snapshot_hash.ts";
import { openStore } from "../../../store/store.ts";

/** A state directory whose default session runs `behavior/` with `files` replaced. */
async function stateWith(root: string, files: Record<string, string> = {}): Promise<string> {
  const state = join(root, "state");
  await initStateDir(state);
  const source = join(root, "behavior-src");
  await copyDir(join(REPO_ROOT, "behavior"), source);
  for (const [name, text] of Object.entries(files)) {
    await Deno.writeTextFile(join(source, name), text);
  }
  const store = openStore(state, { create: false });
  try {
    ensureSession(store, "default");
    const release = await publishRelease(store, {
      sourceDir: source,
      releasesDir: join(state, "releases"),
    });
    activateRelease(store, {
      session: "default",
      expectedEpoch: requireSession(store, "default").behaviorEpoch,
      releaseId: release.id,
      reason: "test",
    });
  } finally {
    store.close();
  }
  return state;
}

async function copyDir(from: string, to: string) {
  await Deno.mkdir(to, { recursive: true });
  for await (const entry of Deno.readDir(from)) {
    if (entry.isDirectory && entry.name !== "__pycache__") {
      await copyDir(join(from, entry.name), join(to, entry.name));
    } else if (entry.isFile) await Deno.copyFile(join(from, entry.name), join(to, entry.name));
  }
}

async function doctor(state: string, repoRoot = REPO_ROOT) {
  const lines: string[] = [];
  const code = await runDoctor({
    stateDir: state,
    probeRoutes: false,
    repoRoot,
    print: (l) => lines.push(l),
  });
  return { code, text: lines.join("\n") };
}

async function withRoot(fn: (root: string) => Promise<void>) {
  const root = await Deno.makeTempDir({ prefix: "klbr-doctor-" });
  try {
    await fn(root);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
}

Deno.test("doctor imports the workbench package and the active release's hooks", async () => {
  await withRoot(async (root) => {
    const report = await doctor(await stateWith(root));
    assert.equal(report.code, 0, report.text);
    assert.match(
      report.text,
      /^workbench package [0-9a-f]{12} imports with python 3\.\d+\.\d+ at \//m,
    );
    assert.match(
      report.text,
      /^hooks of active release [0-9a-f]{12}: attention\.plan ok, model\.plan ok, context\.prepare ok, turn\.next ok$/m,
    );
  });
});

Deno.test("doctor names an active release's hook that does not import", async () => {
  await withRoot(async (root) => {
    const state = await stateWith(root, { "turn.py": "import klbr_no_such_module\n" });
    const report = await doctor(state);
    assert.equal(report.code, 1);
    assert.match(
      report.text,
      /^problem: hook turn\.next of active release [0-9a-f]{12}: cannot run hook turn\.next: importing .*turn\.py raised ModuleNotFoundError: No module named 'klbr_no_such_module'$/m,
    );
    assert.match(report.text, /^doctor: 1 problem\(s\)$/m);
  });
});

Deno.test("doctor reports a workbench package that does not import, with its error", async () => {
  await withRoot(async (root) => {
    const repo = join(root, "repo");
    await copyDir(join(REPO_ROOT, "workbench", "klbr"), join(repo, "workbench", "klbr"));
    await copyDir(join(REPO_ROOT, "behavior"), join(repo, "behavior"));
    await Deno.writeTextFile(join(repo, "workbench", "klbr", "cells.py"), "\ndef broken(:\n", {
      append: true,
    });
    const report = await doctor(await stateWith(root), repo);
    assert.equal(report.code, 1);
    assert.match(
      report.text,
      new RegExp(
        `^problem: workbench package ${
          join(repo, "workbench", "klbr")
        } does not import with python3: SyntaxError: `,
        "m",
      ),
    );
    assert.doesNotMatch(report.text, /^hooks of /m);
  });
});
