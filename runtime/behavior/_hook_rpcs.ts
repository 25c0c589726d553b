/**
 * The host side of the workbench's `hooks` object: `hooks.bind` (which function serves a
 * hook in a draft), `hooks.test` (one hook on one input, in a throwaway worker),
 * `hooks.trace` (the kept invocation traces) and `hooks.release` (the release the running
 * turn is pinned to).
 *
 * @module
 */

import { z } from "zod";
import {
  getTrace,
  type HookTrace,
  MAX_TRACES,
  tracesOfFrame,
} from "../../store/behavior_diagnostics.ts";
import { getFrame } from "../../store/frames.ts";
import { getRelease } from "../../store/releases.ts";
import { requireSession } from "../../store/sessions.ts";
import { snapshotTree } from "../../store/snapshot_hash.ts";
import type { Store } from "../../store/store.ts";
import { type BehaviorRef, HookName, KlbrError } from "../core/mod.ts";
import type { RpcHandler } from "../kernel/mod.ts";
import { bindHook } from "./_bindings.ts";
import { runTrusted, type TrustedTestOptions } from "./_draft_test.ts";
import { DraftId, parseParams, requireDraft } from "./_drafts.ts";
import { hookFixtures } from "./_hook_contracts.ts";
import { traceView } from "./_traces.ts";

/** What the `hooks.*` handlers need. */
export interface HookRpcOptions extends TrustedTestOptions {
  /** The release the running turn is pinned to, with its frame. @default the active release */
  pinned?: () => { releaseId: string; frameId: string | null };
}

const TestParams = z.object({
  hook: HookName,
  args: z.record(z.string(), z.unknown()).optional(),
  trace_id: z.string().regex(/^tr_/, "expected a trace id").optional(),
  draft_id: DraftId.optional(),
  release_id: z.string().regex(/^[0-9a-f]{64}$/, "expected a release id").optional(),
}).refine((p) => !(p.args && p.trace_id), "give args or trace_id, not both")
  .refine((p) => !(p.draft_id && p.release_id), "give draft_id or release_id, not both");

/**
 * Returns the `hooks.*` RPC handlers of one session.
 *
 * @example
 * ```ts
 * const handlers = hookHandlers({ store, session, python, repoRoot, workspace, pinned });
 * ```
 */
export function hookHandlers(options: HookRpcOptions): Record<string, RpcHandler> {
  const { store, session } = options;
  const pinned = () => pinnedOf(options);
  return {
    "hooks.bind": async (params) => {
      const p = parseParams(
        z.object({ draft_id: DraftId, hook: HookName, target: z.string().min(1).max(256) }),
        params,
        "bind hook",
      );
      const bindings = await bindHook(await requireDraft(store, p.draft_id), p.hook, p.target);
      return { target: p.target, bindings };
    },
    "hooks.test": async (params) => {
      const p = parseParams(TestParams, params, "test hook");
      const args = argsOf(options, p);
      const tree = await treeOf(options, p);
      const [outcome] = await runTrusted(options, tree, [{ hook: p.hook, args }], "test");
      return {
        ok: outcome.ok,
        hook: p.hook,
        release_id: tree.revision,
        output: outcome.output ?? null,
        error: outcome.error,
        duration_ms: outcome.duration_ms,
        trace_id: outcome.trace_id,
      };
    },
    // deno-lint-ignore require-await
    "hooks.trace": async (params) => {
      const { target } = parseParams(
        z.object({ target: z.string().min(1).max(64).nullable().optional() }),
        params,
        "read traces",
      );
      const frameId = target ?? pinned().frameId;
      if (frameId === null) {
        throw new KlbrError(
          "invalid_input",
          "cannot read traces: no frame given and no turn is running",
        );
      }
      return readTraces(store, session, frameId);
    },
    // deno-lint-ignore require-await
    "hooks.release": async () => {
      const pin = pinned();
      return { release_id: pin.releaseId, frame_id: pin.frameId };
    },
  };
}

type TestRequest = z.infer<typeof TestParams>;

function pinnedOf(options: HookRpcOptions): { releaseId: string; frameId: string | null } {
  if (options.pinned) return options.pinned();
  return {
    releaseId: requireSession(options.store, options.session).activeRelease!,
    frameId: null,
  };
}

/** The tree a `hooks.test` runs: the draft, else the release, else the pinned release. */
async function treeOf(options: HookRpcOptions, p: TestRequest): Promise<BehaviorRef> {
  if (p.draft_id !== undefined) {
    const dir = await requireDraft(options.store, p.draft_id);
    return { revision: `draft-${(await snapshotTree(dir)).id}`, path: dir };
  }
  const id = p.release_id ?? pinnedOf(options).releaseId;
  const release = getRelease(options.store, id);
  if (release === undefined) {
    throw new KlbrError(
      "not_found",
      `cannot test hook: release ${id.slice(0, 12)} was never published`,
    );
  }
  return { revision: release.id, path: release.path };
}

/** The arguments a `hooks.test` runs with: given, a trace's inputs, or the standard fixture. */
function argsOf(options: HookRpcOptions, p: TestRequest): Record<string, unknown> {
  if (p.args !== undefined) return p.args;
  if (p.trace_id === undefined) return hookFixtures(Date.now())[p.hook];
  const trace = sessionTrace(options.store, options.session, p.trace_id);
  if (trace.truncated && (trace.inputs as { truncated?: unknown })?.truncated === true) {
    throw new KlbrError(
      "invalid_input",
      `cannot replay trace ${p.trace_id}: its inputs were over the size bound and are kept cut`,
    );
  }
  return trace.inputs as Record<string, unknown>;
}

function sessionTrace(store: Store, session: string, id: string): HookTrace {
  const trace = getTrace(store, id);
  if (trace === undefined || trace.session !== session) {
    throw new KlbrError(
      "not_found",
      `cannot read trace ${id}: no such trace in session ${session} (never recorded, or pruned: a session keeps its newest ${MAX_TRACES} of each kind)`,
    );
  }
  return trace;
}

/**
 * The kept traces of `target` in `session`: `{traces}` (oldest first) for a frame id,
 * `{trace}` for a trace id. Needs no worker, model or hook: the operator reads them too.
 *
 * @throws {KlbrError} `not_found` for a frame or trace that is not in the session (or pruned).
 * @example
 * ```ts
 * readTraces(store, "default", "fr_01J…"); // { traces: [{ id: "tr_…", hook: "attention.plan", … }] }
 * ```
 */
export function readTraces(
  store: Store,
  session: string,
  target: string,
): { traces: Record<string, unknown>[] } | { trace: Record<string, unknown> } {
  if (target.startsWith("tr_")) return { trace: traceView(sessionTrace(store, session, target)) };
  const frame = getFrame(store, target);
  if (frame === undefined || frame.session !== session) {
    throw new KlbrError(
      "not_found",
      `cannot read traces: no frame ${target} in session ${session}`,
    );
  }
  return { traces: tracesOfFrame(store, target).map(traceView) };
}
