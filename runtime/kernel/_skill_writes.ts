/**
 * Managed skills the agent writes: the host side of `await skills.write(id, body)` and
 * `await skills.delete(id)` in a cell. A cell cannot write the state directory (inside the
 * sandbox it is absent or read-only), so the host writes `<state>/skills/<id>/SKILL.md` for it,
 * after the checks the loader applies to every skill. The builtin root and the managed root are
 * one namespace: an id the builtin root holds is refused here, never shadowed.
 *
 * The set a kernel generation offers is fixed when it starts; the caller decides when the next
 * generation starts (the session: at its next turn boundary) and says so in the result.
 *
 * @module
 */

import { join } from "node:path";
import { z } from "zod";
import { KlbrError, SkillDeleteParams, SkillWriteParams } from "../core/mod.ts";
import {
  loadSkills,
  MAX_SKILL_BYTES,
  skillIdProblem,
  type SkillRoots,
  skillTitleProblem,
} from "./_skills.ts";
import { defineRpc, type RpcCall } from "./_rpc_registry.ts";
import { pathExists, replaceFile, syncPath } from "../../store/tables/files.ts";

/** What a write or delete changed, for the owner of the generation. */
export interface SkillChange {
  action: "write" | "delete";
  id: string;
  /** The revision of the set the next generation will offer. */
  revision: string;
}

/** Options for {@linkcode skillRpcDeps}. */
export interface SkillHandlersOptions {
  roots: SkillRoots;
  /** Told after each write or delete is on disk. */
  changed: (change: SkillChange) => void;
  /** When the changed set is offered, in the result's words (e.g. "your next turn"). */
  offeredFrom: string;
}

/** What the skill RPCs are bound to: the options, and the queue that runs calls one at a time. */
export interface SkillRpcDeps extends SkillHandlersOptions {
  serial: <T>(work: () => Promise<T>) => Promise<T>;
}

/**
 * The deps of {@linkcode skillRpcs} for one process: calls are run one at a time.
 *
 * @example
 * ```ts
 * bindRpcs(skillRpcs, skillRpcDeps({ roots, changed: (c) => log(c), offeredFrom: "your next turn" }));
 * ```
 */
export function skillRpcDeps(options: SkillHandlersOptions): SkillRpcDeps {
  let queue: Promise<unknown> = Promise.resolve();
  return {
    ...options,
    serial: <T>(work: () => Promise<T>): Promise<T> => {
      const next = queue.then(work, work);
      queue = next.catch(() => {});
      return next;
    },
  };
}

const REFUSAL = "only the agent's own cells change its skills; return the skill's text and let " +
  "the agent write it";
const Revision = z.string().min(1);

/**
 * `skills.write`: on return the skill is on disk complete (temp file, fsync, rename, the
 * directory fsynced) and the loader offers it; otherwise the managed root is as before. Proven
 * by "`skills.write` writes a managed skill atomically; the loader offers it" in
 * `tests/runtime/kernel/skill_writes.test.ts`.
 *
 * @throws {KlbrError} `skill_invalid` for a bad id, a wrong title, a body over
 * {@linkcode MAX_SKILL_BYTES} or not well-formed, an id of the builtin root, or a skill the
 * loader refuses.
 */
export const skillWriteRpc = defineRpc({
  name: "skills.write",
  summary: "Writes a managed skill under `<state>/skills`, checked like every skill; offered " +
    "from the next generation.",
  roles: ["workbench"],
  refusal: REFUSAL,
  action: "write skill",
  args: SkillWriteParams,
  reply: z.strictObject({
    id: z.string(),
    path: z.string(),
    bytes: z.int(),
    revision: Revision,
    offered_from: z.string(),
  }),
  handler: (p, { deps }: RpcCall<SkillRpcDeps>) =>
    deps.serial(async () => {
      const written = await writeManagedSkill(deps.roots, p.id, p.body);
      deps.changed({ action: "write", id: p.id, revision: written.revision });
      return { ...written, offered_from: deps.offeredFrom };
    }),
});

/**
 * `skills.delete`: removes a managed skill.
 *
 * @throws {KlbrError} `skill_invalid` for a bad id or one only the builtin root holds;
 * `not_found` when the managed root does not hold it.
 */
export const skillDeleteRpc = defineRpc({
  name: "skills.delete",
  summary: "Deletes a managed skill; a builtin one is refused.",
  roles: ["workbench"],
  refusal: REFUSAL,
  action: "delete skill",
  args: SkillDeleteParams,
  reply: z.strictObject({ id: z.string(), revision: Revision, offered_from: z.string() }),
  handler: (p, { deps }: RpcCall<SkillRpcDeps>) =>
    deps.serial(async () => {
      const deleted = await deleteManagedSkill(deps.roots, p.id);
      deps.changed({ action: "delete", id: p.id, revision: deleted.revision });
      return { ...deleted, offered_from: deps.offeredFrom };
    }),
});

