/** @jsxRuntime automatic */
/** @jsxImportSource preact */
/**
 * The jobs panel: the session's durable timers and background jobs with their states and
 * causes, from the records, and a cancel button for each job still pending or running (it needs
 * the operator role; the job's group is killed and the agent is woken with its outcome).
 *
 * @module
 */

import type { JSX } from "preact";
import { useState } from "preact/hooks";
import { isoTime, when } from "./format.ts";
import type { LaneClient } from "./lane_client.ts";
import { cancellable, stateBadge, type UnattendedView } from "./jobs_view.ts";
import { OperatorCommandError } from "./operator_requests.ts";
import { StateBadge } from "./state_badge.tsx";

/** Props of {@linkcode JobsPanel}. */
export interface JobsPanelProps {
  client: LaneClient;
  view: UnattendedView;
}

/** Timers and jobs, newest first. */
export function JobsPanel({ client, view }: JobsPanelProps): JSX.Element {
  const [busy, setBusy] = useState<string | undefined>(undefined);
  const [result, setResult] = useState<{ ok: boolean; text: string } | undefined>(undefined);
  const operator = client.connection.role === "operator" && client.connection.phase === "open";
  const cancel = async (jobId: string) => {
    setBusy(jobId);
    try {
      const answer = await client.operate({ kind: "op.cancel_job", job: jobId });
      setResult({ ok: true, text: `job ${jobId} is ${answer.state}` });
    } catch (error) {
      const code = error instanceof OperatorCommandError ? error.code : "error";
      setResult({ ok: false, text: `cancel ${jobId} refused (${code}): ${String(error)}` });
    } finally {
      setBusy(undefined);
    }
  };
  return (
    // Focusable: on a short screen the side column makes it a scroll area, which the keyboard
    // must reach even when it lists nothing to click.
    <section class="panel jobs" aria-labelledby="h-jobs" id="jobs" tabIndex={0}>
      <h2 id="h-jobs">Timers and jobs</h2>
      <h3>Timers</h3>
      {view.timers.length === 0 && <p class="empty">No timers.</p>}
      <ul class="items timers" aria-label="Timers">
        {view.timers.map((timer) => (
          <li key={timer.timerId} data-timer={timer.timerId} data-state={timer.state}>
            <StateBadge {...stateBadge(timer.state)} />{" "}
            {timer.dueAt !== undefined && (
              <time dateTime={isoTime(timer.dueAt)}>due {when(timer.dueAt)}</time>
            )} {timer.wait ? "wait() · " : ""}
            {timer.note || <span class="hint">no note</span>}
            {timer.state === "cancelled" && timer.cause && <span class="hint">· {timer.cause}
            </span>}
          </li>
        ))}
      </ul>
      <h3>Jobs</h3>
      {view.jobs.length === 0 && <p class="empty">No jobs.</p>}
      <ul class="items job-list" aria-label="Jobs">
        {view.jobs.map((job) => (
          <li key={job.jobId} data-job={job.jobId} data-state={job.state}>
            <StateBadge {...stateBadge(job.state)} /> <strong>{job.name}</strong>{" "}
            <span class="hint">({job.kind})</span>
            <p class="event-detail">{job.cause}</p>
            {job.tokensUsed !== undefined && (
              <p class="hint">
                {job.requestsUsed ?? 0} model requests, {job.tokensUsed} tokens
              </p>
            )}
            {cancellable(job.state) && (
              <button
                type="button"
                class="danger"
                disabled={!operator || busy !== undefined}
                aria-label={`Cancel job ${job.name} (${job.jobId})`}
                onClick={() => void cancel(job.jobId)}
              >
                Cancel job
              </button>
            )}
          </li>
        ))}
      </ul>
      <p class="op-result" role="status" aria-live="polite">
        {busy !== undefined ? `cancelling ${busy}…` : result === undefined ? "" : (
          <>
            <StateBadge tone={result.ok ? "ok" : "error"} label={result.ok ? "done" : "refused"} />
            {" "}
            {result.text}
          </>
        )}
      </p>
    </section>
  );
}
