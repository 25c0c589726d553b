/**
 * The bodies of the records of behaviour: `hook.failed` (naming the failed call's trace),
 * `role.loaded` (what a process role loaded) and `candidate.failed` (a draft that failed the
 * host's test), and the trace references of a frame's end. Part of the one record union in
 * `_records.ts`; see `docs/behavior.md`.
 *
 * @module
 */

import * as z from "zod";

const int = z.number().int();

/** The hook calls of its turn a frame's end names, when it made any: the first 200, and the count. */
export const FRAME_TRACE_REFS = {
  trace_ids: z.array(z.string()).optional(),
  trace_count: int.nonnegative().optional(),
};

/** The `data` schema of each behaviour record type. Each tolerates fields it does not name. */
export const BEHAVIOR_RECORDS = {
  "hook.failed": z.looseObject({
    hook: z.string(),
    revision: z.string(),
    error: z.string(),
    /** How many inputs stay pending (`attention.plan`). */
    pending: int.nonnegative().optional(),
    /** The turn went on with the hook's safe default (the turn's hooks). */
    fallback: z.boolean().optional(),
    /** The kept trace of the failed call: inputs, error and traceback (`klbr trace`). */
    trace_id: z.string().optional(),
  }),
  "role.loaded": z.looseObject({
    /** `workbench`, `hooks` (and `job` once job workers exist). */
    role: z.string(),
    generation: int,
    pid: int,
    reason: z.string(),
    python: z.looseObject({ executable: z.string(), version: z.string(), interpreter: z.string() }),
    /** sha256 of the workbench package's `*.py` files, as the process loaded them. */
    package: z.string(),
    skills_revision: z.string(),
    release_id: z.string().nullable(),
    /** The job whose workbench it is (role `job`). */
    job_id: z.string().optional(),
  }),
  "candidate.failed": z.looseObject({
    candidate_id: z.string(),
    draft_id: z.string(),
    revision: z.string(),
    action: z.enum(["test", "publish"]),
    failing: z.array(z.looseObject({
      hook: z.string(),
      message: z.string(),
      trace_id: z.string().nullable(),
    })),
  }),
} as const;
