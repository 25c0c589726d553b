/**
 * Behaviour editing for the agent: drafts copied from the active release, a trusted test of
 * every hook in a throwaway worker, publication as an immutable release, activation by epoch
 * compare-and-swap, rollback to the last good release, and the diagnostics of candidates
 * that failed. These are the host side of the workbench's `behavior` object (`behavior.*`
 * RPCs); the `hooks.*` RPCs are in `_hook_rpcs.ts`.
 *
 * A draft lives in `<state>/drafts/<id>/`, never in the workspace. A candidate is published
 * only after the host itself ran each hook on its fixture and checked the result, and ran the
 * draft's own tests (`tests/test_*.py`) to a pass: a draft cannot declare itself tested. A failing test or publish keeps its diagnostics (each hook's
 * fixture, error and traceback) in the store, with a `candidate.failed` record, and beside
 * the draft as `<id>.diagnostics.json`.
 *
 * @module
 */

import { dirname, join } from "node:path";
import { z } from "zod";
import {
  type FailedCandidate,
  listFailedCandidates,
  recordFailedCandidate,
} from "../../store/tables/behavior_diagnostics.ts";
import { replaceFile } from "../../store/tables/files.ts";
import { getRelease } from "../../store/tables/releases.ts";
import { requireSession } from "../../store/tables/sessions.ts";
import { publishRelease, snapshotTree } from "../../store/maintenance/snapshot_hash.ts";
import { HookName, KlbrError, newId } from "../core/mod.ts";
import { defineRpc, type RpcCall, type RpcDefinition } from "../kernel/mod.ts";
import { runTrusted, type TestOutcome } from "./_draft_test.ts";
import {
  copyTree,
  draftDiagnosticsFile,
  draftDir,
  draftFile,
  DraftId,
  draftRef,
  ReleaseId,
  requireDraft,
} from "./_drafts.ts";
import { hookFixtures } from "./_hook_contracts.ts";
import { type HookRpcOptions, hookRpcs } from "./_hook_rpcs.ts";
import { rollbackTarget } from "./_rollback.ts";

/** What the `behavior.*` and `hooks.*` RPCs are bound to. */
export interface BehaviorEditingOptions extends HookRpcOptions {
  /** The one activation path (shared with the operator's `activate`). */
  activate: (releaseId: string, expectedEpoch: number, reason: string) => Promise<number>;
}

/** One hook's or one draft test's result in a draft test. */
export type HookCheck = Omit<TestOutcome, "output" | "duration_ms">;

const MAX_DRAFT_FILE_CHARS = 1 << 20;
const DraftPath = z.object({ draft_id: DraftId, path: z.string().min(1).max(256) });

const ROLES = ["workbench"] as const;
const Epoch = z.int().nonnegative();
const NoArgs = z.object({});
const ByDraft = z.object({ draft_id: DraftId });
const Checks = z.array(z.object({ hook: z.string(), ok: z.boolean() }));
const Activated = z.strictObject({ epoch: Epoch, release_id: z.string() });

/** `behavior.status`: the active release, its epoch and the last good release. */
export const behaviorStatusRpc = defineRpc({
  name: "behavior.status",
  summary: "Names the active release, the behaviour epoch and the last good release.",
  roles: ROLES,
  args: NoArgs,
  reply: z.strictObject({
    release_id: z.string().nullable(),
    epoch: Epoch,
    last_good: z.string().nullable(),
  }),
  handler: (_p, { deps }: RpcCall<BehaviorEditingOptions>) => {
    const row = requireSession(deps.store, deps.session);
    return {
      release_id: row.activeRelease,
      epoch: row.behaviorEpoch,
      last_good: row.lastGoodRelease,
    };
  },
});

/** `behavior.draft`: a writable copy of the active release under `<state>/drafts`. */
export const behaviorDraftRpc = defineRpc({
  name: "behavior.draft",
  summary: "Copies the active release into a new draft under `<state>/drafts`.",
  roles: ROLES,
  args: NoArgs,
  reply: z.strictObject({ draft_id: z.string(), base_release: z.string(), base_epoch: Epoch }),
  handler: async (_p, { deps }: RpcCall<BehaviorEditingOptions>) => {
    const row = requireSession(deps.store, deps.session);
    const release = getRelease(deps.store, row.activeRelease!)!;
    const id = newId("draft");
    await copyTree(release.path, draftDir(deps.store, id));
    return { draft_id: id, base_release: release.id, base_epoch: row.behaviorEpoch };
  },
});

