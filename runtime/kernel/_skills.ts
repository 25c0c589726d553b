/**
 * The one reader and validator of skill roots.
 *
 * A skill is `skills/<id>/SKILL.md`; its first non-empty line is exactly `# <id>`, equal to
 * the directory name, and that title is the only schema. The builtin root and the managed
 * root form one namespace: an id found in both is refused in both, never silently won. The
 * host reads and validates here and hands the bodies to the worker at spawn
 * ({@linkcode SkillsPayload}), so a worker never reads a skills directory itself.
 *
 * @module
 */

import { join, resolve } from "node:path";
import { z } from "zod";
import { describeIssues, KlbrError, type SkillsPayload } from "../core/mod.ts";

/**
 * The id rule: lowercase ASCII letter, then lowercase letters, digits and underscores. It is
 * a subset of Python identifiers so `skills.<id>` works in a cell.
 */
export const SKILL_ID_PATTERN = /^[a-z][a-z0-9_]*$/;
/** The largest accepted `SKILL.md`, in bytes: 256 KiB. */
export const MAX_SKILL_BYTES = 256 * 1024;

const MAX_ID_LENGTH = 64;
/** Bodies offered together never exceed this, so the `init` frame stays well under its cap. */
const MAX_OFFERED_BYTES = 8 * 1024 * 1024;
/** Directory entries read per root; the rest are refused as one entry. */
const MAX_ENTRIES_PER_ROOT = 4096;
/** Python keywords can never be reached as `skills.<id>`. */
const PYTHON_KEYWORDS = new Set(
  ("False None True and as assert async await break class continue def del elif else except " +
    "finally for from global if import in is lambda nonlocal not or pass raise return try " +
    "while with yield").split(" "),
);
/** Attributes of the worker's `klbr.skills` module that a skill id must not shadow. */
const RESERVED_IDS = new Set(["delete", "refused", "revision", "roots", "write"]);

/** Where skills are read from. */
export const SkillRoots = z.object({
  /** The builtin root: `KLBR_SKILLS_DIR`, default the checkout's `skills/`. */
  builtinRoot: z.string().min(1),
  /** The managed root: `<state>/skills`, written by the agent. */
  managedRoot: z.string().min(1),
});
/** The two skill roots. */
export type SkillRoots = z.infer<typeof SkillRoots>;

/** One offered skill, for `doctor` and the startup log. */
export interface SkillEntry {
  /** The id, equal to the directory name. */
  id: string;
  /** The root it was read from. */
  root: string;
  /** The absolute path of its `SKILL.md`. */
  path: string;
  /** The body's size in bytes. */
  bytes: number;
}

/** The result of {@linkcode loadSkills}: the worker payload and an index of what was read. */
export interface LoadedSkills {
  /** What the worker gets at `init`. */
  payload: SkillsPayload;
  /** The offered skills, sorted by id. */
  offered: SkillEntry[];
}

/** Options for {@linkcode skillRoots}. */
export interface SkillRootsOptions {
  /**
   * The checkout the daemon runs from; the builtin root defaults to `<repoRoot>/skills`, so the
   * builtin skills ship with the checkout wherever the workspace is.
   */
  repoRoot: string;
  /** The state directory; the managed root is `<state>/skills`. */
  stateDir: string;
  /** `KLBR_SKILLS_DIR`, when set; a relative value resolves against the current directory. */
  skillsDir?: string;
}

/**
 * Resolves the builtin and managed roots to absolute paths: the builtin root is
 * `KLBR_SKILLS_DIR` when set (and not empty), else the checkout's `skills/`; the workspace
 * plays no part.
 *
 * @throws {KlbrError} never; kept total so `doctor` can always print the roots.
 * @example
 * ```ts
 * const roots = skillRoots({ repoRoot: REPO_ROOT, stateDir, skillsDir: Deno.env.get("KLBR_SKILLS_DIR") });
 * ```
 */
export function skillRoots(options: SkillRootsOptions): SkillRoots {
  const builtin = options.skillsDir !== undefined && options.skillsDir !== ""
    ? resolve(options.skillsDir)
    : resolve(options.repoRoot, "skills");
  return { builtinRoot: builtin, managedRoot: resolve(options.stateDir, "skills") };
}

type Refusal = SkillsPayload["refused"][number];
type Found = { id: string; root: string; dir: string; isSymlink: boolean; isDirectory: boolean };

