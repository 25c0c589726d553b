/**
 * The admission transaction's own SQL, raw: what `admitInputs` asks SQLite to do for each input
 * (the dedupe lookups, one sequence bump for the batch, the `input.admitted` event row, the
 * input row with its real schema, indexes and foreign keys), through `node:sqlite` directly, without klbr's store
 * layer. It separates what the schema costs from what klbr's code costs. The history index of
 * inputs is not in the admission transaction any more (migration 13): the daemon indexes them
 * in a transaction of their own once admission is idle (`indexAdmittedInputs`), so this does
 * not either.
 *
 * @module
 */

import { DatabaseSync } from "node:sqlite";
import { join } from "node:path";
import { ensureSession } from "../store/tables/sessions.ts";
import { openStore } from "../store/store.ts";
import { checkBatchSizes, type RawBatchResult, timeBatches } from "./raw_commit.ts";

let stores = 0;

/**
 * Runs admission's SQL for `rows` inputs, `batch` to a `BEGIN IMMEDIATE … COMMIT`, on a fresh
 * store (migrated by `openStore`, then closed and opened raw with the store's pragmas: WAL,
 * `synchronous=FULL`, foreign keys, `temp_store=MEMORY`) in `<dir>/raw-admission-<n>/`.
 *
 * @throws {KlbrError} `invalid_input` when `batch` or `rows` is not a positive integer.
 * @example
 * ```ts
 * const { perSecond } = measureRawAdmission({ dir, batch: 64, rows: 10_000 });
 * ```
 */
export function measureRawAdmission(
  options: { dir: string; batch: number; rows: number },
): RawBatchResult {
  const { dir, batch, rows } = options;
  checkBatchSizes("raw admission", batch, rows);
  const stateDir = join(dir, `raw-admission-${++stores}`);
  Deno.mkdirSync(stateDir, { recursive: true });
  const store = openStore(stateDir);
  ensureSession(store, "default");
  store.close();
  const db = new DatabaseSync(join(stateDir, "runtime.sqlite"), {
    enableForeignKeyConstraints: true,
  });
  try {
    db.exec("PRAGMA journal_mode = WAL");
    db.exec("PRAGMA synchronous = FULL");
    db.exec("PRAGMA temp_store = MEMORY");
    const lookup = db.prepare(
      "SELECT id, admitted_seq FROM inputs WHERE source_kind = ? AND dedupe_key = ?",
    );
    const bump = db.prepare(
      "UPDATE sessions SET next_seq = next_seq + ?1 WHERE id = ?2 RETURNING next_seq - ?1 AS seq",
    );
    const event = db.prepare(
      "INSERT INTO events (session_id, seq, kind, at, body) VALUES (?, ?, 'input.admitted', ?, ?)",
    );
    const input = db.prepare(
      `INSERT INTO inputs (id, session_id, source_kind, dedupe_key, conversation_id, author, body,
         received_at, admitted_at, admitted_seq)
       VALUES (?, 'default', 'local', ?, 'local:default', 'owner', ?, ?, ?, ?)`,
    );
    const key = (i: number) => `local:bench:m-${String(i).padStart(6, "0")}`;
    let first = 0;
    return timeBatches(db, { batch, rows }, (i) => {
      // As admitInputs: every dedupe lookup of the batch, then one bump numbers the new ones.
      if (i % batch === 0) {
        for (let j = i; j < i + batch; j++) lookup.get("local", key(j));
        first = (bump.get(batch, "default") as { seq: number }).seq;
      }
      const seq = first + i % batch;
      const at = Date.now();
      const n = String(i).padStart(6, "0");
      const id = `in_01JHMMRR878CS2QQ58H${n}`;
      const text = `bench input ${n}`;
      event.run(
        "default",
        seq,
        at,
        JSON.stringify({
          input_id: id,
          source_kind: "local",
          dedupe_key: key(i),
          conversation_id: "local:default",
          author: "owner",
          received_at: at,
          body: text,
        }),
      );
      input.run(id, key(i), JSON.stringify(text), at, at, seq);
    });
  } finally {
    db.close();
  }
}
