/**
 * What the host-side behaviour tests share (no daemon): the `behavior`/`hooks` RPC handlers
 * over a real store with the checkout's behaviour published and active, and a rejection check.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { behaviorRpcs } from "../../../runtime/behavior/mod.ts";
import { bindRpcs, RpcRegistry } from "../../../runtime/kernel/mod.ts";
import { isKlbrError } from "../../../runtime/core/mod.ts";
import { REPO_ROOT } from "../../../runtime/setup/mod.ts";
import { activateRelease, markLastGood } from "../../../store/tables/releases.ts";
import { ensureSession } from "../../../store/tables/sessions.ts";
import { publishRelease } from "../../../store/maintenance/snapshot_hash.ts";
import { openStore, type Store } from "../../../store/store.ts";
import type { Json } from "./_support.ts";

/** Calls one handler as a cell would, by method name. */
export type Call = (method: string, params?: Record<string, unknown>) => Promise<Json>;

/**
 * Runs `fn` with the handlers of session `default` (a session `other` exists too) on a fresh
 * store whose active and last good release is the checkout's `behavior/`; removes it after.
 */
export async function withEditor(
  fn: (call: Call, store: Store, release: string) => Promise<void>,
): Promise<void> {
  const state = await Deno.makeTempDir({ prefix: "klbr-editor-" });
  const store = openStore(state);
  try {
    ensureSession(store, "default");
    ensureSession(store, "other");
    const release = await publishRelease(store, {
      sourceDir: join(REPO_ROOT, "behavior"),
      releasesDir: join(state, "releases"),
    });
    activateRelease(store, {
      session: "default",
      expectedEpoch: 0,
      releaseId: release.id,
      reason: "test",
    });
    markLastGood(store, "default", release.id);
    const registry = new RpcRegistry(bindRpcs(behaviorRpcs, {
      store,
      session: "default",
      python: "python3",
      repoRoot: REPO_ROOT,
      workspace: state,
      activate: (releaseId, expectedEpoch, reason) =>
        Promise.resolve(
          activateRelease(store, { session: "default", expectedEpoch, releaseId, reason }).epoch,
        ),
    }));
    const ctx = { signal: new AbortController().signal, parent: "", cell: null };
    await fn(
      (method, params = {}) => registry.call(method, params, ctx) as Promise<Json>,
      store,
      release.id,
    );
  } finally {
    store.close();
    await Deno.remove(state, { recursive: true });
  }
}

/** Asserts `promise` rejects with a `KlbrError` of `code` whose message is or matches `message`. */
export async function rejects(
  promise: Promise<unknown>,
  code: string,
  message: RegExp | string,
): Promise<void> {
  try {
    await promise;
  } catch (error) {
    assert.ok(isKlbrError(error), String(error));
    assert.equal(error.code, code);
    if (typeof message === "string") assert.equal(error.message, message);
    else assert.match(error.message, message);
    return;
  }
  assert.fail("expected a rejection");
}
