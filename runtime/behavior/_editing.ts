/**
 * Behaviour editing for the agent: drafts copied from the active release, a trusted test of
 * every hook in a throwaway worker, publication as an immutable release, activation by epoch
 * compare-and-swap and rollback to the last good release. These are the host side of the
 * workbench's `behavior` object (`behavior.*` RPCs).
 *
 * A draft lives in `<state>/drafts/<id>/`, never in the workspace. A candidate is published
 * only after the host itself ran each hook on its fixture and checked the result: a draft
 * cannot declare itself tested.
 *
 * @module
 */

import { dirname, join, normalize, relative, resolve } from "node:path";
import { z } from "zod";
import { getRelease } from "../../store/releases.ts";
import { requireSession } from "../../store/sessions.ts";
import { publishRelease, snapshotTree } from "../../store/snapshot_hash.ts";
import type { Store } from "../../store/store.ts";
import {
  DEFAULT_HOOK_TIMEOUT_MS,
  describeIssues,
  HookName,
  KlbrError,
  newId,
} from "../core/mod.ts";
import { checkHookResult, hookFixtures } from "./_hook_contracts.ts";
import { type RpcHandler, spawnWorkbench } from "../kernel/mod.ts";

/** Options for {@linkcode behaviorHandlers}. */
export interface BehaviorEditingOptions {
  store: Store;
  session: string;
  python: string;
  repoRoot: string;
  /** The worker's cwd while a draft is tested. */
  workspace: string;
  /** The one activation path (shared with the operator's `activate`). */
  activate: (releaseId: string, expectedEpoch: number, reason: string) => Promise<number>;
  /** How long one hook may take in a test. @default {DEFAULT_HOOK_TIMEOUT_MS} */
  hookTimeoutMs?: number;
}

/** One hook's result in a draft test. */
export interface HookCheck {
  hook: HookName;
  ok: boolean;
  detail: string;
}

const MAX_DRAFT_FILE_CHARS = 1 << 20;
const DraftId = z.string().regex(/^dr_[0-9A-HJKMNP-TV-Z]{26}$/, "expected a draft id");
const DraftPath = z.object({ draft_id: DraftId, path: z.string().min(1).max(256) });

function parse<T extends z.ZodType>(schema: T, params: unknown, action: string): z.output<T> {
  const parsed = schema.safeParse(params);
  if (!parsed.success) {
    throw new KlbrError("invalid_input", `cannot ${action}: ${describeIssues(parsed.error)}`);
  }
  return parsed.data;
}

/**
 * Returns the `behavior.*` RPC handlers for one session's workbench.
 *
 * @example
 * ```ts
 * new KernelSupervisor({ ..., rpc: { ...behaviorHandlers(options) } });
 * ```
 */
