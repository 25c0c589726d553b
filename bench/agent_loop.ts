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

import { startTestDaemon, type TestDaemon } from "../tests/_helpers/daemon.ts";
import { KlbrError } from "../runtime/core/mod.ts";
import { type InstantModel, startInstantModel, timeNullRoundTrips } from "./instant_model.ts";
import { type LaneDriver, openLane, type SeenRecord } from "./lane_driver.ts";
import { below, type BenchRow, makeRow } from "./row.ts";
import { workingDenoPid } from "./rss.ts";
import { summarize } from "./stats.ts";

/** Options for {@linkcode benchAgentLoop}. */
export interface AgentLoopOptions {
  /** A state directory and a workspace the run may fill (both exist). */
  stateDir: string;
  workspace: string;
  /** Timed turns per series (after `warmup` untimed ones). */
  turns: number;
  warmup: number;
  /** The raw single commit p50, ms (`measureRawCommits`, rows shaped like inputs). */
  rawCommitMs: number;
  /** The raw framed echo p50, ms, with the workbench's interpreter. */
  rawEchoMs: number;
  /** The bare `KernelSupervisor` cell round trip p50 (3a), ms; null when not measured. */
  bareCellMs?: number | null;
  /** Jupyter's execute round trip p50 (3c's peer), ms; null when not measured. */
  jupyterCellMs?: number | null;
  /** Inputs sent one at a time while a turn's cell runs (figure 2d). @default 100 */
  busyInputs?: number;
  /** Extra `deno run` flags for the daemon (profiling). */
  denoFlags?: string[];
}

/** The cell the busy turn runs while figure 2d's inputs arrive. */
const BUSY_CELL = "import time\ntime.sleep(2)";

const SEND = "await local.send('done')\nwait()";

/** What one timed turn saw, in bench-process ms. */
interface TurnStamps {
  sent: number;
  acked: number;
  firstRequest: number;
  send: number;
  ended: number;
}

/** Reads the daemon's user+system CPU time in ms from `/proc/<pid>/stat`. */
async function cpuMs(pid: number): Promise<number> {
  // Read through `cat`: Deno asks for every permission to read /proc/<pid> directly.
  const out = await new Deno.Command("cat", { args: [`/proc/${pid}/stat`], stderr: "null" })
    .output();
  const stat = new TextDecoder().decode(out.stdout);
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  // utime and stime are fields 14 and 15 of the file: 12 and 13 after the command name.
  return (Number(fields[11]) + Number(fields[12])) * 1000 / CLOCK_TICKS;
}

/** Clock ticks per second of `/proc` times (`getconf CLK_TCK`; 100 on Linux). */
const CLOCK_TICKS = 100;

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
 * Measures figure 10.
 *
 * @throws {KlbrError} `worker_timeout` when a turn does not end; `internal` when the model is
 *   not asked.
 */
