/** @jsxRuntime automatic */
/** @jsxImportSource preact */
/**
 * The operator's results as tables, read through the daemon's schemas: the health verdict with
 * its reasons and parts, each session's status, the recent frames (each with a button showing
 * its hook traces, so `trace` needs no SQL) and the failed behaviour candidates.
 *
 * @module
 */

import type { ComponentChildren, JSX } from "preact";
import { useState } from "preact/hooks";
import {
  adaptedRouteText,
  type CandidatesResult,
  type FramesResult,
  type HealthReport,
  parseOperatorResult,
  type StatusResult,
  type TraceView,
} from "../../runtime/core/mod.ts";
import type { LaneClient } from "./lane_client.ts";
import { refusal } from "./operator_requests.ts";

/** A duration in words: `850 ms`, `12 s`, `4 min`, `3 h`. */
function duration(ms: number | null): string {
  if (ms === null) return "—";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 120_000) return `${Math.round(ms / 1000)} s`;
  if (ms < 7_200_000) return `${Math.round(ms / 60_000)} min`;
  return `${Math.round(ms / 3_600_000)} h`;
}

function time(at: number | null): string {
  return at === null ? "—" : new Date(at).toLocaleTimeString("en-GB");
}

/** A table with a caption, column headers and rows of cells. */
function Table(
  props: { name: string; caption: string; headers: string[]; rows: ComponentChildren[][] },
): JSX.Element {
  return (
    <div class="table-scroll" tabIndex={0} role="region" aria-label={props.caption}>
      <table class="op-table" data-table={props.name}>
        <caption>{props.caption}</caption>
        <thead>
          <tr>{props.headers.map((h) => <th scope="col" key={h}>{h}</th>)}</tr>
        </thead>
        <tbody>
          {props.rows.map((row, i) => <tr key={i}>{row.map((c, j) => <td key={j}>{c}</td>)}</tr>)}
        </tbody>
      </table>
    </div>
  );
}

/** `/health` in words: the verdict, each reason, and each part's state. */
export function HealthTable({ health }: { health: HealthReport }): JSX.Element {
  const parts: [string, string, string | null][] = [
    ["store", health.store.state, health.store.error],
    ["model", health.model.state, health.model.error],
    ["artifacts", health.artifacts.state, health.artifacts.error],
    ["sandbox", health.sandbox, health.sandbox_reason],
    // `/health` reports the default session's loop only, whichever session the page shows.
    ["default session", health.session_state, health.waiting_reason],
    ...(health.discord === null
      ? []
      : [["discord", health.discord.state, health.discord.fix ?? null] as [string, string, null]]),
    ...health.routes_adapted.map((
      r,
    ): [string, string, string] => [`route ${r.route}`, "adapted", adaptedRouteText(r)]),
  ];
  return (
    <div class="health-table" data-health={health.status}>
      <p>
        Health: <strong>{health.status}</strong>
        {health.reasons.length === 0 ? " — nothing to report." : ":"}
      </p>
      {health.reasons.length > 0 && (
        <ul class="reasons">{health.reasons.map((r) => <li key={r}>{r}</li>)}</ul>
      )}
      <Table
        name="health-parts"
        caption="Parts of the daemon"
        headers={["Part", "State", "Why"]}
        rows={parts.map(([part, state, why]) => [part, state, why ?? "—"])}
      />
    </div>
  );
}

/** `op.status` in words: one row per session, then the hour's budget. */
export function StatusTable({ status }: { status: StatusResult }): JSX.Element {
  const rows = Object.entries(status.sessions).map(([id, s]) => [
    id,
    s.state,
    s.current_frame === null
      ? "idle"
      : `turn ${s.current_frame.number} for ${duration(s.current_frame.running_ms)}`,
    s.pending_inputs === 0
      ? "0"
      : `${s.pending_inputs} (oldest ${duration(s.oldest_pending_age_ms)})`,
    `${s.running_jobs} running, ${s.pending_jobs} pending`,
    `${s.pending_timers} (${s.due_timers} due)`,
    `${s.kernel_generation}${s.kernel_alive ? "" : " (not running)"}`,
  ]);
  const b = status.budget;
  return (
    <>
      <Table
        name="status"
        caption="Sessions"
        headers={["Session", "State", "Turn", "Pending", "Jobs", "Timers", "Kernel"]}
        rows={rows}
      />
      <p class="hint">
        Model requests this hour: {b.model_requests_hour.used} of{" "}
        {b.model_requests_hour.limit}; tokens: {b.tokens_hour.used} of {b.tokens_hour.limit}.
      </p>
    </>
  );
}

