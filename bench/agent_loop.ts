/**
 * Figure 10 — the agent loop's own cost, with a model that answers instantly: how long the
 * daemon takes between the steps of a turn, each beside the sum of its raw parts measured in
 * the same run (the commits the guarantees need at the raw single-commit latency, one raw
 * framed echo per Python round trip a cell needs, one HTTP round trip to a null server), and
 * the daemon's own CPU per turn with its commits and hook calls.
 *
 * Two series of turns on one live daemon (the checkout's behaviour), one turn at a time, each
 * after the last has ended: a one-step turn whose cell sends and waits
 * (`await local.send('done')` then `wait()`), and a two-step turn (`1+1`, then `wait()`).
 * The same daemon gives figure 2's idle and busy acks (send → ack between turns, and while a
 * turn's cell sleeps) and figure 3's cell round trip through the daemon (`cell.started` to
 * `cell.finished` as a client receives them).
 *
 * @module
 */

import { cpuMs } from "./cpu_time.ts";
import { type BenchDaemon, startBenchDaemon } from "./daemon.ts";
import { KlbrError } from "../runtime/core/mod.ts";
import { type InstantModel, startInstantModel, timeNullRoundTrips } from "./instant_model.ts";
import { type LaneDriver, openLane, type SeenRecord } from "./lane_driver.ts";
import {
  agentLoopRows,
  BUSY_CELL,
  type LoopFigures,
  type LoopPeers,
  SEND,
  type TurnStamps,
} from "./agent_loop_rows.ts";
import type { BenchRow } from "./row.ts";
import { workingDenoPid } from "./rss.ts";
import { summarize } from "./stats.ts";

/** Options for {@linkcode benchAgentLoop}: where it runs, and the peers its rows are set beside. */
export interface AgentLoopOptions extends LoopPeers {
  /** A state directory and a workspace the run may fill (both exist). */
  stateDir: string;
  workspace: string;
  /** Untimed turns before each timed series of `turns`. */
  warmup: number;
}

/** Inputs sent one at a time while a turn's cell runs (figure 2d). */
const BUSY_INPUTS = 100;

/** The records a lane received, each stamped on arrival, and waits on them. */
class RecordWatch {
  readonly #seen: (SeenRecord & { at: number })[] = [];
  #waiters: ((record: SeenRecord & { at: number }) => boolean)[] = [];

  /** Watches `lane`'s records from now on. */
  constructor(lane: LaneDriver) {
    lane.onRecord((record) => {
      const stamped = { ...record, at: performance.now() };
      this.#seen.push(stamped);
      if (this.#seen.length > 5000) this.#seen.splice(0, this.#seen.length - 5000);
      this.#waiters = this.#waiters.filter((waiter) => !waiter(stamped));
    });
  }

  /**
   * For each `cell.started` after seq `after`, the time until its `cell.finished` arrived, in
   * ms (among the last 5,000 records seen).
   */
  cellTimes(after: number): number[] {
    const started = new Map<string, number>();
    const times: number[] = [];
    for (const record of this.#seen) {
      if (record.seq <= after) continue;
      const cell = record.data.cell_id as string | undefined;
      if (cell === undefined) continue;
      if (record.type === "cell.started") started.set(cell, record.at);
      else if (record.type === "cell.finished" && started.has(cell)) {
        times.push(record.at - started.get(cell)!);
      }
    }
    return times;
  }

  /** Resolves with the arrival time of the first record after `after` of `type`. */
  arrival(type: string, after: number, timeoutMs = 30_000): Promise<number> {
    const found = this.#seen.find((r) => r.seq > after && r.type === type);
    if (found !== undefined) return Promise.resolve(found.at);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () =>
          reject(
            new KlbrError("worker_timeout", `cannot time the turn: no ${type} after seq ${after}`),
          ),
        timeoutMs,
      );
      this.#waiters.push((record) => {
        if (record.seq <= after || record.type !== type) return false;
        clearTimeout(timer);
        resolve(record.at);
        return true;
      });
    });
  }
}

/**
 * Starts a turn whose cell sleeps, then sends `count` inputs one at a time while it runs;
 * returns each send → ack in ms and how many were acked before the cell finished. Resolves
 * once the turn that consumes those inputs has finished too.
 */
async function busyAcks(
  lane: LaneDriver,
  watch: RecordWatch,
  count: number,
): Promise<{ samples: number[]; during: number }> {
  const before = lane.lastSeq;
  const cellStarted = watch.arrival("cell.started", before);
  let cellDone = false;
  const cellFinished = watch.arrival("cell.finished", before).then(() => (cellDone = true));
  await lane.admit("busy-start", "a turn that runs a while");
  await cellStarted;
  const samples: number[] = [];
  let during = 0;
  let last = 0;
  for (let i = 0; i < count; i++) {
    const t0 = performance.now();
    last = (await lane.admit(`busy-${i}`, `while busy ${i}`)).seq;
    samples.push(performance.now() - t0);
    if (!cellDone) during++;
  }
  await cellFinished;
  await watch.arrival("frame.finished", last);
  return { samples, during };
}

