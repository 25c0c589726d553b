/**
 * The `budget` and `cleanup` nodes of the configuration: the limits of unattended work (model
 * requests and tokens per hour and per job, wall time per job, concurrent jobs and processes,
 * artifact disk) and the cleanup policy (old drafts, unpinned releases). Every default lives in
 * these schemas; `docs/jobs.md` explains what each limit governs, and `docs/configuration.md`
 * shows both nodes.
 *
 * @module
 */

import type { Node } from "@bgotink/kdl";
import { z } from "zod";
import { BackupSchema } from "./_backup.ts";
import { failAt, lineOf, onlyNode, type RawBlock, readFields, show, whole } from "./_fields.ts";

/** The names of the settings nodes, each a block of single-valued fields (`backup`: `_backup.ts`). */
export const SETTINGS_NODES = ["budget", "cleanup", "backup"] as const;

/** One settings node's name. */
export type SettingsNode = typeof SETTINGS_NODES[number];

/** The limits of one job; what a job may ask for at most, and what it gets when it asks nothing. */
export const JobBudgetSchema = z.strictObject(
  {
    /** How long a job may run before it is killed and ends `over_budget`. */
    wall_time_s: whole("whole seconds", 1, 7 * 86_400).default(1_800),
    /** Model requests a job (with its children) may make. */
    model_requests: whole("a whole number of requests", 0, 1_000_000).default(100),
    /** Tokens (prompt + completion) a job (with its children) may use. */
    tokens: whole("a whole number of tokens", 0, 1_000_000_000).default(200_000),
  },
  { error: (issue) => `expected a block of fields (got ${show(issue.input)})` },
);

const BudgetFields = z.strictObject({
  /** Model requests of the whole daemon (turns, `llm()`, child agents) in any rolling hour. */
  model_requests_per_hour: whole("a whole number of requests", 1, 1_000_000).default(600),
  /** Tokens of the whole daemon in any rolling hour. */
  tokens_per_hour: whole("a whole number of tokens", 1, 10_000_000_000).default(2_000_000),
  /**
   * The share (percent) of each hourly limit that child calls (`llm()`, child agents, in cells
   * and jobs) may use together, so they cannot starve the agent's own turns; 0 refuses them.
   */
  child_share_percent: whole("a whole percentage", 0, 100).default(50),
  /** Jobs running at once; more wait `pending`. */
  concurrent_jobs: whole("a whole number of jobs", 1, 64).default(2),
  /** Job workbenches and `workspace.run` children at once; more wait for a slot. */
  concurrent_processes: whole("a whole number of processes", 1, 256).default(8),
  /** The artifacts directory's size; the oldest artifacts are evicted beyond it. */
  artifact_disk_mb: whole("whole MiB", 1, 1_048_576).default(256),
  job: JobBudgetSchema.prefault({}),
});

/** The `budget` node: the daemon's limits, and `job` for each job's. */
export const BudgetSchema = BudgetFields.superRefine((budget, ctx) => {
  // Each running job holds a process slot for its workbench; its workspace.run needs another.
  if (budget.concurrent_processes <= budget.concurrent_jobs) {
    ctx.addIssue({
      code: "custom",
      path: ["concurrent_processes"],
      message: `must be more than concurrent_jobs ${budget.concurrent_jobs}, since each running ` +
        `job holds one for its workbench (got ${budget.concurrent_processes})`,
    });
  }
});

/** The `cleanup` node: what the maintenance step removes, and how often it runs. */
export const CleanupSchema = z.strictObject({
  /** Drafts untouched for longer than this are removed. */
  draft_max_age_days: whole("whole days", 1, 3_650).default(7),
  /** A release no frame used for this long (and not active, last good or pinned) is removed. */
  release_keep_days: whole("whole days", 1, 3_650).default(30),
  /** How often the maintenance step runs (it also runs at start). */
  interval_hours: whole("whole hours", 1, 24 * 30).default(6),
});

/** The validated `budget` node. */
export type BudgetConfig = z.output<typeof BudgetSchema>;
/** The validated `cleanup` node. */
export type CleanupConfig = z.output<typeof CleanupSchema>;

/**
 * Reads the settings nodes of a document: each a block whose fields take one value, and `job`
 * (in `budget`) a nested block of the same kind.
 *
 * @throws {KlbrError} `invalid_config` naming the line: a node given twice or with values, a
 *   field given twice or with other than one value.
 */
export function readSettingsNodes(
  nodes: Node[],
  file: string,
): Partial<Record<SettingsNode, RawBlock>> {
  const out: Partial<Record<SettingsNode, RawBlock>> = {};
  for (const name of SETTINGS_NODES) {
    const node = onlyNode(nodes, name, file);
    if (node !== undefined) out[name] = readBlock(node, name, { line: lineOf(node), file });
  }
  return out;
}

/** Reads one settings block; `budget`'s `job` is a nested block whose lines go in `lines`. */
function readBlock(
  node: Node,
  where: string,
  at: { line: number; file: string; lines?: Map<string, number> },
): RawBlock {
  const { line, file } = at;
  if (node.getArguments().length > 0 || node.getProperties().size > 0) {
    failAt(file, line, `${where}: expected a block (got values)`);
  }
  const nested = at.lines !== undefined;
  const raw: RawBlock = { line, fields: {}, lines: at.lines ?? new Map() };
  readFields(node, raw, {
    file,
    where,
    prefix: nested ? "job." : "",
    special: (field, child, line) =>
      !nested && where === "budget" && field === "job" && child.children !== null
        ? readBlock(child, "budget job", { line, file, lines: raw.lines }).fields
        : undefined,
  });
  return raw;
}

/**
 * Places a schema issue of a settings node: the line of the field (or the node) and the text.
 */
export function locateSettingsIssue(
  issue: z.core.$ZodIssue,
  raw: Partial<Record<SettingsNode, RawBlock>>,
): { line: number; text: string } {
  const node = issue.path[0] as SettingsNode;
  const rest = issue.path.slice(1).map(String);
  const keys = issue.code === "unrecognized_keys" ? issue.keys : [];
  const field = [...rest, ...(keys.length ? [keys.join(", ")] : [])].join(".");
  const shape = node === "backup"
    ? BackupSchema.shape
    : node === "cleanup"
    ? CleanupSchema.shape
    : rest[0] === "job"
    ? JobBudgetSchema.shape
    : BudgetFields.shape;
  const message = keys.length > 0
    ? `unknown field, expected one of ${Object.keys(shape).join(", ")} (got ${keys.join(", ")})`
    : issue.message;
  const key = [...rest, ...(keys.length ? [keys[0]] : [])].join(".");
  const line = raw[node]?.lines.get(key) ?? raw[node]?.line ?? 1;
  return { line, text: `${node} ${field.replace(".", " ")}: ${message}`.trim() };
}
