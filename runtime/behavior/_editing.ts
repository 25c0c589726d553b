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
} from "../../store/behavior_diagnostics.ts";
import { getRelease } from "../../store/releases.ts";
import { requireSession } from "../../store/sessions.ts";
import { publishRelease, snapshotTree } from "../../store/snapshot_hash.ts";
import { HookName, KlbrError, newId } from "../core/mod.ts";
import type { RpcHandler } from "../kernel/mod.ts";
import { runDraftChecks, type TestOutcome, type TrustedTestOptions } from "./_draft_test.ts";
import {
  copyTree,
  draftDiagnosticsFile,
  draftDir,
  draftFile,
  DraftId,
  parseParams,
  requireDraft,
} from "./_drafts.ts";
import { hookFixtures } from "./_hook_contracts.ts";
import { hookHandlers } from "./_hook_rpcs.ts";
import { rollbackTarget } from "./_rollback.ts";

/** Options for {@linkcode behaviorHandlers}. */
export interface BehaviorEditingOptions extends TrustedTestOptions {
  /** The one activation path (shared with the operator's `activate`). */
  activate: (releaseId: string, expectedEpoch: number, reason: string) => Promise<number>;
  /**
   * The release the running turn is pinned to, with its frame; the active release and no
   * frame outside a turn. @default the active release
   */
  pinned?: () => { releaseId: string; frameId: string | null };
}

/** One hook's or one draft test's result in a draft test. */
export type HookCheck = Omit<TestOutcome, "output" | "duration_ms">;

const MAX_DRAFT_FILE_CHARS = 1 << 20;
const DraftPath = z.object({ draft_id: DraftId, path: z.string().min(1).max(256) });

/**
 * Returns the `behavior.*` and `hooks.*` RPC handlers for one session's workbench.
 *
 * @example
 * ```ts
 * new KernelSupervisor({ ..., rpc: { ...behaviorHandlers(options) } });
 * ```
 */
export function behaviorHandlers(options: BehaviorEditingOptions): Record<string, RpcHandler> {
  return { ...draftHandlers(options), ...releaseHandlers(options), ...hookHandlers(options) };
}

/** Taking a draft and working on its files: `status`, `draft`, `files`, `read`, `write`. */
function draftHandlers(options: BehaviorEditingOptions): Record<string, RpcHandler> {
  const { store, session } = options;
  return {
    "behavior.status": () => {
      const row = requireSession(store, session);
      return Promise.resolve({
        release_id: row.activeRelease,
        epoch: row.behaviorEpoch,
        last_good: row.lastGoodRelease,
      });
    },
    "behavior.draft": async () => {
      const row = requireSession(store, session);
      const release = getRelease(store, row.activeRelease!)!;
      const id = newId("draft");
      await copyTree(release.path, draftDir(store, id));
      return { draft_id: id, base_release: release.id, base_epoch: row.behaviorEpoch };
    },
    "behavior.files": async (params) => {
      const { draft_id } = parseParams(z.object({ draft_id: DraftId }), params, "list draft files");
      const dir = await requireDraft(store, draft_id);
      return { files: (await snapshotTree(dir)).files.map((f) => f.path) };
    },
    "behavior.read": async (params) => {
      const { draft_id, path } = parseParams(DraftPath, params, "read draft file");
      const file = draftFile(await requireDraft(store, draft_id), path);
      try {
        return { text: await Deno.readTextFile(file) };
      } catch (cause) {
        if (cause instanceof Deno.errors.NotFound) {
          throw new KlbrError(
            "not_found",
            `cannot read ${path}: no such file in draft ${draft_id}`,
          );
        }
        throw cause;
      }
    },
    "behavior.write": async (params) => {
      const { draft_id, path, text } = parseParams(
        DraftPath.extend({ text: z.string().max(MAX_DRAFT_FILE_CHARS) }),
        params,
        "write draft file",
      );
      const file = draftFile(await requireDraft(store, draft_id), path);
      await Deno.mkdir(dirname(file), { recursive: true });
      const temp = `${file}.${crypto.randomUUID()}.tmp`;
      await Deno.writeTextFile(temp, text, { mode: 0o644 });
      await Deno.rename(temp, file);
      return {};
    },
  };
}