/** `behavior.files`: the paths of a draft's files. */
export const behaviorFilesRpc = defineRpc({
  name: "behavior.files",
  summary: "Lists a draft's files.",
  roles: ROLES,
  action: "list draft files",
  args: ByDraft,
  reply: z.strictObject({ files: z.array(z.string()) }),
  handler: async (p, { deps }: RpcCall<BehaviorEditingOptions>) => {
    const dir = await requireDraft(deps.store, p.draft_id);
    return { files: (await snapshotTree(dir)).files.map((f) => f.path) };
  },
});

/** `behavior.read`: one file of a draft. */
export const behaviorReadRpc = defineRpc({
  name: "behavior.read",
  summary: "Reads one file of a draft.",
  roles: ROLES,
  action: "read draft file",
  args: DraftPath,
  reply: z.strictObject({ text: z.string() }),
  handler: async (p, { deps }: RpcCall<BehaviorEditingOptions>) => {
    const file = draftFile(await requireDraft(deps.store, p.draft_id), p.path);
    try {
      return { text: await Deno.readTextFile(file) };
    } catch (cause) {
      if (cause instanceof Deno.errors.NotFound) {
        throw new KlbrError(
          "not_found",
          `cannot read ${p.path}: no such file in draft ${p.draft_id}`,
        );
      }
      throw cause;
    }
  },
});

/** `behavior.write`: writes one file of a draft (temp file, then rename). */
export const behaviorWriteRpc = defineRpc({
  name: "behavior.write",
  summary: "Writes one file of a draft (a path inside the draft only).",
  roles: ROLES,
  action: "write draft file",
  args: DraftPath.extend({ text: z.string().max(MAX_DRAFT_FILE_CHARS) }),
  reply: z.strictObject({}),
  handler: async (p, { deps }: RpcCall<BehaviorEditingOptions>) => {
    const file = draftFile(await requireDraft(deps.store, p.draft_id), p.path);
    await Deno.mkdir(dirname(file), { recursive: true });
    await replaceFile(file, p.text, { mode: 0o644 });
    return {};
  },
});

/** `behavior.test`: every hook on its fixture and the draft's own tests, in a throwaway worker. */
export const behaviorTestRpc = defineRpc({
  name: "behavior.test",
  summary: "Runs every hook of a draft on its fixture and the draft's own tests in a " +
    "throwaway worker; a failure keeps its diagnostics.",
  roles: ROLES,
  action: "test draft",
  args: ByDraft,
  reply: z.strictObject({ ok: z.boolean(), checks: Checks, candidate_id: z.string().nullable() }),
  handler: async (p, { deps }: RpcCall<BehaviorEditingOptions>) => {
    const { treeId: _tested, ...report } = await testDraft(deps, p.draft_id, "test");
    return report;
  },
});

/**
 * `behavior.publish`: tests the draft, then publishes it as an immutable release.
 *
 * @throws {KlbrError} `release_invalid` when its hooks or tests failed the host's test.
 */
export const behaviorPublishRpc = defineRpc({
  name: "behavior.publish",
  summary: "Tests a draft as `behavior.test` does and publishes it as an immutable release " +
    "when every check passed.",
  roles: ROLES,
  action: "publish draft",
  args: ByDraft,
  reply: z.strictObject({ release_id: ReleaseId, checks: Checks }),
  handler: async (p, { deps }: RpcCall<BehaviorEditingOptions>) => {
    const report = await testDraft(deps, p.draft_id, "publish");
    if (!report.ok) {
      const failed = report.checks.filter((c) => !c.ok);
      const hooks = failed.some((c) => HookName.safeParse(c.hook).success);
      const tests = failed.some((c) => !HookName.safeParse(c.hook).success);
      const what = hooks && tests ? "hooks and tests" : hooks ? "hooks" : "tests";
      throw new KlbrError(
        "release_invalid",
        `cannot publish draft ${p.draft_id}: its ${what} failed the host's test (${
          failed.map((c) => `${c.hook}: ${c.detail}`).join("; ")
        }); diagnostics kept as ${report.candidate_id}`,
      );
    }
    // What is published is what was tested: a draft changed since (by another cell or job) is
    // refused.
    const published = await publishRelease(deps.store, {
      sourceDir: draftDir(deps.store, p.draft_id),
      releasesDir: join(deps.store.stateDir, "releases"),
      expectedId: report.treeId,
    });
    return { release_id: published.id, checks: report.checks };
  },
});

