/**
 * Publishing and activating a variant of the checkout's `behavior/` on a stopped daemon's
 * state, for tests of hooks that fail or releases that break.
 *
 * @module
 */

import { REPO_ROOT } from "../../runtime/setup/mod.ts";
import { openStore } from "../../store/store.ts";
import { publishRelease } from "../../store/maintenance/snapshot_hash.ts";
import { activateRelease } from "../../store/tables/releases.ts";
import { requireSession } from "../../store/tables/sessions.ts";

/** Publishes `behavior/` with `files` replaced and activates it, on a stopped daemon's state. */
export async function activateVariant(stateDir: string, files: Record<string, string>) {
  const source = await Deno.makeTempDir({ prefix: "klbr-variant-" });
  try {
    for (const entry of Deno.readDirSync(`${REPO_ROOT}/behavior`)) {
      if (entry.isFile) {
        await Deno.copyFile(`${REPO_ROOT}/behavior/${entry.name}`, `${source}/${entry.name}`);
      }
    }
    for (const [name, text] of Object.entries(files)) {
      await Deno.writeTextFile(`${source}/${name}`, text);
    }
    const store = openStore(stateDir, { create: false });
    try {
      const published = await publishRelease(store, {
        sourceDir: source,
        releasesDir: `${stateDir}/releases`,
      });
      const epoch = requireSession(store, "default").behaviorEpoch;
      activateRelease(store, {
        session: "default",
        expectedEpoch: epoch,
        releaseId: published.id,
        reason: "test",
      });
      return published;
    } finally {
      store.close();
    }
  } finally {
    await Deno.remove(source, { recursive: true });
  }
}
