/**
 * The write of admitted inputs: the rows, their `input.admitted` records and their sequence
 * numbers. Private to `inputs.ts`, the `inputs` table's writer.
 *
 * @module
 */

import { assert, newId } from "../../runtime/core/mod.ts";
import type { ParsedInput } from "../schema/_input_schema.ts";
import { insertEventAt } from "./events.ts";
import type { AdmitResult } from "./inputs.ts";
import { allocateSeqs } from "./sessions.ts";
import type { Store } from "../store.ts";

/**
 * Writes checked inputs inside the caller's transaction, in order: the new ones of each session
 * are numbered with one bump of its sequence, and a dedupe key admitted before, or earlier in
 * the batch, writes nothing and answers with the first admission.
 */
export function writeInputs(store: Store, batch: readonly ParsedInput[]): AdmitResult[] {
  assert(store.inTransaction, "an input is written inside a transaction");
  const results: (AdmitResult | undefined)[] = new Array(batch.length);
  const firstOf = new Map<string, number>();
  const fresh: number[] = [];
  const counts = new Map<string, number>();
  const lookup = store.statement(
    "SELECT id, admitted_seq FROM inputs WHERE source_kind = ? AND dedupe_key = ?",
  );
  batch.forEach((data, i) => {
    const key = `${data.sourceKind}\n${data.dedupeKey}`;
    if (firstOf.has(key)) return;
    const first = lookup.get(data.sourceKind, data.dedupeKey) as
      | { id: string; admitted_seq: number }
      | undefined;
    if (first !== undefined) {
      results[i] = { inputId: first.id, seq: first.admitted_seq, duplicate: true };
      return;
    }
    firstOf.set(key, i);
    fresh.push(i);
    counts.set(data.session, (counts.get(data.session) ?? 0) + 1);
  });
  const next = new Map<string, number>();
  for (const [session, count] of counts) next.set(session, allocateSeqs(store, session, count));
  for (const i of fresh) {
    const seq = next.get(batch[i].session)!;
    next.set(batch[i].session, seq + 1);
    results[i] = writeNewInput(store, batch[i], seq);
  }
  return batch.map((data, i) => {
    const result = results[i] ?? results[firstOf.get(`${data.sourceKind}\n${data.dedupeKey}`)!]!;
    return results[i] === undefined ? { ...result, duplicate: true } : result;
  });
}

/** Writes a new input and its `input.admitted` record at `seq`, taken for it by the caller. */
function writeNewInput(store: Store, data: ParsedInput, seq: number): AdmitResult {
  const now = store.clock();
  const inputId = newId("input", now);
  insertEventAt(store, data.session, seq, "input.admitted", {
    input_id: inputId,
    source_kind: data.sourceKind,
    dedupe_key: data.dedupeKey,
    conversation_id: data.conversationId,
    author: data.author,
    received_at: data.receivedAt ?? now,
    body: data.body,
    ...(data.clientMsgId === undefined ? {} : { client_msg_id: data.clientMsgId }),
  });
  store.statement(
    `INSERT INTO inputs (id, session_id, source_kind, dedupe_key, conversation_id, author, body,
       received_at, admitted_at, admitted_seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  ).run(
    inputId,
    data.session,
    data.sourceKind,
    data.dedupeKey,
    data.conversationId,
    data.author,
    data.bodyText,
    data.receivedAt ?? now,
    now,
    seq,
  );
  return { inputId, seq, duplicate: false };
}
