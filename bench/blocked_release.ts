/**
 * A state directory whose active behaviour release blocks `attention.plan`, so admission can
 * be measured while planning is stuck — without touching the checkout's `behavior/`.
 *
 * @module
 */

import { join } from "node:path";
import { REPO_ROOT, startBenchDaemon } from "./daemon.ts";
import { KlbrError } from "../runtime/core/mod.ts";
import { activateRelease } from "../store/tables/releases.ts";
import { requireSession } from "../store/tables/sessions.ts";
import { publishRelease } from "../store/maintenance/snapshot_hash.ts";
import { openStore } from "../store/store.ts";

/** The `attention.py` of the blocking release: it never returns within the hook timeout. */
export const BLOCKING_ATTENTION =
  `"""attention.plan that blocks: admission is measured while planning is stuck."""

import time


def plan(inputs: list[dict], session: dict) -> dict:
    """Sleep far past the host's hook timeout; the host records a failure each time."""
    time.sleep(3600)
    return {"consume": [], "routing": {}}
`;

/**
 * Creates `stateDir` with a daemon start, then, with the daemon stopped, publishes a copy of
 * `behavior/` whose `attention.py` is {@linkcode BLOCKING_ATTENTION} and activates it. The
 * next start keeps it: startup re-activates the checkout's release only when it differs from
 * the last startup activation. Returns the blocking release's id.
 *
 * @throws {KlbrError} `internal` when the first daemon does not stop cleanly; what
 *   `publishRelease` and `activateRelease` throw.
 * @example
 * ```ts
 * await prepareBlockedState({ stateDir, workspace, scratch });
 * const daemon = await startBenchDaemon({ stateDir, workspace });
 * ```
 */
export async function prepareBlockedState(
  options: {
    stateDir: string;
    workspace: string;
    scratch: string;
    /** The release's `attention.py`. @default {BLOCKING_ATTENTION} */
    attention?: string;
  },
): Promise<string> {
  const first = await startBenchDaemon({
    stateDir: options.stateDir,
    workspace: options.workspace,
  });
  const code = await first.stop();
  if (code !== 0) {
    throw new KlbrError(
      "internal",
      `cannot prepare a blocked state: the first daemon exited with ${code} (got ${code})`,
    );
  }
  const source = join(options.scratch, "blocking-behavior");
  await Deno.mkdir(source, { recursive: true });
  for (const entry of Deno.readDirSync(join(REPO_ROOT, "behavior"))) {
    if (entry.isFile) {
      await Deno.copyFile(join(REPO_ROOT, "behavior", entry.name), join(source, entry.name));
    }
  }
  await Deno.writeTextFile(
    join(source, "attention.py"),
    options.attention ?? BLOCKING_ATTENTION,
  );
  const store = openStore(options.stateDir, { create: false });
  try {
    const published = await publishRelease(store, {
      sourceDir: source,
      releasesDir: join(options.stateDir, "releases"),
    });
    activateRelease(store, {
      session: "default",
      expectedEpoch: requireSession(store, "default").behaviorEpoch,
      releaseId: published.id,
      reason: "bench: attention.plan blocks",
    });
    return published.id;
  } finally {
    store.close();
  }
}