/** The managed-skill RPCs a session's cells may call, bound with {@linkcode skillRpcDeps}. */
export const skillRpcs = [skillWriteRpc, skillDeleteRpc];

/**
 * Writes `<managedRoot>/<id>/SKILL.md` after checking it as the loader would; a body the loader
 * still refuses (e.g. the offered set's size bound) is undone before the error is thrown.
 *
 * @throws {KlbrError} `skill_invalid` naming the reason.
 */
async function writeManagedSkill(
  roots: SkillRoots,
  id: string,
  body: string,
): Promise<{ id: string; path: string; bytes: number; revision: string }> {
  const refuse = (reason: string) =>
    new KlbrError("skill_invalid", `cannot write skill ${JSON.stringify(id)}: ${reason}`);
  const problem = skillIdProblem(id);
  if (problem !== null) throw refuse(problem);
  if (!body.isWellFormed()) {
    throw refuse("the body holds a lone surrogate, which UTF-8 cannot hold");
  }
  const bytes = new TextEncoder().encode(body);
  if (bytes.length > MAX_SKILL_BYTES) {
    throw refuse(`the body is larger than ${MAX_SKILL_BYTES} bytes (got ${bytes.length})`);
  }
  const title = skillTitleProblem(id, body);
  if (title !== null) throw refuse(title);
  await refuseBuiltin(roots, id, refuse);
  const dir = join(roots.managedRoot, id);
  await requirePlainDirectory(dir, refuse);
  const path = join(dir, "SKILL.md");
  const before = await Deno.readFile(path).catch((error) => {
    if (error instanceof Deno.errors.NotFound) return null;
    throw error;
  });
  await Deno.mkdir(dir, { recursive: true });
  await replaceFile(path, bytes, { mode: 0o644 });
  // A new skill's folder is an entry of the managed root: durable only once the root is synced.
  await syncPath(roots.managedRoot);
  const loaded = await loadSkills(roots);
  const refused = loaded.payload.refused.find((r) => r.id === id && r.root === roots.managedRoot);
  if (refused !== undefined) {
    if (before === null) await Deno.remove(dir, { recursive: true });
    else await replaceFile(path, before, { mode: 0o644 });
    throw refuse(refused.reason);
  }
  return { id, path, bytes: bytes.length, revision: loaded.payload.revision };
}

/**
 * Removes `<managedRoot>/<id>`: renamed to a hidden name first (which the loader skips), so
 * the skill is gone at once even if the removal is cut short.
 *
 * @throws {KlbrError} `skill_invalid` for a bad id or one only the builtin root holds;
 * `not_found` when neither root holds it.
 */
async function deleteManagedSkill(
  roots: SkillRoots,
  id: string,
): Promise<{ id: string; revision: string }> {
  const refuse = (reason: string) =>
    new KlbrError("skill_invalid", `cannot delete skill ${JSON.stringify(id)}: ${reason}`);
  const problem = skillIdProblem(id);
  if (problem !== null) throw refuse(problem);
  const dir = join(roots.managedRoot, id);
  if (!(await pathExists(dir))) {
    // A managed copy of a builtin id may be deleted (that ends the clash); a builtin never.
    await refuseBuiltin(roots, id, refuse);
    throw new KlbrError(
      "not_found",
      `cannot delete skill ${JSON.stringify(id)}: no managed skill has this id (got ${dir})`,
    );
  }
  const gone = join(roots.managedRoot, `.${id}.deleted-${crypto.randomUUID()}`);
  await Deno.rename(dir, gone);
  await syncPath(roots.managedRoot);
  await Deno.remove(gone, { recursive: true });
  return { id, revision: (await loadSkills(roots)).payload.revision };
}

/** One namespace: an id the builtin root holds is never written or deleted as managed. */
async function refuseBuiltin(
  roots: SkillRoots,
  id: string,
  refuse: (reason: string) => KlbrError,
): Promise<void> {
  const builtin = join(roots.builtinRoot, id);
  if (await pathExists(builtin)) {
    throw refuse(
      `the builtin root holds this id (${builtin}); builtin and managed skills are one ` +
        "namespace, so a managed skill cannot replace or remove it: choose another id",
    );
  }
}

async function requirePlainDirectory(
  dir: string,
  refuse: (reason: string) => KlbrError,
): Promise<void> {
  const info = await Deno.lstat(dir).catch((error) => {
    if (error instanceof Deno.errors.NotFound) return null;
    throw error;
  });
  if (info !== null && (info.isSymlink || !info.isDirectory)) {
    throw refuse(`${dir} is not a plain directory`);
  }
}