export async function benchAgentLoop(options: AgentLoopOptions): Promise<BenchRow[]> {
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
  let daemon: TestDaemon | undefined;
  try {
    daemon = await startTestDaemon({
      modelUrl: model.url,
      stateDir: options.stateDir,
      workspace: options.workspace,
      denoFlags: options.denoFlags,
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
    const busy = await busyAcks(lane, watch, options.busyInputs ?? 100);
    const nullRtt = summarize(await timeNullRoundTrips(model.nullUrl, 200, 20)).p50;
    await lane.close();
    const p50 = (values: number[]) => summarize(values).p50;
    const { rawCommitMs: c, rawEchoMs: e } = options;
    const commitsPerTurn = (after.commits - before.commits) / options.turns;
    const commitMsPerTurn = (after.commitMs - before.commitMs) / options.turns;
    const hooksPerTurn = (after.hooks - before.hooks) / options.turns;
    const parts = (commits: number, echoes: number, http: number) => ({
      label: `raw parts: ${commits} commit${commits === 1 ? "" : "s"}` +
        (echoes ? ` + ${echoes} echo${echoes === 1 ? "" : "es"}` : "") +
        (http ? ` + ${http} HTTP round trip` : ""),
      value: commits * c + echoes * e + http * nullRtt,
    });
    const raw = `raw commit p50 ${c.toFixed(3)} ms, raw framed echo p50 ${e.toFixed(3)} ms, ` +
      `null HTTP round trip p50 ${nullRtt.toFixed(3)} ms`;
    const n = options.turns;
    const sendParts = parts(6, 2, 1);
    const sendValue = p50(send.map((t) => t.send - t.sent));
    const ackPeer = { label: "raw commit p50", value: c };
    const ackGoal = {
      text: "≤ 1.5× raw commit",
      test: (v: number, p: number | null) => p === null ? null : v <= 1.5 * p,
    };
    return [
      makeRow({
        id: "2c",
        figure: "send → ack p50, idle daemon",
        unit: "ms",
        value: p50(send.map((t) => t.acked - t.sent)),
        peer: ackPeer,
        goal: ackGoal,
        note: `the ${n} one-step turns' inputs, each sent after the previous turn ended ` +
          `(nothing running); from the client's send to its ack; ${raw}`,
      }),
      makeRow({
        id: "2d",
        figure: "send → ack p50, while a turn runs",
        unit: "ms",
        value: p50(busy.samples),
        peer: ackPeer,
        goal: ackGoal,
        note: `${busy.samples.length} inputs one at a time while a turn's cell runs ` +
          `${JSON.stringify(BUSY_CELL)}; ${busy.during} of them acked before its ` +
          `cell.finished arrived`,
      }),
      makeRow({
        id: "3e",
        figure: "cell round trip 1+1 through the daemon, p50",
        unit: "ms",
        value: cells.length ? p50(cells) : null,
        peer: { label: "bare KernelSupervisor (3a)", value: options.bareCellMs ?? null },
        note: `${cells.length} cells of the two-step turns: the arrival of cell.started to ` +
          `the arrival of cell.finished at a lane client, so the cell, its outcome's ` +
          `durable commit and the fan-out; Jupyter's execute round trip in the same run: ` +
          `${
            options.jupyterCellMs == null
              ? "not measured"
              : `${options.jupyterCellMs.toFixed(3)} ms`
          }`,
      }),
      makeRow({
        id: "3f",
        figure: "cell round trip 1+1 through the daemon, p50, against Jupyter",
        unit: "ms",
        value: cells.length ? p50(cells) : null,
        peer: { label: "Jupyter kernel", value: options.jupyterCellMs ?? null },
        goal: { text: "below Jupyter's", test: (v, p) => p === null ? null : v < p },
        note: "3e again, beside Jupyter's execute_request round trip (3c's peer)",
      }),
      makeRow({
        id: "10a",
        figure: "agent loop: ack → first model request, p50",
        unit: "ms",
        value: p50(send.map((t) => t.firstRequest - t.acked)),
        peer: parts(2, 0, 0),
        note: `${n} one-step turns (${JSON.stringify(SEND)}) one at a time on a live daemon, ` +
          `checkout behaviour, a model answering in one chunk at once; from the client's ack to ` +
          `the request's arrival at the model; raw parts: the frame's commit and the model call's ` +
          `(attention.plan, model.plan and context.prepare are the loop's own cost); ${raw}`,
      }),
      makeRow({
        id: "10b",
        figure: "agent loop: tool call → next model request, p50",
        unit: "ms",
        value: p50(toolToNext),
        peer: parts(5, 1, 0),
        note: `${n} two-step turns (1+1, then wait()): from the model writing the tool call's ` +
          `last byte to the next request's arrival; raw parts: the reply, cell.started, the ` +
          `outcome, the tool result and the next model call (5 commits), one echo for the cell ` +
          `(context.prepare's hook call is the loop's own cost)`,
      }),
      makeRow({
        id: "10c",
        figure: "agent loop: message → send record, p50",
        unit: "ms",
        value: sendValue,
        peer: sendParts,
        goal: { text: "< 2× raw parts", test: (v, p) => p === null ? null : v < 2 * p },
        note: `client sends the input until it receives the send record; raw parts: the ` +
          `input, the frame, the model call, the reply, cell.started, the send (6 commits), the ` +
          `cell and its local.send RPC (2 echoes), the model request (1 HTTP round trip)`,
      }),
      makeRow({
        id: "10d",
        figure: "agent loop: message → turn.ended record, p50",
        unit: "ms",
        value: p50(send.map((t) => t.ended - t.sent)),
        peer: parts(9, 2, 1),
        note: `the same turns until turn.ended arrives; raw parts: 10c's and the outcome, the ` +
          `tool result and the frame's end (3 commits)`,
      }),
      makeRow({
        id: "10e",
        figure: "agent loop: daemon CPU per one-step turn",
        unit: "ms",
        value: cpu,
        peer: { label: "10c wall time", value: sendValue },
        goal: below(5, "< 5 ms"),
        note: `user+system CPU of the daemon process (/proc/<pid>/stat) over the ${n} ` +
          `one-step turns, per turn: an upper bound of message → send's host time; ` +
          `${commitsPerTurn.toFixed(1)} commits and ${hooksPerTurn.toFixed(1)} hook calls per turn`,
      }),
      makeRow({
        id: "10f",
        figure: "agent loop: commits per one-step turn",
        unit: "count",
        value: commitsPerTurn,
        peer: { label: "what the guarantees need", value: 9 },
        note: "store commits (op.status store_commits) over the one-step turns, per turn; the " +
          "nine the guarantees need are named in docs/performance.md",
      }),
      makeRow({
        id: "10g",
        figure: "agent loop: hook calls per one-step turn",
        unit: "count",
        value: hooksPerTurn,
        peer: { label: "each hook once per request", value: 3 },
        note: "calls that reached the hook worker (op.status hook_calls), per turn; a " +
          "one-step turn makes one request: attention.plan, model.plan and context.prepare " +
          "once each (turn.next is asked only after a reply without a tool call)",
      }),
      makeRow({
        id: "10h",
        figure: "agent loop: time in COMMIT per one-step turn",
        unit: "ms",
        value: commitMsPerTurn,
        peer: { label: "10c wall time", value: sendValue },
        note: `wall time the daemon's store spent in COMMIT itself (op.status store_commit_ms: ` +
          `the WAL write and its fsync) over the one-step turns, per turn: ` +
          `${(commitMsPerTurn / Math.max(commitsPerTurn, 1)).toFixed(3)} ms a commit on average ` +
          `against ${c.toFixed(3)} ms for a raw one-row commit; it spans the whole turn, so ` +
          `part of it falls after the send`,
      }),
    ];
  } finally {
    await daemon?.stop();
    await model.close();
  }
}
