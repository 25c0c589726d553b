/**
 * Replacing the process roles a changed shared dependency affects: one fresh fingerprint of
 * what is on disk, compared with what each role's live process loaded.
 *
 * @module
 */

import type { ProcessRole } from "./_fingerprint.ts";
import type { KernelSupervisor } from "./_supervisor.ts";
import type { GenerationRecord } from "./_generation.ts";

/** One role and how it is replaced at a boundary. */
export interface RoleAtBoundary {
  role: ProcessRole;
  supervisor: KernelSupervisor;
  /**
   * `retire`: the running requests finish, the next one starts a new process (a hook
   * worker); `reset`: a new generation now, the heap is lost (the workbench, between turns).
   */
  replace: "retire" | "reset";
}

/** A role that was replaced, and why. */
export interface ReplacedRole {
  role: ProcessRole;
  change: string;
}

/**
 * Asks `probe`'s live process (spawned when there is none) for a fingerprint of what is on
 * disk now and replaces every role in `roles` whose live process loaded a different
 * interpreter or package. A role with no live process is left alone: its next process loads
 * what is there. Call it only at a boundary where `reset` roles run nothing.
 *
 * @returns the roles it replaced
 * @throws {KlbrError} what the probe's `ready` or `fingerprint` throws, and what a `reset`
 * throws.
 * @example
 * ```ts
 * await replaceStaleRoles(hooks, [
 *   { role: "hooks", supervisor: hooks, replace: "retire" },
 *   { role: "workbench", supervisor: kernel, replace: "reset" },
 * ]);
 * ```
 */
export async function replaceStaleRoles(
  probe: KernelSupervisor,
  roles: RoleAtBoundary[],
): Promise<ReplacedRole[]> {
  const current = await probe.probe();
  const replaced: ReplacedRole[] = [];
  for (const { role, supervisor, replace } of roles) {
    const change = supervisor.staleAgainst(current);
    if (change === null) continue;
    if (replace === "retire") supervisor.retire(change);
    else await supervisor.reset(change);
    replaced.push({ role, change });
  }
  return replaced;
}

/**
 * The body of the `role.loaded` record of a new process: what it loaded and was given. The
 * owner of the role appends it (the kernel never touches the store).
 *
 * @example
 * ```ts
 * appendEvent(store, session, "role.loaded", roleLoadedBody(record));
 * ```
 */
export function roleLoadedBody(record: GenerationRecord): {
  role: ProcessRole;
  generation: number;
  pid: number;
  reason: string;
  python: { executable: string; version: string; interpreter: string };
  package: string;
  skills_revision: string;
  release_id: string | null;
} {
  const f = record.fingerprint;
  return {
    role: f.role,
    generation: f.generation,
    pid: f.pid,
    reason: record.reason,
    python: { executable: f.executable, version: f.version, interpreter: f.interpreter },
    package: f.package,
    skills_revision: f.skills,
    release_id: f.release,
  };
}