/** `behavior.activate`: the one activation path, by epoch compare-and-swap. */
export const behaviorActivateRpc = defineRpc({
  name: "behavior.activate",
  summary: "Activates a published release if the epoch is still `expected_epoch`.",
  roles: ROLES,
  action: "activate",
  args: z.object({ release_id: ReleaseId, expected_epoch: Epoch }),
  reply: Activated,
  handler: async (p, { deps }: RpcCall<BehaviorEditingOptions>) => {
    const epoch = await deps.activate(p.release_id, p.expected_epoch, "agent activate");
    return { epoch, release_id: p.release_id };
  },
});

/** `behavior.rollback`: activates the last good release. */
export const behaviorRollbackRpc = defineRpc({
  name: "behavior.rollback",
  summary: "Activates the last good release (or the one before the active release).",
  roles: ROLES,
  args: NoArgs,
  reply: Activated,
  handler: async (_p, { deps }: RpcCall<BehaviorEditingOptions>) => {
    const { target, row } = rollbackTarget(deps.store, deps.session);
    const epoch = await deps.activate(target, row.behaviorEpoch, "agent rollback");
    return { epoch, release_id: target };
  },
});

/** `behavior.candidates`: the kept diagnostics of failed candidates. */
export const behaviorCandidatesRpc = defineRpc({
  name: "behavior.candidates",
  summary: "Lists the kept diagnostics of drafts that failed a test or a publish.",
  roles: ROLES,
  action: "list candidates",
  args: z.object({ draft_id: DraftId.optional() }),
  reply: z.strictObject({ candidates: z.array(z.record(z.string(), z.unknown())) }),
  handler: (p, { deps }: RpcCall<BehaviorEditingOptions>) => {
    const candidates = listFailedCandidates(deps.store, deps.session, { draftId: p.draft_id });
    return { candidates: candidates.map(candidateView) };
  },
});

/**
 * The `behavior.*` and `hooks.*` RPCs of a session's cells, bound to
 * {@linkcode BehaviorEditingOptions}.
 *
 * @example
 * ```ts
 * new KernelSupervisor({ ..., rpc: bindRpcs(behaviorRpcs, options) });
 * ```
 */
export const behaviorRpcs: RpcDefinition<BehaviorEditingOptions>[] = [
  behaviorStatusRpc,
  behaviorDraftRpc,
  behaviorFilesRpc,
  behaviorReadRpc,
  behaviorWriteRpc,
  behaviorTestRpc,
  behaviorPublishRpc,
  behaviorActivateRpc,
  behaviorRollbackRpc,
  behaviorCandidatesRpc,
  ...hookRpcs,
];

/**
 * Runs every hook of a draft once on its fixture in a throwaway worker, then the draft's own
 * `tests/test_*.py` there; a failure keeps its diagnostics (in the store with a
 * `candidate.failed` record, and beside the draft). `treeId` is the hash of the tree tested.
 */
async function testDraft(
  options: BehaviorEditingOptions,
  id: string,
  action: "test" | "publish",
): Promise<{ ok: boolean; checks: HookCheck[]; candidate_id: string | null; treeId: string }> {
  const { store, session } = options;
  const tree = await draftRef(store, id);
  const treeId = tree.revision.slice("draft-".length);
  const fixtures = hookFixtures(Date.now());
  const { hooks, tests } = await runTrusted(options, tree, {
    calls: HookName.options.map((hook) => ({ hook, args: fixtures[hook] })),
    origin: "candidate",
    tests: true,
  });
  const checks = [...hooks.map(({ output: _o, duration_ms: _d, ...check }) => check), ...tests];
  const ok = checks.every((c) => c.ok);
  const file = draftDiagnosticsFile(store, id);
  if (ok) {
    await Deno.remove(file).catch((e) => {
      if (!(e instanceof Deno.errors.NotFound)) throw e;
    });
    return { ok, checks, candidate_id: null, treeId };
  }
  const { candidateId } = recordFailedCandidate(store, {
    session,
    draftId: id,
    revision: tree.revision,
    action,
    checks,
  });
  const kept = listFailedCandidates(store, session, { draftId: id, limit: 1 })[0];
  await Deno.writeTextFile(file, `${JSON.stringify(candidateView(kept), null, 2)}\n`);
  return { ok, checks, candidate_id: candidateId, treeId };
}

/**
 * A failed candidate as JSON, for `behavior.candidates` and `klbr candidates`.
 *
 * @example
 * ```ts
 * candidateView(candidate); // { id: "cd_…", draft_id, action: "publish", failing: ["turn.next"], … }
 * ```
 */
export function candidateView(candidate: FailedCandidate): Record<string, unknown> {
  return {
    id: candidate.id,
    draft_id: candidate.draftId,
    action: candidate.action,
    revision: candidate.revision,
    at: candidate.at,
    failing: candidate.failing,
    checks: candidate.checks,
  };
}
