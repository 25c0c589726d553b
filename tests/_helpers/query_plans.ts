/**
 * Reads the query plans of recorded statements (`recordingStatements` in `store.ts`) and names
 * every full scan of a table that grows with history.
 *
 * @module
 */

import { DatabaseSync } from "node:sqlite";

/** Which tables grow with history, and which indexes only hold open work (a scan is fine). */
export interface ScanRules {
  growing: readonly string[];
  openWork: readonly string[];
}

/**
 * Explains each statement of `sqls` that reads or writes on the store file `path` (through a
 * read-only connection of its own) and returns every `SCAN` of a growing table (through its
 * alias too), except through an open-work index, with the statement that made it; and how many
 * statements were explained.
 *
 * @example
 * ```ts
 * const { scans } = historyScans(store.path, seen, { growing: ["events"], openWork: [] });
 * assert.deepEqual(scans, []);
 * ```
 */
export function historyScans(
  path: string,
  sqls: Iterable<string>,
  rules: ScanRules,
): { scans: string[]; explained: number } {
  const db = new DatabaseSync(path, { readOnly: true });
  try {
    return scansOf(db, sqls, rules);
  } finally {
    db.close();
  }
}

function scansOf(
  db: DatabaseSync,
  sqls: Iterable<string>,
  rules: ScanRules,
): { scans: string[]; explained: number } {
  const scans: string[] = [];
  let explained = 0;
  for (const sql of sqls) {
    if (!/^\s*(SELECT|INSERT|UPDATE|DELETE|WITH)/i.test(sql)) continue;
    explained++;
    const plan = db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all() as { detail: string }[];
    // A plan names a table by its alias when the query gives one.
    const aliases = new Map(
      [...sql.matchAll(/\b(?:FROM|JOIN)\s+(\w+)(?:\s+(?:AS\s+)?(\w+))?/gi)]
        .filter((m) =>
          m[2] !== undefined && !/^(WHERE|ON|JOIN|ORDER|LIMIT|GROUP|INDEXED)$/i.test(m[2])
        )
        .map((m) => [m[2], m[1]]),
    );
    for (const { detail } of plan) {
      const scan = /^SCAN (\w+)(?: USING (?:COVERING )?INDEX (\w+))?/.exec(detail);
      if (scan === null || !rules.growing.includes(aliases.get(scan[1]) ?? scan[1])) continue;
      if (scan[2] !== undefined && rules.openWork.includes(scan[2])) continue;
      scans.push(`${detail} ← ${sql.replace(/\s+/g, " ")}`);
    }
  }
  return { scans, explained };
}