/** Lists one root's entries; a missing root holds no skills. */
async function listRoot(root: string, refused: Refusal[]): Promise<Found[]> {
  const found: Found[] = [];
  let info: Deno.FileInfo;
  try {
    info = await Deno.stat(root);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return found;
    throw error;
  }
  if (!info.isDirectory) {
    refused.push({ id: "*", root, reason: "the root is not a directory" });
    return found;
  }
  let count = 0;
  for await (const entry of Deno.readDir(root)) {
    if (entry.name.startsWith(".")) continue;
    if (++count > MAX_ENTRIES_PER_ROOT) {
      refused.push({
        id: "*",
        root,
        reason: `the root has more than ${MAX_ENTRIES_PER_ROOT} entries; the rest were not read`,
      });
      break;
    }
    if (entry.isFile) continue; // loose files (a README) are not skills
    found.push({
      id: entry.name,
      root,
      dir: join(root, entry.name),
      isSymlink: entry.isSymlink,
      isDirectory: entry.isDirectory,
    });
  }
  return found;
}

/** Why `id` cannot be a skill id, or null when it can. */
export function skillIdProblem(id: string): string | null {
  if (!SKILL_ID_PATTERN.test(id) || id.length > MAX_ID_LENGTH) {
    return `the id must match ${SKILL_ID_PATTERN.source} and be at most ${MAX_ID_LENGTH} ` +
      `characters, so skills.<id> is a Python name (got ${JSON.stringify(id)})`;
  }
  if (PYTHON_KEYWORDS.has(id)) return `the id is a Python keyword (got ${JSON.stringify(id)})`;
  if (RESERVED_IDS.has(id)) {
    return `the id is reserved by klbr.skills (got ${JSON.stringify(id)})`;
  }
  return null;
}

/** Reads and checks one skill; returns its body or the reason it is refused. */
async function readSkill(found: Found): Promise<{ body: string; path: string } | string> {
  if (found.isSymlink) return "the skill directory is a symlink";
  if (!found.isDirectory) return "the entry is not a directory";
  const problem = skillIdProblem(found.id);
  if (problem !== null) return problem;
  const path = join(found.dir, "SKILL.md");
  let info: Deno.FileInfo;
  try {
    info = await Deno.lstat(path);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return "SKILL.md is missing";
    throw error;
  }
  if (info.isSymlink) return "SKILL.md is a symlink";
  if (!info.isFile) return "SKILL.md is not a regular file";
  if (info.size > MAX_SKILL_BYTES) {
    return `SKILL.md is larger than ${MAX_SKILL_BYTES} bytes (got ${info.size})`;
  }
  const bytes = await Deno.readFile(path);
  if (bytes.length > MAX_SKILL_BYTES) {
    return `SKILL.md is larger than ${MAX_SKILL_BYTES} bytes (got ${bytes.length})`;
  }
  let body: string;
  try {
    // A byte-order mark (an editor's, on Windows) is not part of the body: the title follows it.
    body = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    return "SKILL.md is not valid UTF-8";
  }
  const title = skillTitleProblem(found.id, body);
  return title === null ? { body, path } : title;
}

/** Why `body` is not a skill body titled `# <id>`, or null when it is. */
export function skillTitleProblem(id: string, body: string): string | null {
  const first = body.split("\n").map((line) => line.replace(/\r$/, "")).find((line) =>
    line.trim() !== ""
  );
  if (first === `# ${id}`) return null;
  return `the first non-empty line must be exactly "# ${id}" (got ${
    JSON.stringify((first ?? "").slice(0, 80))
  })`;
}

/**
 * The content identity of an offered set: sha256, in hex, over the pairs sorted by id, each
 * written as a 4-byte big-endian length and the UTF-8 bytes of the id, then of the body.
 *
 * @throws {KlbrError} never for valid strings.
 */
export async function skillsRevision(bodies: Record<string, string>): Promise<string> {
  // Loaded here, not with the module, as `packageHash` does.
  const { createHash } = await import("node:crypto");
  const encoder = new TextEncoder();
  const hash = createHash("sha256");
  for (const id of Object.keys(bodies).sort()) {
    for (const text of [id, bodies[id]]) {
      const bytes = encoder.encode(text);
      const length = new Uint8Array(4);
      new DataView(length.buffer).setUint32(0, bytes.length, false);
      hash.update(length).update(bytes);
    }
  }
  return hash.digest("hex");
}

