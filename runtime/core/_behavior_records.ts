/**
 * The bodies of the records behaviour editing writes besides the frame and hook records:
 * `role.loaded` (what a process role loaded) and `candidate.failed` (a draft that failed the
 * host's test). Part of the one record union in `_records.ts`; see `docs/behavior.md`.
 *
 * @module
 */

// A namespace import lets the UI bundle keep only the parts of zod that core uses.
import * as z from "zod";

const int = z.number().int();

/** The `data` schema of each behaviour record type. Each tolerates fields it does not name. */
export const BEHAVIOR_RECORDS = {
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