/** Testing, publishing and switching releases, and the kept diagnostics of failed candidates. */
function releaseHandlers(options: BehaviorEditingOptions): Record<string, RpcHandler> {
  const { store, session } = options;
  const test = (id: string, action: "test" | "publish") => testDraft(options, id, action);
  return {
    "behavior.test": async (params) => {
      const { draft_id } = parseParams(z.object({ draft_id: DraftId }), params, "test draft");
      return await test(draft_id, "test");
    },
    "behavior.publish": async (params) => {
      const { draft_id } = parseParams(z.object({ draft_id: DraftId }), params, "publish draft");
      const report = await test(draft_id, "publish");
      if (!report.ok) {
        const failed = report.checks.filter((c) => !c.ok);
        const hooks = failed.some((c) => HookName.safeParse(c.hook).success);
        const tests = failed.some((c) => !HookName.safeParse(c.hook).success);
        const what = hooks && tests ? "hooks and tests" : hooks ? "hooks" : "tests";
        throw new KlbrError(
          "release_invalid",
          `cannot publish draft ${draft_id}: its ${what} failed the host's test (${
            failed.map((c) => `${c.hook}: ${c.detail}`).join("; ")
          }); diagnostics kept as ${report.candidate_id}`,
        );
      }
      const published = await publishRelease(store, {
        sourceDir: draftDir(store, draft_id),
        releasesDir: join(store.stateDir, "releases"),
      });
      return { release_id: published.id, checks: report.checks };
    },
    "behavior.activate": async (params) => {
      const { release_id, expected_epoch } = parseParams(
        z.object({
          release_id: z.string().regex(/^[0-9a-f]{64}$/, "expected a release id"),
          expected_epoch: z.number().int().nonnegative(),
        }),
        params,
        "activate",
      );
      const epoch = await options.activate(release_id, expected_epoch, "agent activate");
      return { epoch, release_id };
    },
    "behavior.rollback": async () => {
      const { target, row } = rollbackTarget(store, session);
      const epoch = await options.activate(target, row.behaviorEpoch, "agent rollback");
      return { epoch, release_id: target };
    },
    // deno-lint-ignore require-await
    "behavior.candidates": async (params) => {
      const { draft_id } = parseParams(
        z.object({ draft_id: DraftId.optional() }),
        params,
        "list candidates",
      );
      const candidates = listFailedCandidates(store, session, { draftId: draft_id });
      return { candidates: candidates.map(candidateView) };
    },
  };
}

/**
 * Runs every hook of a draft once on its fixture in a throwaway worker, then the draft's own
 * `tests/test_*.py` there; a failure keeps its diagnostics (in the store with a
 * `candidate.failed` record, and beside the draft).
 */
async function testDraft(
  options: BehaviorEditingOptions,
  id: string,
  action: "test" | "publish",
): Promise<{ ok: boolean; checks: HookCheck[]; candidate_id: string | null }> {
  const { store, session } = options;
  const dir = await requireDraft(store, id);
  const revision = `draft-${(await snapshotTree(dir)).id}`;
  const fixtures = hookFixtures(Date.now());
  const { hooks, tests } = await runDraftChecks(
    options,
    { revision, path: dir },
    HookName.options.map((hook) => ({ hook, args: fixtures[hook] })),
  );
  const checks = [...hooks.map(({ output: _o, duration_ms: _d, ...check }) => check), ...tests];
  const ok = checks.every((c) => c.ok);
  const file = draftDiagnosticsFile(store, id);
  if (ok) {
    await Deno.remove(file).catch((e) => {
      if (!(e instanceof Deno.errors.NotFound)) throw e;
    });
    return { ok, checks, candidate_id: null };
  }
  const { candidateId } = recordFailedCandidate(store, {
    session,
    draftId: id,
    revision,
    action,
    checks,
  });
  const kept = listFailedCandidates(store, session, { draftId: id, limit: 1 })[0];
  await Deno.writeTextFile(file, `${JSON.stringify(candidateView(kept), null, 2)}\n`);
  return { ok, checks, candidate_id: candidateId };
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
