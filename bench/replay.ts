/**
 * Figure 4 — replay: records per second delivered to a client that reconnects with `since=0`
 * over a log of at least 100,000 records, against reading and encoding the same records
 * in-process with `node:sqlite` exactly as the daemon does — stored bodies spliced into
 * `records` messages (the store-side ceiling, no socket).
 *
 * The log is filled by opening the stopped daemon's store directly and admitting inputs with
 * `admitInput`, 5,000 to a transaction.
 *
 * @module
 */

import { readEventTexts } from "../store/tables/events.ts";
import { localDedupeKey } from "../store/tables/dedupe_keys.ts";
import { admitInput } from "../store/tables/inputs.ts";
import { requireSession } from "../store/tables/sessions.ts";
import { openStore, type Store } from "../store/store.ts";
import { KlbrError } from "../runtime/core/mod.ts";
import { storedBatches } from "../runtime/lanes/mod.ts";
import { openLane, type ReplayStats } from "./lane_driver.ts";
import { type BenchRow, makeRow } from "./row.ts";
import { median, ratioGoal, spread } from "./peers/admission_rows.ts";
import { ratePerSecond } from "./stats.ts";
import { cpuMs } from "./cpu_time.ts";

/** What {@linkcode seedRecords} wrote and what reading it back in-process cost. */
export interface SeedResult {
  /** Inputs admitted (one `input.admitted` record each). */
  seeded: number;
  /** The session's last seq afterwards: the records a `since=0` replay must deliver. */
  head: number;
  /**
   * Records per second of reading the whole log and encoding it as the daemon does: bodies
   * as stored JSON text, spliced into `records` messages of up to 256 KiB.
   */
  readPerSecond: number;
}

/** A replay, and the CPU time the daemon spent on it when its pid was given. */
export interface MeasuredReplay extends ReplayStats {
  /** The daemon's CPU time from `hello` until the client had `replayed`, in ms. */
  daemonCpuMs?: number;
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
    return { seeded: wanted, head, readPerSecond: timeRead(store, head) };
  } finally {
    store.close();
  }
}

/**
 * Times reading the whole log page by page as the daemon does, in records per second.
 *
 * @throws {KlbrError} `internal` when it does not read exactly `head` records.
 */
function timeRead(store: Store, head: number): number {
  const started = performance.now();
  let records = 0;
  let chars = 0;
  for (let since = 0; since < head;) {
    const page = readEventTexts(store, "default", { since, limit: PAGE });
    if (page.length === 0) break;
    for (const batch of storedBatches("default", page)) chars += batch.text.length;
    records += page.length;
    since = page.at(-1)!.seq;
  }
  const elapsed = performance.now() - started;
  if (records !== head || chars === 0) {
    throw new KlbrError(
      "internal",
      `cannot read the seeded log back: expected ${head} records (got ${records})`,
    );
  }
  return ratePerSecond(records, elapsed);
}

/**
 * Reconnects to a daemon with `since=0` and times the catch-up until `replayed`; with the
 * daemon's `pid`, also the CPU time it spent meanwhile.
 *
 * @throws {KlbrError} `internal` when the records are not exactly 1…head in order.
 */
export async function measureReplay(
  options: { port: number; token: string; head: number; pid?: number },
): Promise<MeasuredReplay> {
  const cpuBefore = options.pid === undefined ? undefined : await cpuMs(options.pid);
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
  if (cpuBefore === undefined) return replay;
  return { ...replay, daemonCpuMs: await cpuMs(options.pid!) - cpuBefore };
}

/**
 * Builds figure 4's row from a seeded log, its first replay and the interleaved rates of the
 * cold daemon (`ours`) and the bare replay server (`theirs`, `bench/peers/replay_server.ts`).
 */
export function replayRow(
  seed: SeedResult,
  replay: MeasuredReplay,
  rates: { ours: number[]; theirs: number[] },
): BenchRow {
  const cpu = replay.daemonCpuMs === undefined ? "" : `; the first cold daemon spent ` +
    `${Math.round(replay.daemonCpuMs)} ms of CPU on it`;
  return makeRow({
    id: "4a",
    figure: `cold replay to a since=0 client, ${replay.records.toLocaleString("en-US")} records`,
    unit: "records/s",
    value: median(rates.ours),
    peer: { label: "bare WebSocket replay server", value: median(rates.theirs) },
    goal: ratioGoal({ min: 0.8 }, "≥ 0.8× bare server"),
    note: `medians; ${spread(rates.ours, rates.theirs)}; hello (batch: true) to replayed ` +
      `over /v2 from a daemon just started, every record parsed by the client and checked ` +
      `contiguous; ${seed.seeded.toLocaleString("en-US")} inputs seeded with admitInput ` +
      `(${BATCH.toLocaleString("en-US")} per transaction) into the stopped daemon's store; ` +
      `peer: bench/peers/replay_server.ts just started on the same file (pages of ${PAGE}, ` +
      `stored bodies spliced into \`records\` messages), same client; in-process ` +
      `read+encode, the former peer: ${rounded(seed.readPerSecond)} records/s` + cpu,
  });
}

function rounded(value: number): string {
  return Math.round(value).toLocaleString("en-US");
}