export function behaviorHandlers(options: BehaviorEditingOptions): Record<string, RpcHandler> {
  const { store, session } = options;
  const draftsDir = join(store.stateDir, "drafts");
  const draftDir = (id: string) => join(draftsDir, id);

  const test = async (id: string): Promise<{ ok: boolean; checks: HookCheck[] }> => {
    const dir = await requireDraft(draftDir(id), id);
    const { id: revision } = await snapshotTree(dir);
    const checks = await testHooks(options, { revision: `draft-${revision}`, path: dir });
    return { ok: checks.every((c) => c.ok), checks };
  };

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
      await copyTree(release.path, draftDir(id));
      return { draft_id: id, base_release: release.id, base_epoch: row.behaviorEpoch };
    },
    "behavior.files": async (params) => {
      const { draft_id } = parse(z.object({ draft_id: DraftId }), params, "list draft files");
      const dir = await requireDraft(draftDir(draft_id), draft_id);
      return { files: (await snapshotTree(dir)).files.map((f) => f.path) };
    },
    "behavior.read": async (params) => {
      const { draft_id, path } = parse(DraftPath, params, "read draft file");
      const file = draftFile(await requireDraft(draftDir(draft_id), draft_id), path);
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
      const { draft_id, path, text } = parse(
        DraftPath.extend({ text: z.string().max(MAX_DRAFT_FILE_CHARS) }),
        params,
        "write draft file",
      );
      const file = draftFile(await requireDraft(draftDir(draft_id), draft_id), path);
      await Deno.mkdir(dirname(file), { recursive: true });
      const temp = `${file}.${crypto.randomUUID()}.tmp`;
      await Deno.writeTextFile(temp, text, { mode: 0o644 });
      await Deno.rename(temp, file);
      return {};
    },
    "behavior.test": async (params) => {
      const { draft_id } = parse(z.object({ draft_id: DraftId }), params, "test draft");
      return await test(draft_id);
    },
    "behavior.publish": async (params) => {
      const { draft_id } = parse(z.object({ draft_id: DraftId }), params, "publish draft");
      const report = await test(draft_id);
      if (!report.ok) {
        const failing = report.checks.filter((c) => !c.ok).map((c) => `${c.hook}: ${c.detail}`);
        throw new KlbrError(
          "release_invalid",
          `cannot publish draft ${draft_id}: its hooks failed the host's test (${
            failing.join("; ")
          })`,
        );
      }
      const published = await publishRelease(store, {
        sourceDir: draftDir(draft_id),
        releasesDir: join(store.stateDir, "releases"),
      });
      return { release_id: published.id, checks: report.checks };
    },
    "behavior.activate": async (params) => {
      const { release_id, expected_epoch } = parse(
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
      const row = requireSession(store, session);
      const target = row.lastGoodRelease;
      if (target === null || target === row.activeRelease) {
        throw new KlbrError(
          "not_found",
          `cannot roll back: the active release is the last good one (got ${
            row.activeRelease?.slice(0, 12)
          })`,
        );
      }
      const epoch = await options.activate(target, row.behaviorEpoch, "agent rollback");
      return { epoch, release_id: target };
    },
  };
}

/** Runs every hook of a tree once on its fixture in a throwaway worker, checking each result. */
async function testHooks(
  options: BehaviorEditingOptions,
  behavior: { revision: string; path: string },
): Promise<HookCheck[]> {
  const worker = spawnWorkbench(options.python, {
    cwd: options.workspace,
    repoRoot: options.repoRoot,
  });
  try {
    await worker.init({
      generation: 0,
      session: options.session,
      workspace: options.workspace,
      skills: { revision: "", roots: [], bodies: {}, refused: [] },
      behavior,
    });
    const fixtures = hookFixtures(Date.now());
    const checks: HookCheck[] = [];
    for (const hook of HookName.options) {
      try {
        const value = await worker.hook(hook, fixtures[hook], {
          timeoutMs: options.hookTimeoutMs ?? DEFAULT_HOOK_TIMEOUT_MS,
        });
        checkHookResult(hook, value);
        checks.push({ hook, ok: true, detail: `returned ${JSON.stringify(value).slice(0, 120)}` });
      } catch (error) {
        checks.push({
          hook,
          ok: false,
          detail: (error instanceof Error ? error.message : String(error)).slice(0, 500),
        });
      }
    }
    return checks;
  } finally {
    await worker.kill("draft test finished");
  }
}

async function requireDraft(dir: string, id: string): Promise<string> {
  try {
    if ((await Deno.lstat(dir)).isDirectory) return dir;
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
  throw new KlbrError("not_found", `cannot use draft ${id}: it does not exist`);
}

/** Resolves a path inside a draft. @throws {KlbrError} `path_escape` for anything outside. */
function draftFile(dir: string, path: string): string {
  const file = resolve(dir, normalize(path));
  const rel = relative(dir, file);
  if (
    path.startsWith("/") || rel === "" || rel.startsWith("..") ||
    rel.split("/").some((p) => p.startsWith("."))
  ) {
    throw new KlbrError(
      "path_escape",
      `cannot use draft path: it must be relative, inside the draft, without dot segments (got ${path})`,
    );
  }
  return file;
}

/** Copies a release tree into a new, writable draft directory. */
async function copyTree(from: string, to: string): Promise<void> {
  await Deno.mkdir(to, { recursive: true });
  for await (const entry of Deno.readDir(from)) {
    const source = join(from, entry.name);
    const target = join(to, entry.name);
    if (entry.isDirectory) await copyTree(source, target);
    else if (entry.isFile) {
      await Deno.copyFile(source, target);
      await Deno.chmod(target, ((await Deno.stat(source)).mode ?? 0o644) | 0o600);
    }
  }
}
