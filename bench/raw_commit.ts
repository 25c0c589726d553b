/**
 * A raw commit: `node:sqlite` single-row insert + commit in a loop, in WAL with
 * `synchronous=FULL` (the store's durability setting), in a temp dir. Figure 3e's peer is the
 * bare cell plus two of them; figure 10's raw parts count them.
 *
 * @module
 */

import { DatabaseSync } from "node:sqlite";
import { join } from "node:path";
import { KlbrError } from "../runtime/core/mod.ts";
import { type LatencySummary, ratePerSecond, summarize } from "./stats.ts";

/** Options for {@linkcode measureRawCommits}. */
export interface RawCommitOptions {
  /** The directory the database file is created in (and left in). */
  dir: string;
  /** Commits to make. */
  count: number;
  /** Stop early after this long, in ms. @default 30_000 */
  maxMs?: number;
}

/** What {@linkcode measureRawCommits} measured. */
export interface RawCommitResult {
  /** Commits made (fewer than asked when `maxMs` ran out). */
  count: number;
  /** Commits per second over the whole loop. */
  perSecond: number;
  /** Per-commit latency in ms (BEGIN IMMEDIATE, INSERT, COMMIT). */
  latency: LatencySummary;
}

// About the size of an input.admitted body, so the ceiling writes comparable pages.
const BODY = JSON.stringify({
  input_id: "in_01JHMMRR878CS2QQ58HYY0RD74",
  source_kind: "local",
  dedupe_key: "local:bench:m-000000",
  conversation_id: "local:default",
  author: "owner",
  received_at: 1736933400123,
  body: "bench input 000000",
});

/**
 * Inserts `count` rows, each in its own `BEGIN IMMEDIATE … COMMIT`, and times each commit.
 *
 * When it returns every row is committed (at `synchronous=FULL`, on disk) in `<dir>/raw.sqlite`.
 *
 * @throws {KlbrError} `invalid_input` when `count` is not a positive integer.
 * @example
 * ```ts
 * const { perSecond } = measureRawCommits({ dir: await Deno.makeTempDir(), count: 3000 });
 * ```
 */
export function measureRawCommits(options: RawCommitOptions): RawCommitResult {
  const { dir, count, maxMs = 30_000 } = options;
  if (!Number.isSafeInteger(count) || count < 1) {
    throw new KlbrError(
      "invalid_input",
      `cannot measure raw commits: count must be a positive integer (got ${count})`,
    );
  }
  const db = new DatabaseSync(join(dir, "raw.sqlite"));
  try {
    const mode = db.prepare("PRAGMA journal_mode = WAL").get() as { journal_mode: string };
    if (mode.journal_mode !== "wal") {
      throw new KlbrError(
        "internal",
        `cannot measure raw commits: WAL is unavailable (got ${mode.journal_mode})`,
      );
    }
    db.exec("PRAGMA synchronous = FULL");
    db.exec("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, body TEXT NOT NULL)");
    const begin = db.prepare("BEGIN IMMEDIATE");
    const insert = db.prepare("INSERT INTO t (body) VALUES (?)");
    const commit = db.prepare("COMMIT");
    const samples: number[] = [];
    const started = performance.now();
    for (let i = 0; i < count && performance.now() - started < maxMs; i++) {
      const t0 = performance.now();
      begin.run();
      insert.run(BODY);
      commit.run();
      samples.push(performance.now() - t0);
    }
    const elapsed = performance.now() - started;
    return {
      count: samples.length,
      perSecond: ratePerSecond(samples.length, elapsed),
      latency: summarize(samples),
    };
  } finally {
    db.close();
  }
}
