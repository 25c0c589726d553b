/** @jsxRuntime automatic */
/** @jsxImportSource preact */
/**
 * The operator panel: the token (pasted once, traded for a session cookie), the session's
 * status and health as tables (read by the daemon's schemas), and stop, drain, resume, reset,
 * compact and activate; recent frames with their hook calls, failed candidates. None of these
 * needs the model.
 *
 * @module
 */

import type { JSX } from "preact";
import { useEffect, useState } from "preact/hooks";
import { parseOperatorResult } from "../../runtime/core/mod.ts";
import { waitingLine } from "./waiting_inputs.ts";
import { askHealth } from "./health_watch.ts";
import { HealthTable, OperatorReads, StatusTable } from "./operator_tables.tsx";
import type { LaneClient } from "./lane_client.ts";
import { OperatorCommandError, type OperatorRequest } from "./operator_requests.ts";
import { StateBadge } from "./state_badge.tsx";
import { TokenForm } from "./token_screen.tsx";

/** Props of {@linkcode OperatorPanel}. */
export interface OperatorPanelProps {
  client: LaneClient;
  /** What the records say, shown where the status does not: skills revision, last activation. */
  fromRecords: {
    skillsRevision: string | undefined;
    activation: { release: string | undefined; epoch: number | undefined } | undefined;
  };
  /** Exchanges a token for a session cookie (or with `undefined` signs out) and reconnects. */
  onToken: (token: string | undefined) => void;
}

type Command = "op.stop" | "op.drain" | "op.resume" | "op.reset" | "op.compact" | "op.activate";

const COMMANDS: { kind: Command; label: string; confirm?: string }[] = [
  { kind: "op.stop", label: "Stop", confirm: "Stop the current turn and take no new frames?" },
  { kind: "op.drain", label: "Drain", confirm: "Finish accepted work, then stop?" },
  { kind: "op.resume", label: "Resume" },
  { kind: "op.reset", label: "Reset", confirm: "Replace the kernel? The Python heap is not kept." },
  { kind: "op.compact", label: "Compact" },
];

