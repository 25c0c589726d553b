/**
 * Counters of the work the daemon holds — pending inputs, pending and running jobs, pending
 * timers — kept as that work is admitted and consumed, so `status` and `/health` read them in
 * O(1), whatever the backlog. This module is the only writer of its two tables.
 *
 * The counters live in the connection's `temp` schema and are kept by `TEMP` triggers on
 * `inputs`, `jobs` and `timers`: every writer of those tables, on every path, moves them inside
 * its own transaction, so a rolled-back transaction rolls its counts back too. One move is not a
 * trigger: admission counts the inputs it inserts (always `pending`) with one bump per session
 * and batch ({@linkcode countAdmittedInputs}, called by the inputs writer, the only code that
 * inserts inputs), since a row trigger costs a quarter of the admission SQL. They are never
 * written to the store file and need no migration; each connection that asks for them counts
 * once, then keeps them. Only the owner's connection writes the store, so its counters see
 * every change.
 *
 * The inputs waiting longer than a threshold are counted with a mark: every pending input of
 * the session with `admitted_seq <= mark` was admitted before the threshold, and `below` is how
 * many are pending; triggers move `below` when such an input is taken or given back. Reading
 * advances the mark over the pending inputs that crossed the threshold since the last read —
 * each input is walked over once in its life, not once per read. Admission times follow the
 * sequence (the store's clock); an input stamped earlier than one admitted before it (a clock
 * set back) is counted once the inputs before it have crossed.
 *
 * Proven by "work counters follow admission, frames, expiry, jobs and timers, and roll back
 * with their transaction" in `tests/store/work_counts.test.ts`.
 *
 * @module
 */

import type { Store } from "../store.ts";

/** The counts `status` and `/health` report for one session. */
export interface WorkCounts {
  pendingInputs: number;
  pendingJobs: number;
  runningJobs: number;
  pendingTimers: number;
}

const bump = (what: string, row: "NEW" | "OLD", delta: 1 | -1) =>
  `INSERT INTO temp.work_counts (session_id, what, n) VALUES (${row}.session_id, '${what}', ${delta})
     ON CONFLICT (session_id, what) DO UPDATE SET n = n + (${delta});`;

/**
 * One counter per (table, state): insert (unless its writer counts inserts itself), state
 * change and delete keep it.
 */
function counterTriggers(
  table: string,
  column: string,
  states: string[],
  options: { inserts: boolean } = { inserts: true },
): string {
  return states.map((state) => {
    const what = `${table}:${state}`;
    const name = `work_counts_${table}_${state}`;
    const insert = `
CREATE TEMP TRIGGER IF NOT EXISTS ${name}_insert AFTER INSERT ON main.${table}
  WHEN NEW.${column} = '${state}' BEGIN ${bump(what, "NEW", 1)} END;`;
    return `${options.inserts ? insert : ""}
CREATE TEMP TRIGGER IF NOT EXISTS ${name}_leave AFTER UPDATE OF ${column} ON main.${table}
  WHEN OLD.${column} = '${state}' AND NEW.${column} IS NOT '${state}' BEGIN ${
      bump(what, "OLD", -1)
    } END;
CREATE TEMP TRIGGER IF NOT EXISTS ${name}_enter AFTER UPDATE OF ${column} ON main.${table}
  WHEN NEW.${column} = '${state}' AND OLD.${column} IS NOT '${state}' BEGIN ${
      bump(what, "NEW", 1)
    } END;
CREATE TEMP TRIGGER IF NOT EXISTS ${name}_delete AFTER DELETE ON main.${table}
  WHEN OLD.${column} = '${state}' BEGIN ${bump(what, "OLD", -1)} END;`;
  }).join("\n");
}

const SCHEMA = `
CREATE TEMP TABLE IF NOT EXISTS work_counts (
  session_id TEXT NOT NULL,
  what TEXT NOT NULL,
  n INTEGER NOT NULL,
  PRIMARY KEY (session_id, what)
) WITHOUT ROWID;
CREATE TEMP TABLE IF NOT EXISTS input_marks (
  session_id TEXT PRIMARY KEY,
  warn_ms INTEGER NOT NULL,
  mark_seq INTEGER NOT NULL,
  below INTEGER NOT NULL
) WITHOUT ROWID;
${counterTriggers("inputs", "status", ["pending"], { inserts: false })}
${counterTriggers("jobs", "state", ["pending", "running"])}
${counterTriggers("timers", "state", ["pending"])}
CREATE TEMP TRIGGER IF NOT EXISTS work_counts_inputs_mark AFTER UPDATE OF status ON main.inputs
  WHEN (OLD.status = 'pending') <> (NEW.status = 'pending') BEGIN
  UPDATE temp.input_marks SET below = below + (NEW.status = 'pending') - (OLD.status = 'pending')
    WHERE session_id = NEW.session_id AND NEW.admitted_seq <= mark_seq;
END;
CREATE TEMP TRIGGER IF NOT EXISTS work_counts_inputs_mark_delete AFTER DELETE ON main.inputs
  WHEN OLD.status = 'pending' BEGIN
  UPDATE temp.input_marks SET below = below - 1
    WHERE session_id = OLD.session_id AND OLD.admitted_seq <= mark_seq;
END;`;

const installed = new WeakSet<Store>();