/** Runs `turns` turns one at a time; returns each turn's stamps. */
async function runTurns(
  lane: LaneDriver,
  model: InstantModel,
  watch: RecordWatch,
  prefix: string,
  turns: number,
): Promise<TurnStamps[]> {
  const stamps: TurnStamps[] = [];
  for (let i = 0; i < turns; i++) {
    const before = lane.lastSeq;
    const requestsBefore = model.requests.length;
    const sent = performance.now();
    const sendSeen = prefix === "send" ? watch.arrival("send", before) : undefined;
    const endSeen = watch.arrival("turn.ended", before);
    const finished = watch.arrival("frame.finished", before);
    await lane.admit(`${prefix}-${i}`, `turn ${i}`);
    const acked = performance.now();
    const ended = await endSeen;
    await finished;
    const send = sendSeen === undefined ? ended : await sendSeen;
    const first = model.requests[requestsBefore];
    if (first === undefined) {
      throw new KlbrError("internal", `cannot time turn ${i}: the model got no request`);
    }
    stamps.push({ sent, acked, firstRequest: first.arrivedAt, send, ended });
  }
  return stamps;
}

/** The daemon's store commits, their time in `COMMIT` (ms) and its hook calls so far. */
async function counters(
  lane: LaneDriver,
): Promise<{ commits: number; commitMs: number; hooks: number }> {
  const status = await lane.operate({ kind: "op.status" });
  const session = (status.sessions as Record<string, { hook_calls: number }>).default;
  return {
    commits: status.store_commits as number,
    commitMs: status.store_commit_ms as number,
    hooks: session.hook_calls,
  };
}

/**
 * Measures figure 10 and rows 2d, 3e and 3f, each beside its raw parts or its peer.
 *
 * @throws {KlbrError} `worker_timeout` when a turn does not end; `internal` when the model is
 *   not asked.
 * @example
 * ```ts
 * rows.push(...await benchAgentLoop({ stateDir, workspace, turns: 100, warmup: 10, rawCommitMs, rawEchoMs }));
 * ```
 */
export async function benchAgentLoop(options: AgentLoopOptions): Promise<BenchRow[]> {
  return agentLoopRows(await measureAgentLoop(options), options);
}

/**
 * Runs figure 10's turns on a live daemon with an instant model: one-step turns, two-step
 * turns, then inputs while a turn's cell sleeps; returns what was measured.
 *
 * @throws {KlbrError} `worker_timeout` when a turn does not end; `internal` when the model is
 *   not asked.
 */
export async function measureAgentLoop(options: AgentLoopOptions): Promise<LoopFigures> {
  // One-step turns send and wait; two-step turns run 1+1, then wait.
  let mode: "send" | "steps" | "busy" = "send";
  let slept = false;
  const model = startInstantModel(({ messages }) => {
    const last = messages.at(-1) as { role?: string } | undefined;
    if (mode === "send") return { code: SEND };
    if (mode === "busy") {
      if (slept) return { code: "wait()" };
      slept = true;
      return { code: BUSY_CELL };
    }
    return last?.role === "tool" ? { code: "wait()" } : { code: "1+1" };
  });
  let daemon: BenchDaemon | undefined;
  try {
    daemon = await startBenchDaemon({
      modelUrl: model.url,
      stateDir: options.stateDir,
      workspace: options.workspace,
      // The default hourly budget (600 requests) would stop a run of more than about 280
      // one-step turns; the bench measures the loop, not the budget.
      extraConfig: "budget {\n    model_requests_per_hour 100000\n}\n",
    });
    const { lane } = await openLane({
      port: daemon.port,
      token: daemon.token,
      client: "loop",
      batch: true,
    });
    const watch = new RecordWatch(lane);
    const pid = await workingDenoPid(daemon.pid);
    await runTurns(lane, model, watch, "warm", options.warmup);
    const before = await counters(lane);
    const cpuBefore = await cpuMs(pid);
    const send = await runTurns(lane, model, watch, "send", options.turns);
    const cpu = (await cpuMs(pid) - cpuBefore) / options.turns;
    const after = await counters(lane);
    mode = "steps";
    await runTurns(lane, model, watch, "warm2", options.warmup);
    const stepsFrom = model.requests.length;
    const cellsFrom = lane.lastSeq;
    await runTurns(lane, model, watch, "steps", options.turns);
    const toolToNext = [];
    for (let i = stepsFrom; i + 1 < model.requests.length; i += 2) {
      toolToNext.push(model.requests[i + 1].arrivedAt - model.requests[i].answeredAt);
    }
    const cells = watch.cellTimes(cellsFrom);
    mode = "busy";
    const busy = await busyAcks(lane, watch, BUSY_INPUTS);
    const nullRtt = summarize(await timeNullRoundTrips(model.nullUrl, 200, 20)).p50;
    await lane.close();
    return {
      send,
      cpuMs: cpu,
      commitsPerTurn: (after.commits - before.commits) / options.turns,
      commitMsPerTurn: (after.commitMs - before.commitMs) / options.turns,
      hooksPerTurn: (after.hooks - before.hooks) / options.turns,
      toolToNext,
      cells,
      busy,
      nullRtt,
    };
  } finally {
    await daemon?.stop();
    await model.close();
  }
}
