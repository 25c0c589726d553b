/**
 * Figure 4 — replay: records per second delivered to a client that reconnects with `since=0`
 * over a log of at least 100,000 records, against reading and encoding the same records
 * in-process with `node:sqlite` (the store-side ceiling, no socket).
 *
 * The log is filled by opening the stopped daemon's store directly and admitting inputs with
 * `admitInput`, 5,000 to a transaction.
 *
 * @module
 */

import { readEvents } from "../store/events.ts";
import { localDedupeKey } from "../store/dedupe_keys.ts";
import { admitInput } from "../store/inputs.ts";
import { requireSession } from "../store/sessions.ts";
import { openStore } from "../store/store.ts";
import { KlbrError } from "../runtime/core/mod.ts";
import { openLane, type ReplayStats } from "./lane_driver.ts";
import { atLeastOfPeer, type BenchRow, makeRow } from "./row.ts";
import { ratePerSecond } from "./stats.ts";

/** What {@linkcode seedRecords} wrote and what reading it back in-process cost. */
export interface SeedResult {
  /** Inputs admitted (one `input.admitted` record each). */
  seeded: number;
  /** The session's last seq afterwards: the records a `since=0` replay must deliver. */
  head: number;
  /** Records per second of reading the whole log and encoding each as a lane record. */
  readPerSecond: number;
}

const BATCH = 5_000;
const PAGE = 1_000;

/**
 * Admits inputs into the stopped daemon's store until its default session holds at least
 * `records` records, then times reading them all back and encoding each as the daemon does.
 *
 * When it returns every seeded input is committed and the store is closed.
 *
 * @throws {KlbrError} `owner_locked` when a daemon still owns `stateDir`; what `admitInput`
 *   throws.
 * @example
 * ```ts
 * const { head } = seedRecords(stateDir, 100_000);
 * ```
 */
export function seedRecords(stateDir: string, records: number): SeedResult {
  const store = openStore(stateDir, { create: false });
  try {
    const startHead = requireSession(store, "default").nextSeq - 1;
    const wanted = Math.max(0, records - startHead);
    for (let done = 0; done < wanted;) {
      const batch = Math.min(BATCH, wanted - done);
      store.transaction(() => {
        for (let i = done; i < done + batch; i++) {
          admitInput(store, {
            session: "default",
            sourceKind: "local",
            dedupeKey: localDedupeKey("seed", `s-${i}`),
            conversationId: "local:default",
            author: "owner",
            body: `seeded input ${i}`,
          });
        }
      });
      done += batch;
    }
    const head = requireSession(store, "default").nextSeq - 1;
    const started = performance.now();
    let read = 0;
    let bytes = 0;
    for (let since = 0; since < head;) {
      const page = readEvents(store, "default", { since, limit: PAGE });
      if (page.length === 0) break;
      for (const event of page) {
        bytes += JSON.stringify({
          kind: "record",
          session: "default",
          seq: event.seq,
          at: event.at,
          type: event.kind,
          data: event.body ?? {},
        }).length;
      }
      read += page.length;
      since = page[page.length - 1].seq;
    }
    const elapsed = performance.now() - started;
    if (read !== head || bytes === 0) {
      throw new KlbrError(
        "internal",
        `cannot read the seeded log back: expected ${head} records (got ${read})`,
      );
    }
    return { seeded: wanted, head, readPerSecond: ratePerSecond(read, elapsed) };
  } finally {
    store.close();
  }
}

/**
 * Reconnects to a daemon with `since=0` and times the catch-up until `replayed`.
 *
 * @throws {KlbrError} `internal` when the records are not exactly 1…head in order.
 */
export async function measureReplay(
  options: { port: number; token: string; head: number },
): Promise<ReplayStats> {
  const { lane, replay } = await openLane({
    port: options.port,
    token: options.token,
    client: "replay",
    since: 0,
    batch: true,
  });
  await lane.close();
  if (!replay.contiguous || replay.records < options.head) {
    throw new KlbrError(
      "internal",
      `cannot measure replay: expected records 1…${options.head} in order (got ${replay.records}, contiguous ${replay.contiguous})`,
    );
  }
  return replay;
}

/** Builds figure 4's row from a seeded log and its replay. */
export function replayRow(seed: SeedResult, replay: ReplayStats, id = "4a"): BenchRow {
  return makeRow({
    id,
    figure: `replay to a since=0 client, ${replay.records.toLocaleString("en-US")} records`,
    unit: "records/s",
    value: ratePerSecond(replay.records, replay.elapsedMs),
    peer: { label: "in-process read+encode", value: seed.readPerSecond },
    goal: atLeastOfPeer(0.8, "≥ 0.8× read+encode"),
    note: `hello (batch: true) to replayed over /v2, records in \`records\` messages of up ` +
      `to 256 KiB, every record parsed by the client and checked ` +
      `contiguous; ${seed.seeded.toLocaleString("en-US")} inputs seeded with admitInput ` +
      `(${BATCH.toLocaleString("en-US")} per transaction) into the stopped daemon's store; ` +
      `peer: readEvents pages of ${PAGE} + JSON encoding in one process, no socket`,
  });
}