/**
 * Creates the counters and their triggers on this connection and counts the work already in
 * the store, once (each count reads an index of open work only). Later calls do nothing.
 */
export function installWorkCounts(store: Store): void {
  if (installed.has(store)) return;
  store.transaction(() => {
    for (const sql of SCHEMA.split(/;\s*\n(?=CREATE)/)) store.statement(sql).run();
    store.statement("DELETE FROM temp.work_counts").run();
    store.statement("DELETE FROM temp.input_marks").run();
    store.statement(
      `INSERT INTO temp.work_counts (session_id, what, n)
       SELECT session_id, 'inputs:pending', count(*) FROM inputs WHERE status = 'pending'
       GROUP BY session_id`,
    ).run();
    store.statement(
      `INSERT INTO temp.work_counts (session_id, what, n)
       SELECT session_id, 'jobs:' || state, count(*) FROM jobs
       WHERE state IN ('pending', 'running') GROUP BY session_id, state`,
    ).run();
    store.statement(
      `INSERT INTO temp.work_counts (session_id, what, n)
       SELECT session_id, 'timers:pending', count(*) FROM timers WHERE state = 'pending'
       GROUP BY session_id`,
    ).run();
  });
  installed.add(store);
}

/**
 * Counts inputs just inserted (pending) into their sessions, `admitted` new inputs each; for
 * the inputs writer, inside the transaction that inserts them. Does nothing on a connection
 * whose counters are not installed: installing counts what the store holds then.
 */
export function countAdmittedInputs(store: Store, admitted: ReadonlyMap<string, number>): void {
  if (!installed.has(store)) return;
  const add = store.statement(
    `INSERT INTO temp.work_counts (session_id, what, n) VALUES (?, 'inputs:pending', ?)
     ON CONFLICT (session_id, what) DO UPDATE SET n = n + excluded.n`,
  );
  for (const [session, n] of admitted) add.run(session, n);
}

/**
 * The counts of `session`, or (omitted) summed over every session. O(1) in the backlog.
 *
 * @example
 * ```ts
 * const { pendingInputs } = workCounts(store, "default");
 * ```
 */
export function workCounts(store: Store, session?: string): WorkCounts {
  installWorkCounts(store);
  const rows = store.statement(
    `SELECT what, sum(n) AS n FROM temp.work_counts
     WHERE (? IS NULL OR session_id = ?) GROUP BY what`,
  ).all(session ?? null, session ?? null) as { what: string; n: number }[];
  const count = (what: string) => rows.find((row) => row.what === what)?.n ?? 0;
  return {
    pendingInputs: count("inputs:pending"),
    pendingJobs: count("jobs:pending"),
    runningJobs: count("jobs:running"),
    pendingTimers: count("timers:pending"),
  };
}

/** When the oldest pending input of `session` was admitted (ms), or null: one index probe. */
export function oldestPendingAt(store: Store, session: string): number | null {
  const row = store.statement(
    `SELECT admitted_at FROM inputs WHERE session_id = ? AND status = 'pending'
     ORDER BY admitted_seq LIMIT 1`,
  ).get(session) as { admitted_at: number } | undefined;
  return row?.admitted_at ?? null;
}

/**
 * How many inputs of `session` are pending and were admitted before `now - warnMs`, and the
 * last `admitted_seq` among them (the mark): a caller lists them by seq up to it. Amortised
 * O(1): the mark moves over each pending input once.
 */
export function waitingInputs(
  store: Store,
  session: string,
  now: number,
  warnMs: number,
): { count: number; markSeq: number } {
  installWorkCounts(store);
  const threshold = now - warnMs;
  let mark = store.statement(
    "SELECT warn_ms, mark_seq, below FROM temp.input_marks WHERE session_id = ?",
  ).get(session) as { warn_ms: number; mark_seq: number; below: number } | undefined;
  if (mark !== undefined && mark.warn_ms !== warnMs) mark = undefined;
  let { mark_seq: markSeq, below } = mark ?? { mark_seq: 0, below: 0 };
  // The first pending input past the mark that has not crossed bounds the walk.
  const stop = store.statement(
    `SELECT admitted_seq FROM inputs WHERE session_id = ? AND status = 'pending'
     AND admitted_seq > ? AND admitted_at >= ? ORDER BY admitted_seq LIMIT 1`,
  ).get(session, markSeq, threshold) as { admitted_seq: number } | undefined;
  const crossed = store.statement(
    `SELECT count(*) AS n, max(admitted_seq) AS last FROM inputs
     WHERE session_id = ? AND status = 'pending' AND admitted_seq > ? AND admitted_seq < ?`,
  ).get(session, markSeq, stop?.admitted_seq ?? Number.MAX_SAFE_INTEGER) as {
    n: number;
    last: number | null;
  };
  if (crossed.n > 0 || mark === undefined) {
    below += crossed.n;
    markSeq = crossed.last ?? markSeq;
    store.statement(
      `INSERT INTO temp.input_marks (session_id, warn_ms, mark_seq, below) VALUES (?, ?, ?, ?)
       ON CONFLICT (session_id) DO UPDATE SET warn_ms = excluded.warn_ms,
         mark_seq = excluded.mark_seq, below = excluded.below`,
    ).run(session, warnMs, markSeq, below);
  }
  return { count: below, markSeq };
}
