/**
 * Building the UI: `ensureUiBuilt` bundles when the output is missing or older than a source,
 * leaves a fresh build alone, and fails with the bundler's words without touching the last
 * good build. Each test builds a copy of the UI in a temp checkout.
 *
 * @module
 */

import assert from "node:assert/strict";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { KlbrError } from "../../runtime/core/mod.ts";
import { ensureUiBuilt, UI_OUTPUTS, uiIsStale } from "../../runtime/setup/mod.ts";

const REPO = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

async function copyDir(from: string, to: string): Promise<void> {
  await Deno.mkdir(to, { recursive: true });
  for await (const entry of Deno.readDir(from)) {
    if (entry.isDirectory) await copyDir(join(from, entry.name), join(to, entry.name));
    else if (entry.isFile) await Deno.copyFile(join(from, entry.name), join(to, entry.name));
  }
}

/** A temp checkout with the UI sources, the config and the shared npm packages. */
async function tempCheckout(): Promise<string> {
  const root = await Deno.makeTempDir({ prefix: "klbr-ui-build-" });
  await copyDir(join(REPO, "ui", "src"), join(root, "ui", "src"));
  await copyDir(join(REPO, "ui", "static"), join(root, "ui", "static"));
  await copyDir(join(REPO, "runtime", "core"), join(root, "runtime", "core"));
  for (const name of ["deno.json", "deno.lock"]) {
    await Deno.copyFile(join(REPO, name), join(root, name));
  }
  await Deno.symlink(join(REPO, "node_modules"), join(root, "node_modules"));
  return root;
}

async function mtime(path: string): Promise<number> {
  return (await Deno.stat(path)).mtime!.getTime();
}

/** Moves a file's modification time into the future, as an edit after the build would. */
async function touchLater(path: string, byMs = 60_000): Promise<void> {
  const later = new Date((await mtime(path)) + byMs);
  await Deno.utime(path, later, later);
}