/**
 * Reads both roots, validates every skill and returns the set a new kernel generation offers.
 *
 * A missing root holds no skills. Refused entries carry their reason: a duplicate id (named
 * in both roots), a bad id, a symlinked directory or file, a missing `SKILL.md`, a wrong
 * title, a body over 256 KiB, or a body that is not UTF-8. Nothing is cached: each call reads
 * the directories afresh, so a skill written during a turn appears at the next spawn.
 *
 * @throws {KlbrError} `invalid_input` when the roots fail their schema or are the same
 * directory; `skill_invalid` when a root cannot be read for a reason other than absence.
 * @example
 * ```ts
 * const { payload } = await loadSkills({ builtinRoot: "skills", managedRoot: ".klbr/skills" });
 * console.log(payload.revision, Object.keys(payload.bodies));
 * ```
 */
export async function loadSkills(roots: SkillRoots): Promise<LoadedSkills> {
  const { builtinRoot, managedRoot } = checkedRoots(roots);
  const refused: Refusal[] = [];
  const found: Found[] = [];
  for (const root of [builtinRoot, managedRoot]) {
    try {
      found.push(...await listRoot(root, refused));
    } catch (cause) {
      throw new KlbrError("skill_invalid", `cannot load skills: cannot read root (got ${root})`, {
        cause,
      });
    }
  }
  // By id, then builtin before managed.
  const rootRank = (root: string) => root === builtinRoot ? 0 : 1;
  const order = (a: { id: string; root: string }, b: { id: string; root: string }) =>
    a.id < b.id ? -1 : a.id > b.id ? 1 : rootRank(a.root) - rootRank(b.root);
  found.sort(order);
  const { bodies, offered } = await offerSkills(found, refused, [builtinRoot, managedRoot]);
  refused.sort(order);
  return {
    payload: {
      revision: await skillsRevision(bodies),
      roots: [builtinRoot, managedRoot],
      bodies,
      refused,
    },
    offered,
  };
}

/** The two roots, resolved; refused when malformed or the same directory. */
function checkedRoots(roots: SkillRoots): { builtinRoot: string; managedRoot: string } {
  const parsed = SkillRoots.safeParse(roots);
  if (!parsed.success) {
    throw new KlbrError(
      "invalid_input",
      `cannot load skills: ${describeIssues(parsed.error)} (got ${JSON.stringify(roots)})`,
    );
  }
  const builtinRoot = resolve(parsed.data.builtinRoot);
  const managedRoot = resolve(parsed.data.managedRoot);
  if (builtinRoot === managedRoot) {
    throw new KlbrError(
      "invalid_input",
      `cannot load skills: the builtin and managed roots are the same directory (got ${builtinRoot})`,
    );
  }
  return { builtinRoot, managedRoot };
}

/**
 * Reads the skills found, in order, into the offered set; each one that cannot be offered (an id
 * in both roots, an unreadable SKILL.md, the size bound) goes to `refused` with why.
 */
async function offerSkills(
  found: Found[],
  refused: Refusal[],
  [builtinRoot, managedRoot]: [string, string],
): Promise<{ bodies: Record<string, string>; offered: SkillEntry[] }> {
  const counts = new Map<string, number>();
  for (const f of found) counts.set(f.id, (counts.get(f.id) ?? 0) + 1);
  const bodies: Record<string, string> = {};
  const offered: SkillEntry[] = [];
  let offeredBytes = 0;
  for (const f of found) {
    if ((counts.get(f.id) ?? 0) > 1) {
      refused.push({
        id: f.id,
        root: f.root,
        reason: `the id is defined in both roots (${builtinRoot} and ${managedRoot}); ` +
          `neither is offered until one is removed`,
      });
      continue;
    }
    let read: Awaited<ReturnType<typeof readSkill>>;
    try {
      read = await readSkill(f);
    } catch (cause) {
      read = `SKILL.md cannot be read: ${cause instanceof Error ? cause.message : String(cause)}`;
    }
    if (typeof read === "string") {
      refused.push({ id: f.id, root: f.root, reason: read });
      continue;
    }
    const size = new TextEncoder().encode(read.body).length;
    if (offeredBytes + size > MAX_OFFERED_BYTES) {
      refused.push({
        id: f.id,
        root: f.root,
        reason: `the offered set would exceed ${MAX_OFFERED_BYTES} bytes`,
      });
      continue;
    }
    offeredBytes += size;
    bodies[f.id] = read.body;
    offered.push({ id: f.id, root: f.root, path: read.path, bytes: size });
  }
  return { bodies, offered };
}
