/**
 * The admission ceiling: raw `node:sqlite` single-row insert + commit in a loop, in WAL with
 * `synchronous=FULL` (the store's durability setting), in a temp dir.
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

let batchFiles = 0;

/** The `inputs` table's shape (migration 1 and later), without foreign keys and triggers. */
const INPUTS_SHAPE = `
CREATE TABLE inputs (
  id TEXT PRIMARY KEY,
  session_id TEXT NOT NULL,
  source_kind TEXT NOT NULL CHECK (source_kind IN ('local', 'discord', 'timer', 'job', 'system')),
  dedupe_key TEXT NOT NULL,
  conversation_id TEXT NOT NULL,
  author TEXT NOT NULL,
  body TEXT NOT NULL CHECK (json_valid(body)),
  received_at INTEGER NOT NULL,
  admitted_at INTEGER NOT NULL,
  admitted_seq INTEGER NOT NULL,
  status TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'consumed', 'dismissed')),
  frame_id TEXT NULL,
  disposition TEXT NULL CHECK (disposition IS NULL OR disposition = 'expired'),
  disposition_reason TEXT NULL,
  disposed_at INTEGER NULL,
  UNIQUE (source_kind, dedupe_key),
  CHECK ((status = 'consumed') = (frame_id IS NOT NULL))
) STRICT;
CREATE INDEX inputs_pending ON inputs (session_id, admitted_seq) WHERE status = 'pending';
CREATE INDEX inputs_frame ON inputs (frame_id) WHERE frame_id IS NOT NULL;
CREATE INDEX inputs_conversation ON inputs (session_id, conversation_id, admitted_seq);
`;

/** Options for {@linkcode measureRawBatches}. */
export interface RawBatchOptions {
  /** The directory the database file is created in (and left in). */
  dir: string;
  /** Rows inserted per transaction. */
  batch: number;
  /** Rows to insert in all (rounded up to whole batches). */
  rows: number;
  /** Stop early after this long, in ms. @default 20_000 */
  maxMs?: number;
}

/** What {@linkcode measureRawBatches} measured. */
export interface RawBatchResult {
  /** Rows per transaction. */
  batch: number;
  /** Rows inserted (whole batches; fewer than asked when `maxMs` ran out). */
  rows: number;
  /** Transactions committed. */
  commits: number;
  /** Rows per second over the whole loop. */
  perSecond: number;
}

/**
 * The batched ceiling: `batch` rows shaped like `inputs` per `BEGIN IMMEDIATE … COMMIT`, in WAL
 * with `synchronous=FULL`, one fresh file per call (`<dir>/raw-batch-<batch>-<n>.sqlite`). The
 * table has the `inputs` table's columns, checks, unique key and indexes, without its foreign
 * keys and triggers (the history index) and without the `input.admitted` event admission also
 * writes: what SQLite itself needs to store an input.
 *
 * @throws {KlbrError} `invalid_input` when `batch` or `rows` is not a positive integer.
 * @example
 * ```ts
 * const { perSecond } = measureRawBatches({ dir, batch: 64, rows: 10_000 });
 * ```
 */
export function measureRawBatches(options: RawBatchOptions): RawBatchResult {
  const { dir, batch, rows, maxMs = 20_000 } = options;
  checkBatchSizes("raw batches", batch, rows);
  const path = join(dir, `raw-batch-${batch}-${++batchFiles}.sqlite`);
  const db = new DatabaseSync(path);
  try {
    db.exec("PRAGMA journal_mode = WAL");
    db.exec("PRAGMA synchronous = FULL");
    db.exec(INPUTS_SHAPE);
    const insert = db.prepare(
      `INSERT INTO inputs (id, session_id, source_kind, dedupe_key, conversation_id, author, body,
         received_at, admitted_at, admitted_seq) VALUES (?, 'default', 'local', ?, 'local:default',
         'owner', ?, ?, ?, ?)`,
    );
    return timeBatches(db, { batch, rows, maxMs }, (i) => {
      const at = Date.now();
      const n = String(i).padStart(6, "0");
      insert.run(
        `in_01JHMMRR878CS2QQ58H${n}`,
        `local:bench:m-${n}`,
        JSON.stringify(`bench input ${n}`),
        at,
        at,
        i + 1,
      );
    });
  } finally {
    db.close();
  }
}

/**
 * Refuses a batch or row count that is not a positive integer, naming `what` is measured.
 *
 * @throws {KlbrError} `invalid_input`.
 */
export function checkBatchSizes(what: string, batch: number, rows: number): void {
  for (const [name, value] of [["batch", batch], ["rows", rows]] as const) {
    if (!Number.isSafeInteger(value) || value < 1) {
      throw new KlbrError(
        "invalid_input",
        `cannot measure ${what}: ${name} must be a positive integer (got ${value})`,
      );
    }
  }
}

/**
 * Writes rows `0…rows-1` with `write`, `batch` to a `BEGIN IMMEDIATE … COMMIT` on `db`, until all
 * are written or `maxMs` passed, and returns the rate.
 *
 * @example
 * ```ts
 * const { perSecond } = timeBatches(db, { batch: 64, rows: 10_000 }, (i) => insert.run(i));
 * ```
 */
export function timeBatches(
  db: DatabaseSync,
  options: { batch: number; rows: number; maxMs?: number },
  write: (row: number) => void,
): RawBatchResult {
  const { batch, rows, maxMs = Infinity } = options;
  const begin = db.prepare("BEGIN IMMEDIATE");
  const commit = db.prepare("COMMIT");
  let inserted = 0;
  let commits = 0;
  const started = performance.now();
  while (inserted < rows && performance.now() - started < maxMs) {
    begin.run();
    for (let i = inserted; i < inserted + batch; i++) write(i);
    commit.run();
    inserted += batch;
    commits++;
  }
  return {
    batch,
    rows: inserted,
    commits,
    perSecond: ratePerSecond(inserted, performance.now() - started),
  };
}