/** The operator panel. */
export function OperatorPanel({ client, onToken, fromRecords }: OperatorPanelProps): JSX.Element {
  // The page's header reads the same status: it says this session's state.
  const status = client.status;
  const [result, setResult] = useState<{ ok: boolean; text: string } | undefined>(undefined);
  const [busy, setBusy] = useState<string | undefined>(undefined);
  const [confirming, setConfirming] = useState<Command | undefined>(undefined);
  useEffect(() => {
    if (confirming === undefined) return;
    // Escape is Cancel, wherever the focus is.
    const onKey = (event: KeyboardEvent) => {
      if (event.key === "Escape") setConfirming(undefined);
    };
    document.addEventListener("keydown", onKey);
    return () => document.removeEventListener("keydown", onKey);
  }, [confirming]);
  const [release, setRelease] = useState("");
  const operator = client.connection.role === "operator" && client.connection.phase === "open";

  const run = async (message: OperatorRequest, label: string) => {
    setBusy(label);
    setConfirming(undefined);
    try {
      const answer = await client.operate(message);
      if (message.kind === "op.status") {
        client.setStatus(parseOperatorResult("op.status", answer));
      } else {
        const said = typeof answer.message === "string" ? answer.message : "done";
        setResult({ ok: true, text: `${label}: done. ${said}` });
        void refresh();
        askHealth(client);
      }
    } catch (error) {
      const code = error instanceof OperatorCommandError ? error.code : "error";
      const text = error instanceof Error ? error.message : String(error);
      setResult({ ok: false, text: `${label} refused (${code}): ${text}` });
    } finally {
      setBusy(undefined);
    }
  };
  const refresh = () => run({ kind: "op.status", session: client.session }, "Status");
  const runCommand = (command: { kind: Command; label: string }) =>
    run({ kind: command.kind, session: client.session } as OperatorRequest, command.label);

  // Stop, drain and resume from anywhere move the session's state: the health watch reads
  // `op.status` again after their records and every few seconds.
  useEffect(() => {
    if (operator) void refresh();
  }, [operator]);

  if (!operator) {
    return (
      <section class="panel operator" aria-labelledby="h-operator" id="operator">
        <h2 id="h-operator">Operator</h2>
        {client.connection.role === "viewer" && (
          <p class="hint">This page is a read-only view. The token lets it send and operate.</p>
        )}
        <TokenForm onToken={onToken} error={client.tokenError} />
      </section>
    );
  }

  // The status is authoritative; the records fill in what it does not carry.
  const mine = status?.sessions[client.session];
  const epochNumber = mine?.behavior_epoch ?? fromRecords.activation?.epoch;
  const activeRelease = mine?.active_release ?? fromRecords.activation?.release;
  const skills = fromRecords.skillsRevision;
  const state = mine?.state;
  const waiting = waitingLine(mine);
  // Undefined while an activation waits to be confirmed: it is not one of COMMANDS.
  const confirmed = COMMANDS.find((c) => c.kind === confirming);
  const question = confirmed === undefined
    ? `Activate ${release.trim()} if the behaviour version (epoch) is still ${epochNumber}?`
    : confirmed.confirm;
  const runConfirmed = () =>
    confirmed === undefined
      ? run({
        kind: "op.activate",
        session: client.session,
        epoch: epochNumber ?? 0,
        release: release.trim(),
      }, "Activate")
      : runCommand(confirmed);
  return (
    <section class="panel operator" aria-labelledby="h-operator" id="operator">
      <h2 id="h-operator">Operator</h2>
      <p class="role-line">
        <StateBadge tone="ok" label="operator role granted" />
        <button type="button" class="link-button" onClick={() => onToken(undefined)}>
          Sign out
        </button>
      </p>
      <dl class="status-list">
        <dt>State</dt>
        <dd data-field="state">{state === undefined ? "unknown" : String(state)}</dd>
        <dt title="the behaviour epoch: it grows with each activation">Behaviour version</dt>
        <dd data-field="epoch">{epochNumber ?? "unknown"}</dd>
        <dt>Active release</dt>
        <dd data-field="release" class="wrap">
          {activeRelease === undefined ? "unknown" : String(activeRelease)}
        </dd>
        <dt>Skills revision</dt>
        <dd data-field="skills" class="wrap">
          {skills === undefined ? "unknown" : String(skills)}
        </dd>
        <dt>Waiting inputs</dt>
        <dd data-field="waiting" class="wrap">
          {waiting === undefined
            ? "unknown"
            : <StateBadge tone={waiting.count > 0 ? "warning" : "ok"} label={waiting.label} />}
        </dd>
      </dl>
      <div class="op-buttons">
        <button type="button" disabled={busy !== undefined} onClick={refresh}>
          Refresh status
        </button>
        {COMMANDS.map((command) => (
          <button
            key={command.kind}
            type="button"
            class={command.confirm ? "danger" : ""}
            disabled={busy !== undefined}
            onClick={() => command.confirm ? setConfirming(command.kind) : runCommand(command)}
          >
            {command.label}
          </button>
        ))}
      </div>
      <form
        class="activate-form"
        onSubmit={(event) => {
          event.preventDefault();
          if (release.trim() !== "" && epochNumber !== undefined) setConfirming("op.activate");
        }}
      >
        <label for="activate-release">Release to activate (id or path)</label>
        <input
          id="activate-release"
          value={release}
          onInput={(event) => setRelease((event.currentTarget as HTMLInputElement).value)}
        />
        <button
          type="submit"
          disabled={busy !== undefined || release.trim() === "" ||
            epochNumber === undefined}
        >
          Activate at behaviour version {epochNumber ?? "?"}
        </button>
      </form>
      {confirming !== undefined && (
        <div class="confirm" role="alertdialog" aria-labelledby="confirm-text">
          <p id="confirm-text">{question}</p>
          <button
            type="button"
            class="danger"
            autoFocus
            onClick={runConfirmed}
          >
            Confirm
          </button>
          <button
            type="button"
            onClick={() =>
              setConfirming(undefined)}
          >
            Cancel
          </button>
        </div>
      )}
      <p class="op-result" role="status" aria-live="polite">
        {busy !== undefined ? `${busy}…` : result === undefined ? "" : (
          <>
            <StateBadge tone={result.ok ? "ok" : "error"} label={result.ok ? "done" : "refused"} />
            {" "}
            {result.text}
          </>
        )}
      </p>
      {client.health?.report !== undefined && <HealthTable health={client.health.report} />}
      {status !== undefined && <StatusTable status={status} />}
      <OperatorReads client={client} />
    </section>
  );
}