function TraceRows({ traces }: { traces: TraceView[] }): JSX.Element {
  return (
    <Table
      name="traces"
      caption="Hook calls of the frame"
      headers={["Trace", "Hook", "Origin", "Took", "Result"]}
      rows={traces.map((t) => [
        t.id,
        t.hook,
        t.origin,
        `${t.duration_ms} ms`,
        t.error === null || t.error === undefined ? "ok" : JSON.stringify(t.error),
      ])}
    />
  );
}

/** The recent frames, the candidates, and a frame's traces, loaded when asked. */
export function OperatorReads({ client }: { client: LaneClient }): JSX.Element {
  const [frames, setFrames] = useState<FramesResult | undefined>(undefined);
  const [candidates, setCandidates] = useState<CandidatesResult | undefined>(undefined);
  const [traces, setTraces] = useState<{ frame: string; traces: TraceView[] } | undefined>();
  const [said, setSaid] = useState<string | undefined>(undefined);
  const session = client.session;
  const ask = async (fn: () => Promise<void>) => {
    try {
      setSaid(undefined);
      await fn();
    } catch (error) {
      setSaid(refusal(error));
    }
  };
  const loadFrames = () =>
    ask(async () =>
      setFrames(
        parseOperatorResult("op.frames", await client.operate({ kind: "op.frames", session })),
      )
    );
  const loadCandidates = () =>
    ask(async () =>
      setCandidates(parseOperatorResult(
        "op.candidates",
        await client.operate({ kind: "op.candidates", session }),
      ))
    );
  const loadTraces = (frame: string) =>
    ask(async () => {
      const result = parseOperatorResult(
        "op.trace",
        await client.operate({ kind: "op.trace", session, target: frame }),
      );
      setTraces({
        frame,
        traces: ("traces" in result ? result.traces : [result.trace]) as TraceView[],
      });
    });
  return (
    <div class="operator-reads">
      <div class="op-buttons">
        <button type="button" onClick={loadFrames}>Recent frames</button>
        <button type="button" onClick={loadCandidates}>Failed candidates</button>
      </div>
      {said !== undefined && <p role="status">{said}</p>}
      {frames !== undefined && (
        frames.frames.length === 0 ? <p>No frames yet.</p> : (
          <Table
            name="frames"
            caption="Recent frames"
            headers={["Frame", "#", "State", "Inputs", "Started", "Took", "Traces"]}
            rows={frames.frames.map((f) => [
              <code key="id">{f.frame_id}</code>,
              f.number,
              f.reason === null ? f.state : `${f.state}: ${f.reason}`,
              f.inputs,
              time(f.created_at),
              f.ended_at === null ? "running" : duration(f.ended_at - f.created_at),
              <button
                key="traces"
                type="button"
                class="link-button"
                aria-label={`Hook calls of frame ${f.number}`}
                onClick={() => loadTraces(f.frame_id)}
              >
                Hook calls
              </button>,
            ])}
          />
        )
      )}
      {traces !== undefined && (
        traces.traces.length === 0
          ? <p>No hook calls recorded for {traces.frame}.</p>
          : <TraceRows traces={traces.traces} />
      )}
      {candidates !== undefined && (
        candidates.candidates.length === 0 ? <p>No failed behaviour candidates.</p> : (
          <Table
            name="candidates"
            caption="Failed behaviour candidates"
            headers={["Candidate", "Action", "Draft", "Failing hooks", "First failure"]}
            rows={candidates.candidates.map((c) => [
              c.id,
              c.action,
              c.draft_id,
              c.failing.join(", "),
              c.checks.find((check) => !check.ok)?.detail ?? "—",
            ])}
          />
        )
      )}
    </div>
  );
}