Deno.test("`ensureUiBuilt()` builds a missing UI into ui/dist with every output", async () => {
  const root = await tempCheckout();
  try {
    const dist = await ensureUiBuilt({ repoRoot: root });
    assert.equal(dist, join(root, "ui", "dist"));
    const names = [];
    for await (const entry of Deno.readDir(dist)) names.push(entry.name);
    // Only the outputs: the temp build directory is gone.
    assert.deepEqual(names.sort(), [...UI_OUTPUTS].sort());
    const app = await Deno.readTextFile(join(dist, "app.js"));
    assert.match(app, /Skip to the message box/);
    // Offline: every module is inlined, so the page imports nothing from anywhere.
    assert.doesNotMatch(app, /^\s*(import|export)\s/m);
    assert.doesNotMatch(app, /\bimport\(/);
    const html = await Deno.readTextFile(join(dist, "index.html"));
    assert.match(html, /<script type="module" src="\/app.js"><\/script>/);
    const references = [...html.matchAll(/(?:src|href)="([^"]*)"/g)].map((m) => m[1]);
    assert.deepEqual(references.filter((r) => !r.startsWith("/") && !r.startsWith("data:")), []);
    assert.equal(await uiIsStale(root), false);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("`ensureUiBuilt()` leaves a build that is newer than every source alone", async () => {
  const root = await tempCheckout();
  try {
    await ensureUiBuilt({ repoRoot: root });
    const app = join(root, "ui", "dist", "app.js");
    await Deno.writeTextFile(app, "// marker: not rebuilt\n");
    await touchLater(app);
    for (const name of UI_OUTPUTS) await touchLater(join(root, "ui", "dist", name));
    await ensureUiBuilt({ repoRoot: root });
    assert.equal(await Deno.readTextFile(app), "// marker: not rebuilt\n");
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("`ensureUiBuilt()` rebuilds when a source is newer than the build", async () => {
  const root = await tempCheckout();
  try {
    await ensureUiBuilt({ repoRoot: root });
    const app = join(root, "ui", "dist", "app.js");
    await Deno.writeTextFile(app, "// stale\n");
    await touchLater(join(root, "ui", "src", "format.ts"), 3_600_000);
    assert.equal(await uiIsStale(root), true);
    await ensureUiBuilt({ repoRoot: root });
    assert.match(await Deno.readTextFile(app), /Skip to the message box/);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("`ensureUiBuilt()` rebuilds when a record schema in runtime/core is newer than the build", async () => {
  // The page bundles the shared record schemas: a changed schema must reach the page.
  const root = await tempCheckout();
  try {
    await ensureUiBuilt({ repoRoot: root });
    const app = join(root, "ui", "dist", "app.js");
    assert.match(await Deno.readTextFile(app), /session\.stalled/, "the schemas are bundled");
    for (const name of UI_OUTPUTS) await touchLater(join(root, "ui", "dist", name));
    await Deno.writeTextFile(app, "// stale\n");
    assert.equal(await uiIsStale(root), false);
    await touchLater(join(root, "runtime", "core", "_records.ts"), 3_600_000);
    assert.equal(await uiIsStale(root), true);
    await ensureUiBuilt({ repoRoot: root });
    assert.match(await Deno.readTextFile(app), /Skip to the message box/);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("`ensureUiBuilt()` rebuilds when a static file is newer than the build", async () => {
  const root = await tempCheckout();
  try {
    await ensureUiBuilt({ repoRoot: root });
    const css = join(root, "ui", "static", "style.css");
    await Deno.writeTextFile(css, "/* edited */\n");
    await touchLater(css, 3_600_000);
    await ensureUiBuilt({ repoRoot: root });
    assert.equal(await Deno.readTextFile(join(root, "ui", "dist", "style.css")), "/* edited */\n");
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("`uiIsStale()` is true when one output is missing", async () => {
  const root = await tempCheckout();
  try {
    await ensureUiBuilt({ repoRoot: root });
    await Deno.remove(join(root, "ui", "dist", "build.json"));
    assert.equal(await uiIsStale(root), true);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("`ensureUiBuilt()` refuses a checkout without ui/src/main.tsx with `not_found`", async () => {
  const root = await Deno.makeTempDir({ prefix: "klbr-ui-build-" });
  try {
    await assert.rejects(ensureUiBuilt({ repoRoot: root }), (error) => {
      assert.ok(error instanceof KlbrError);
      assert.equal(error.code, "not_found");
      assert.equal(
        error.message,
        `cannot build ui: no entry module (got ${join(root, "ui", "src", "main.tsx")})`,
      );
      return true;
    });
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("`ensureUiBuilt()` reports a bundler failure and keeps the last good build", async () => {
  const root = await tempCheckout();
  try {
    await ensureUiBuilt({ repoRoot: root });
    const app = join(root, "ui", "dist", "app.js");
    const good = await Deno.readTextFile(app);
    const source = join(root, "ui", "src", "format.ts");
    await Deno.writeTextFile(source, "export const broken = ;\n");
    await touchLater(source, 3_600_000);
    await assert.rejects(ensureUiBuilt({ repoRoot: root }), (error) => {
      assert.ok(error instanceof KlbrError);
      assert.equal(error.code, "internal");
      assert.match(
        error.message,
        /^cannot build ui: deno bundle exited with 1 \(got ".*format\.ts/s,
      );
      return true;
    });
    assert.equal(await Deno.readTextFile(app), good);
    const names = [];
    for await (const entry of Deno.readDir(join(root, "ui", "dist"))) names.push(entry.name);
    assert.deepEqual(names.sort(), [...UI_OUTPUTS].sort(), "no temp directory is left behind");
    assert.equal(await uiIsStale(root), true, "the next call tries again");
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("`ensureUiBuilt()` reports a bundler that cannot be started", async () => {
  const root = await tempCheckout();
  try {
    await assert.rejects(
      ensureUiBuilt({ repoRoot: root, deno: join(root, "no-such-deno") }),
      Deno.errors.NotFound,
    );
    assert.equal(await uiIsStale(root), true);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("`ensureUiBuilt()` ends a bundler that runs past `timeoutMs` with `internal`, keeping no temp build", async () => {
  const root = await tempCheckout();
  // A "deno" that never finishes: exec keeps it one process, so the timeout's signal ends it.
  const slow = join(root, "slow-deno");
  await Deno.writeTextFile(slow, "#!/bin/sh\nexec sleep 30\n");
  await Deno.chmod(slow, 0o755);
  try {
    await assert.rejects(
      ensureUiBuilt({ repoRoot: root, deno: slow, timeoutMs: 200 }),
      (error: unknown) => {
        assert.ok(error instanceof KlbrError);
        assert.equal(error.code, "internal");
        assert.equal(
          error.message,
          "cannot build ui: deno bundle ran longer than the limit (got 200 ms)",
        );
        return true;
      },
    );
    const left = [];
    for await (const entry of Deno.readDir(join(root, "ui", "dist"))) left.push(entry.name);
    assert.deepEqual(left, [], "the temp build directory is removed");
    assert.equal(await uiIsStale(root), true, "the next call tries again");
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});
