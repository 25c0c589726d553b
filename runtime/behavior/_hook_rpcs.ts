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
} from "../../store/tables/behavior_diagnostics.ts";
import { getFrame } from "../../store/tables/frames.ts";
import { getRelease } from "../../store/tables/releases.ts";
import { requireSession } from "../../store/tables/sessions.ts";
import type { Store } from "../../store/store.ts";
import { type BehaviorRef, HookName, KlbrError } from "../core/mod.ts";
import { defineRpc, type RpcCall } from "../kernel/mod.ts";
import { bindHook } from "./_bindings.ts";
import { runTrusted, type TrustedTestOptions } from "./_draft_test.ts";
import { DraftId, draftRef, ReleaseId, requireDraft } from "./_drafts.ts";
import { hookFixtures } from "./_hook_contracts.ts";
import { traceView } from "./_traces.ts";

/** What the `hooks.*` handlers need. */
export interface HookRpcOptions extends TrustedTestOptions {
  /**
   * The release the running turn is pinned to, with its frame; the active release and no
   * frame outside a turn. @default the active release
   */
  pinned?: () => { releaseId: string; frameId: string | null };
}

const TestParams = z.object({
  hook: HookName,
  args: z.record(z.string(), z.unknown()).optional(),
  trace_id: z.string().regex(/^tr_/, "expected a trace id").optional(),
  draft_id: DraftId.optional(),
  release_id: ReleaseId.optional(),
}).refine((p) => !(p.args && p.trace_id), "give args or trace_id, not both")
  .refine((p) => !(p.draft_id && p.release_id), "give draft_id or release_id, not both");

const ROLES = ["workbench"] as const;

/** `hooks.bind`: which function of a draft serves a hook. */
export const hooksBindRpc = defineRpc({
  name: "hooks.bind",
  summary: "Binds a hook of a draft to a function (`module:function`) of the draft.",
  roles: ROLES,
  action: "bind hook",
  args: z.object({ draft_id: DraftId, hook: HookName, target: z.string().min(1).max(256) }),
  reply: z.strictObject({ target: z.string(), bindings: z.unknown() }),
  handler: async (p, { deps }: RpcCall<HookRpcOptions>) => {
    const bindings = await bindHook(await requireDraft(deps.store, p.draft_id), p.hook, p.target);
    return { target: p.target, bindings };
  },
});

/** `hooks.test`: one hook on one input, in a throwaway worker. */
export const hooksTestRpc = defineRpc({
  name: "hooks.test",
  summary: "Runs one hook of a draft or release on given args, a kept trace's inputs or its " +
    "fixture, in a throwaway worker.",
  roles: ROLES,
  action: "test hook",
  args: TestParams,
  reply: z.strictObject({
    ok: z.boolean(),
    hook: HookName,
    release_id: z.string(),
    output: z.unknown(),
    error: z.unknown(),
    duration_ms: z.number(),
    trace_id: z.string().nullable(),
  }),
  handler: async (p, { deps }: RpcCall<HookRpcOptions>) => {
    const args = argsOf(deps, p);
    const tree = await treeOf(deps, p);
    const { hooks: [outcome] } = await runTrusted(deps, tree, {
      calls: [{ hook: p.hook, args }],
      origin: "test",
    });
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
});

/** `hooks.trace`: the kept invocation traces of a frame (the running one by default), or one. */
export const hooksTraceRpc = defineRpc({
  name: "hooks.trace",
  summary: "Reads the kept hook traces of a frame (the running turn's by default) or one trace.",
  roles: ROLES,
  action: "read traces",
  args: z.object({ target: z.string().min(1).max(64).nullable().optional() }),
  reply: z.union([
    z.strictObject({ traces: z.array(z.record(z.string(), z.unknown())) }),
    z.strictObject({ trace: z.record(z.string(), z.unknown()) }),
  ]),
  handler: (p, { deps }: RpcCall<HookRpcOptions>) => {
    const frameId = p.target ?? pinnedOf(deps).frameId;
    if (frameId === null) {
      throw new KlbrError(
        "invalid_input",
        "cannot read traces: no frame given and no turn is running (got no target)",
      );
    }
    return readTraces(deps.store, deps.session, frameId);
  },
});

/** `hooks.release`: the release the running turn is pinned to. */
export const hooksReleaseRpc = defineRpc({
  name: "hooks.release",
  summary: "Names the release the running turn is pinned to (the active one outside a turn).",
  roles: ROLES,
  args: z.object({}),
  reply: z.strictObject({ release_id: z.string(), frame_id: z.string().nullable() }),
  handler: (_p, { deps }: RpcCall<HookRpcOptions>) => {
    const pin = pinnedOf(deps);
    return { release_id: pin.releaseId, frame_id: pin.frameId };
  },
});

/**
 * The `hooks.*` RPCs of a session's cells, bound to {@linkcode HookRpcOptions}.
 *
 * @example
 * ```ts
 * bindRpcs(hookRpcs, { store, session, python, repoRoot, workspace, pinned });
 * ```
 */
export const hookRpcs = [hooksBindRpc, hooksTestRpc, hooksTraceRpc, hooksReleaseRpc];

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
  if (p.draft_id !== undefined) return await draftRef(options.store, p.draft_id);
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
