/**
 * Figure 10's rows: the agent loop's measured figures (`measureAgentLoop` in `agent_loop.ts`),
 * each set beside its raw parts, its ceiling or its peer.
 *
 * @module
 */

import { below, belowPeer, type BenchRow, makeRow, withinPeer } from "./row.ts";
import { summarize } from "./stats.ts";

/** The cell the busy turn runs while figure 2d's inputs arrive. */
export const BUSY_CELL = "import time\ntime.sleep(2)";

/** The cell of every one-step turn: speak once, then wait. */
export const SEND = "await local.send('done')\nwait()";

/** What one timed turn saw, in bench-process ms. */
export interface TurnStamps {
  sent: number;
  acked: number;
  firstRequest: number;
  send: number;
  ended: number;
}

/** What figure 10's run measured, before it is set beside anything. */
export interface LoopFigures {
  /** The one-step turns' stamps. */
  send: TurnStamps[];
  /** The daemon's user+system CPU per one-step turn, ms. */
  cpuMs: number;
  /** Store commits, their time in `COMMIT` (ms) and hook calls, per one-step turn. */
  commitsPerTurn: number;
  commitMsPerTurn: number;
  hooksPerTurn: number;
  /** Tool call → next request of the two-step turns, ms each. */
  toolToNext: number[];
  /** `cell.started` → `cell.finished` at the client for the two-step turns' cells, ms each. */
  cells: number[];
  /** Send → ack while {@linkcode BUSY_CELL} runs, ms each; `during` were acked before it ended. */
  busy: { samples: number[]; during: number };
  /** A null HTTP round trip to the model's host, p50 ms. */
  nullRtt: number;
}

/** The raw figures the rows are set beside, from earlier phases of the same run. */
export interface LoopPeers {
  /** Timed turns per series (after untimed warm-up ones). */
  turns: number;
  /** The raw single commit p50, ms (`measureRawCommits`, rows shaped like inputs). */
  rawCommitMs: number;
  /** The raw framed echo p50, ms, with the workbench's interpreter. */
  rawEchoMs: number;
  /** The bare `KernelSupervisor` cell round trip p50 (3a), ms; null when not measured. */
  bareCellMs?: number | null;
  /** Jupyter's execute round trip p50 (3c's peer), ms; null when not measured. */
  jupyterCellMs?: number | null;
}

/**
 * Rows 2d, 3e, 3f and 10a–10h from one run's figures.
 *
 * @example
 * ```ts
 * const rows = agentLoopRows(await measureAgentLoop(options), options);
 * ```
 */
export function agentLoopRows(figures: LoopFigures, options: LoopPeers): BenchRow[] {
  const p50 = (values: number[]) => summarize(values).p50;
  const { rawCommitMs: c, rawEchoMs: e } = options;
  const { send, cells, toolToNext, busy, nullRtt, commitsPerTurn, commitMsPerTurn, hooksPerTurn } =
    figures;
  const cpu = figures.cpuMs;
  const parts = (commits: number, echoes: number, http: number) => ({
    label: `raw parts: ${commits} commit${commits === 1 ? "" : "s"}` +
      (echoes ? ` + ${echoes} echo${echoes === 1 ? "" : "es"}` : "") +
      (http ? ` + ${http} HTTP round trip` : ""),
    value: commits * c + echoes * e + http * nullRtt,
  });
  const raw = `raw commit p50 ${c.toFixed(3)} ms, raw framed echo p50 ${e.toFixed(3)} ms, ` +
    `null HTTP round trip p50 ${nullRtt.toFixed(3)} ms`;
  const n = options.turns;
  const sendParts = parts(5, 2, 1);
  const sendValue = p50(send.map((t) => t.send - t.sent));
  // 3e and 3f are one figure beside two peers.
  const cellValue = cells.length ? p50(cells) : null;
  return [
    makeRow({
      id: "2d",
      figure: "send → ack p50, while a turn runs",
      unit: "ms",
      value: p50(busy.samples),
      peer: {
        label: "the same daemon idle (the one-step turns' inputs)",
        value: p50(send.map((t) => t.acked - t.sent)),
      },
      note: `${busy.samples.length} inputs one at a time while a turn's cell runs ` +
        `${JSON.stringify(BUSY_CELL)}; ${busy.during} of them acked before its ` +
        `cell.finished arrived; beside the ${n} one-step turns' inputs, each sent after the ` +
        `previous turn ended (nothing running)`,
    }),
    makeRow({
      id: "3e",
      figure: "cell round trip 1+1 through the daemon, p50",
      unit: "ms",
      value: cellValue,
      peer: {
        label: "bare KernelSupervisor (3a) + 2 raw commits",
        value: options.bareCellMs == null ? null : options.bareCellMs + 2 * options.rawCommitMs,
      },
      goal: withinPeer(1.25, "≤ 1.25× bare + 2 commits"),
      note: `${cells.length} cells of the two-step turns: the arrival of cell.started to ` +
        `the arrival of cell.finished at a lane client, so the cell, its outcome's ` +
        `durable commit and the fan-out; Jupyter's execute round trip in the same run: ` +
        `${
          options.jupyterCellMs == null ? "not measured" : `${options.jupyterCellMs.toFixed(3)} ms`
        }`,
    }),
    makeRow({
      id: "3f",
      figure: "cell round trip 1+1 through the daemon, p50, against Jupyter",
      unit: "ms",
      value: cellValue,
      peer: { label: "Jupyter kernel", value: options.jupyterCellMs ?? null },
      goal: belowPeer("below Jupyter's"),
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
      peer: parts(3, 1, 0),
      note: `${n} two-step turns (1+1, then wait()): from the model writing the tool call's ` +
        `last byte to the next request's arrival; raw parts: the reply with its cell.started, ` +
        `the outcome with its tool result and the next model call (3 commits), one echo for the ` +
        `cell (context.prepare's hook call is the loop's own cost)`,
    }),
    makeRow({
      id: "10c",
      figure: "agent loop: message → send record, p50",
      unit: "ms",
      value: sendValue,
      peer: sendParts,
      goal: belowPeer("< 2× raw parts", 2),
      note: `client sends the input until it receives the send record; raw parts: the ` +
        `input, the frame, the model call, the reply with its cell.started, the send (5 commits), the ` +
        `cell and its local.send RPC (2 echoes), the model request (1 HTTP round trip)`,
    }),
    makeRow({
      id: "10d",
      figure: "agent loop: message → turn.ended record, p50",
      unit: "ms",
      value: p50(send.map((t) => t.ended - t.sent)),
      peer: parts(7, 2, 1),
      note: `the same turns until turn.ended arrives; raw parts: 10c's, the outcome with its ` +
        `tool result and the frame's end (2 commits)`,
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
      peer: { label: "what the guarantees need", value: 7 },
      note: "store commits (op.status store_commits) over the one-step turns, per turn; the " +
        "seven the guarantees need are named in docs/performance.md",
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
}
